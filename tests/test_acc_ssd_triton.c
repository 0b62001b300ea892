/* The SSD scan's GPU rate and its host launches describe the same kernels:
 * mamba_ssm's Triton path (cluster.host.ssd_launches_*).  Hopper's tables
 * take the H800 tilelang chunk_scan share of peak (kernels.md §5); the
 * Blackwell ones the Triton scan's share that the CuTe DSL kernel's gain in
 * Nano prefill implies (Megatron-LM PR #5829, kernels/b200.cfg: 0.015), one
 * figure for the four of them (tests/test_nano_ops.c checks the share). */
#include <criterion/criterion.h>

#include "acc_cluster.h"
#include "compute.h"

Test(ssd_triton, blackwell_scans_at_the_triton_share)
{
    sim h;
    const cluster_spec *hc = cluster_of(&h, "dgx-h100");
    double hopper = hc->compute.kernels.ssd_efficiency;
    cr_assert_float_eq(hopper, 0.14, 1e-12);
    cr_assert_eq(hc->host.ssd_launches_fwd, 5); /* the Triton kernels of _mamba_chunk_scan_combined_fwd */
    static const char *const blackwell[] = { "dgx-b200", "dgx-b300", "gb200-nvl72", "gb300-nvl72" };
    for (size_t i = 0; i < sizeof blackwell / sizeof blackwell[0]; i++) {
        sim x;
        const cluster_spec *c = cluster_of(&x, blackwell[i]);
        cr_assert_float_eq(c->compute.kernels.ssd_efficiency, 0.015, 1e-12, "%s", blackwell[i]);
        cr_assert_eq(c->host.ssd_launches_fwd, hc->host.ssd_launches_fwd, "%s", blackwell[i]);
        /* the forward scan of 1 TFLOP at 0.015 of the bf16 peak */
        double t = compute_ssd_s(c, 1e12, 0.0, false) - c->compute.kernel_overhead_s;
        cr_assert_float_eq(t, 1e12 / (0.015 * c->gpu.peak_bf16_flops_per_s * c->compute.sustained_fraction),
                           1e-9, "%s", blackwell[i]);
        sim_free(&x);
    }
    sim_free(&h);
}
