/* Per-tensor FP8 expert GEMMs on Blackwell read the grouped figures of
 * the kernel table (kernels.md §1.3: TE's multi-stream cuBLAS at MXFP8,
 * the one FP8 MMA rate of SM100, kernels.md §0), not the dense best-shape
 * sweep (MAMF), which training shapes sit 10-35% below (§7.1). */
#include <criterion/criterion.h>

#include "acc_cluster.h"
#include "compute.h"

/* flop/s of a grouped GEMM, less the launch. */
static double rate(const cluster_spec *c, gemm_dtype dt, double g, double m, double n, double k)
{
    double t = compute_grouped_gemm_s(c, g, m, n, k, dt) - c->compute.kernel_overhead_s;
    cr_assert(t > 0);
    return 2.0 * g * m * n * k / t;
}

Test(fp8_grouped, blackwell_per_tensor_fp8_groups_run_at_the_grouped_figure)
{
    static const struct {
        const char *topo;
        double tflops; /* the grouped fprop figure at groups 8, K 7168, N 2048 */
        double m;
    } cases[] = { { "gb200-nvl72", 2672.0, 4096 }, { "gb300-nvl72", 2672.0, 4096 }, { "dgx-b200", 2303.0, 16384 },
                  { "dgx-b300", 2303.0, 16384 } };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sim x;
        const cluster_spec *c = cluster_of(&x, cases[i].topo);
        double sf = c->compute.sustained_fraction;
        double fp8 = rate(c, GEMM_FP8, 8, cases[i].m, 2048, 7168);
        cr_assert_float_eq(fp8, cases[i].tflops * 1e12 * sf, 1e-6 * cases[i].tflops * 1e12, "%s: %g TFLOP/s",
                           cases[i].topo, fp8 / 1e12);
        /* the same rate as MXFP8 at any grouped shape: Nano's 16 experts of 12288 rows, K 2688 */
        cr_assert_float_eq(rate(c, GEMM_FP8, 16, 12288, 1856, 2688), rate(c, GEMM_MXFP8, 16, 12288, 1856, 2688),
                           1e3, "%s", cases[i].topo);
        /* a dense GEMM keeps the dense table: above the grouped figure at the MAMF's best shape */
        cr_assert(rate(c, GEMM_FP8, 1, 19456, 5120, 1536) > fp8, "%s", cases[i].topo);
        sim_free(&x);
    }
}
