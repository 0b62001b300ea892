/* Simulator speed: one training step of GPT-3 175B on 16,384 H100s
 * (TP 8, PP 16, VP 3, DP 128, GBS 2048, MBS 1), once with every kernel a
 * task and once two-level (the default), and how the wall time grows when
 * PP, microbatches and layers each double, and what modeling the host
 * costs (host on, the default, against a host that issues at no cost),
 * and what deriving a long step from two short samples saves
 * (sim.steady_extension, step_period.h) against simulating every
 * microbatch (tasks and events are the whole step's either way, so events
 * per second is what the whole simulation would need to match it).
 * Prints wall time, tasks, events and events per second for each case. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "config.h"
#include "step.h"
#include "strategy.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int run_case(const char *label, const char *const *overrides, int n, bool keep_ops, double *wall_out)
{
    sim_err err;
    sim_err_clear(&err);
    cfg_t *cfg = cfg_create(NULL);
    for (int i = 0; i < n && cfg; i++)
        if (cfg_set_override(cfg, overrides[i], &err) != SIM_OK)
            goto fail;
    run_inputs in;
    strategy_t s;
    if (!cfg || cfg_resolve(cfg, &in, &err) != SIM_OK ||
        strategy_resolve(&s, &in.model, &in.cluster, &in.par, &in.train, &in.ddp, &err) != SIM_OK)
        goto fail;
    in.sim.keep_ops = keep_ops;
    /* Best of several repetitions: the figure is the simulator's cost, not
     * the machine's noise. */
    double best = 1e30;
    const step_result *r = NULL;
    step_t *st = NULL;
    for (int rep = 0; rep < 20; rep++) {
        step_destroy(st);
        double t0 = now_s();
        if (step_run(&st, &in, &s, &err) != SIM_OK)
            goto fail;
        double dt = now_s() - t0;
        if (dt < best)
            best = dt;
    }
    r = step_result_get(st);
    printf("%-34s wall %8.4f s  tasks %9llu  events %10llu  %6.1f M events/s  (step %.3f s)%s\n", label, best,
           (unsigned long long)r->tasks, (unsigned long long)r->events, (double)r->events / best / 1e6,
           r->step_time_s, step_extended(st) ? "  from two samples" : "");
    step_destroy(st);
    cfg_destroy(cfg);
    *wall_out = best;
    return 0;
fail: {
    char buf[1024];
    sim_err_format(&err, buf, sizeof buf);
    fprintf(stderr, "bench_step: %s: %s\n", label, buf);
    cfg_destroy(cfg);
    return 1;
}
}

int main(void)
{
    const char *base[] = {
        "model.name=gpt3-175b", "cluster.topology=dgx-h100", "cluster.num_gpus=16384",
        "model.tensor_model_parallel_size=8", "model.pipeline_model_parallel_size=16",
        "model.virtual_pipeline_model_parallel_size=3", "model.sequence_parallel=true",
        "model.seq_length=2048", "train.global_batch_size=2048", "train.micro_batch_size=1",
        "ddp.use_distributed_optimizer=true", "ddp.overlap_grad_reduce=true", "ddp.overlap_param_gather=true",
        "model.num_layers=96", NULL, NULL,
    };
    int n = 14;
    double w0, w;
    int rc = 0;
    /* Every kernel a task (what --trace runs), then the two-level default
     * where identical passes are simulated once. */
    rc |= run_case("gpt3-175b 16384 GPUs, every kernel", base, n, true, &w);
    rc |= run_case("gpt3-175b 16384 GPUs (base)", base, n, false, &w0);

    /* Double microbatches. */
    base[8] = "train.global_batch_size=4096";
    double w_m2;
    rc |= run_case("x2 microbatches (GBS 4096, M 32)", base, n, false, &w_m2);
    printf("  ratio to base %.2f\n", w_m2 / w0);

    /* Double PP at the same M = 32 (the interleaved schedule needs M >= PP):
     * 32 stages, DP 128, 32,768 GPUs; compared with the M = 32 case. */
    base[4] = "model.pipeline_model_parallel_size=32";
    base[2] = "cluster.num_gpus=32768";
    rc |= run_case("x2 PP (32 stages, M 32)", base, n, false, &w);
    printf("  ratio to M 32 case %.2f\n", w / w_m2);
    base[4] = "model.pipeline_model_parallel_size=16";
    base[2] = "cluster.num_gpus=16384";
    base[8] = "train.global_batch_size=2048";

    /* Double layers. */
    base[13] = "model.num_layers=192";
    rc |= run_case("x2 layers (192)", base, n, false, &w);
    printf("  ratio to base %.2f\n", w / w0);
    base[13] = "model.num_layers=96";

    /* Same step on 8x fewer GPUs (DP 16): cost must not depend on DP. */
    base[2] = "cluster.num_gpus=2048";
    base[8] = "train.global_batch_size=256";
    rc |= run_case("DP 16 (2048 GPUs, same M)", base, n, false, &w);
    printf("  ratio to base %.2f\n", w / w0);
    base[2] = "cluster.num_gpus=16384";
    base[8] = "train.global_batch_size=2048";

    /* The host as a resource of each rank (the default, as in the base
     * case) against a host that issues at no cost (no host ops: the model
     * before the host was one).  Same for a small-expert MoE, where the
     * host waits for the GPU at every dispatch. */
    const char *off[] = {"cluster.host.launch_us=0", "cluster.host.op_overhead_us=0", "cluster.host.sync_us=0",
                         "cluster.host.optimizer_us=0"};
    const char *with_off[32];
    for (int i = 0; i < n; i++)
        with_off[i] = base[i];
    for (int i = 0; i < 4; i++)
        with_off[n + i] = off[i];
    rc |= run_case("gpt3-175b, host off", with_off, n + 4, false, &w);
    printf("  host modeling costs %.2fx (base %.3f ms vs %.3f ms)\n", w0 / w, 1e3 * w0, 1e3 * w);
    const char *moe[] = {"model.name=qwen3-30b-a3b", "cluster.topology=dgx-h100", "cluster.num_gpus=256",
                         "model.expert_model_parallel_size=8", "model.pipeline_model_parallel_size=4",
                         "model.virtual_pipeline_model_parallel_size=3", "model.moe_token_dispatcher_type=alltoall",
                         "model.seq_length=4096", "train.global_batch_size=512", "train.micro_batch_size=1",
                         "model.num_layers=48", "", "", "", ""};
    double wm;
    rc |= run_case("qwen3-30b-a3b 256 GPUs, host on", moe, 11, false, &wm);
    for (int i = 0; i < 4; i++)
        moe[11 + i] = off[i];
    rc |= run_case("qwen3-30b-a3b 256 GPUs, host off", moe, 15, false, &w);
    printf("  host modeling costs %.2fx (%.3f ms vs %.3f ms)\n", wm / w, 1e3 * wm, 1e3 * w);

    /* Long steps: two samples against every microbatch. */
    const char *llama[] = {"model.name=llama3-70b", "cluster.topology=dgx-h100", "cluster.num_gpus=1024",
                           "model.tensor_model_parallel_size=8", "model.pipeline_model_parallel_size=8",
                           "model.seq_length=8192", "train.global_batch_size=8192", "train.micro_batch_size=1",
                           "ddp.use_distributed_optimizer=true", "ddp.overlap_grad_reduce=true",
                           "ddp.overlap_param_gather=true", "sim.steady_extension=false"};
    double wl, we;
    rc |= run_case("llama3-70b PP 8 1F1B M 512, whole", llama, 12, false, &wl);
    rc |= run_case("llama3-70b PP 8 1F1B M 512", llama, 11, false, &we);
    printf("  two samples save %.1fx\n", wl / we);
    base[8] = "train.global_batch_size=16384";
    base[n] = "sim.steady_extension=false";
    rc |= run_case("gpt3-175b M 128 (VP 3), whole", base, n + 1, false, &wl);
    rc |= run_case("gpt3-175b M 128 (VP 3)", base, n, false, &we);
    printf("  two samples save %.1fx\n", wl / we);
    return rc;
}
