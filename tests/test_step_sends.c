/* Pipeline sends as lags and the host's issue as release times (step.c,
 * "Sends", "The host"): on layouts of every pipeline schedule, with
 * blocking and asynchronous p2p, host issue (ahead of its GPU and behind
 * it), MoE with the host's syncs and with the EP overlap's overlapped
 * pairs, and CP, simulated whole and from samples, a step so built has
 * every figure of the same step with its sends and host stand-ins as
 * tasks (sim.plain_graph), bit for bit (both on the graph:
 * sim.graph_only), with fewer tasks by at least one per send, and some
 * steps fold their host and hold a GPU span back by its release, some
 * fold the host ops of passes placed as ops (a chunk's first forward
 * waiting for parameter gathers); a layout whose sends would queue on the
 * PP stream has them as tasks, with the same figures; and a trace keeps
 * them as tasks. */
#include <criterion/criterion.h>

#include <string.h>

#include "sim_run.h"
#include "step_internal.h"

#define LLAMA8 "model.name=llama3-8b", "cluster.topology=dgx-h100", "model.tensor_model_parallel_size=2"

/* Steps checked whose host had stand-ins folded, of those the ones
 * where a release held a GPU span back (it started at its release), and
 * those that folded host ops of a pass placed as ops. */
static int folded, held, ops_folded;

/* The layout as given, then with its sends as tasks: the same figures.
 * Returns whether the first had its sends as lags. */
static bool check_layout(const char *const *kv, const char *what)
{
    sim a;
    sim_run_graph(&a, kv);
    sim b = {.in = a.in, .s = a.s};
    b.in.sim.plain_graph = true;
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(step_run(&b.st, &b.in, &b.s, &err), SIM_OK, "%s: %s", what, err.msg);
    const step_result *ra = step_result_get(a.st), *rb = step_result_get(b.st);
    sim_expect_same_figures(ra, rb, what);
    /* Simulated whole, the lags spare a task per send (and the host's
     * release times one per stand-in folded). */
    const bool lags = step_engine(a.st) && a.st->lag_sends;
    if (lags && step_engine(b.st)) {
        cr_assert(!b.st->lag_sends, "%s", what);
        cr_assert_leq(ra->tasks + a.st->send_at[a.st->pp], rb->tasks, "%s: %llu tasks with lags, %llu without, %zu sends",
                      what, (unsigned long long)ra->tasks, (unsigned long long)rb->tasks, a.st->send_at[a.st->pp]);
    }
    const engine_t *e = step_engine(a.st);
    if (e && a.st->n_fold > 0) {
        folded++;
        const sim_time_ps *rel = eng_task_releases(e);
        bool h = false;
        for (size_t t = 0; rel && t < eng_num_tasks(e) && !h; t++)
            h = rel[t] > 0 && eng_task_start(e, (eng_task)t) == rel[t] && eng_task_stream(e, (eng_task)t) % STREAM_KINDS == STREAM_COMPUTE;
        held += h;
        ops_folded += a.st->n_own_fold > 0;
    }
    step_destroy(b.st);
    sim_free(&a);
    return lags;
}

typedef struct layout {
    const char *name;
    const char *kv[14];
} layout;

static const layout layouts[] = {
    {"1F1B, PP 4", {LLAMA8, "cluster.num_gpus=16", "model.pipeline_model_parallel_size=4", "train.global_batch_size=64", NULL}},
    {"1F1B, PP 2, host issue, MBS 2",
     {LLAMA8, "cluster.num_gpus=8", "model.pipeline_model_parallel_size=2", "train.micro_batch_size=2",
      "train.global_batch_size=32", "ddp.use_distributed_optimizer=true", "ddp.overlap_grad_reduce=true",
      "ddp.overlap_param_gather=true", NULL}},
    {"interleaved, asynchronous p2p",
     {LLAMA8, "cluster.num_gpus=16", "model.pipeline_model_parallel_size=4",
      "model.virtual_pipeline_model_parallel_size=2", "train.global_batch_size=64", NULL}},
    {"interleaved, blocking p2p",
     {LLAMA8, "cluster.num_gpus=16", "model.pipeline_model_parallel_size=4",
      "model.virtual_pipeline_model_parallel_size=2", "model.overlap_p2p_comm=false", "train.global_batch_size=64",
      NULL}},
    {"Llama 3 70B, PP 4, VP 5, CP 2",
     {"model.name=llama3-70b", "cluster.topology=dgx-h100", "cluster.num_gpus=64", "model.tensor_model_parallel_size=4",
      "model.pipeline_model_parallel_size=4", "model.virtual_pipeline_model_parallel_size=5",
      "model.context_parallel_size=2", "model.sequence_parallel=true", "model.seq_length=8192",
      "train.global_batch_size=128", "ddp.use_distributed_optimizer=true", "ddp.overlap_grad_reduce=true",
      "ddp.overlap_param_gather=true", NULL}},
    {"1F1B, PP 4, host behind its GPU",
     {LLAMA8, "cluster.num_gpus=16", "model.pipeline_model_parallel_size=4", "train.global_batch_size=256",
      "model.seq_length=1024", "cluster.host.launch_us=150", NULL}},
    {"interleaved, host behind its GPU",
     {LLAMA8, "cluster.num_gpus=16", "model.pipeline_model_parallel_size=4",
      "model.virtual_pipeline_model_parallel_size=2", "train.global_batch_size=256", "model.seq_length=1024",
      "cluster.host.launch_us=80", NULL}},
    {"MoE all-to-all with the host's syncs",
     {"model.name=qwen3-30b-a3b", "cluster.topology=dgx-h100", "cluster.num_gpus=16",
      "model.expert_model_parallel_size=8", "model.moe_token_dispatcher_type=alltoall",
      "model.pipeline_model_parallel_size=2", "model.virtual_pipeline_model_parallel_size=2", "model.num_layers=8",
      "train.global_batch_size=256", "model.seq_length=2048", "cluster.host.launch_us=60", NULL}},
    {"combined 1F1B (EP overlap), host behind its GPU",
     {"model.name=qwen3-30b-a3b", "cluster.topology=dgx-h100", "cluster.num_gpus=16",
      "model.expert_model_parallel_size=8", "model.moe_token_dispatcher_type=alltoall",
      "model.overlap_moe_expert_parallel_comm=true", "model.pipeline_model_parallel_size=2",
      "model.virtual_pipeline_model_parallel_size=2", "model.num_layers=8", "train.global_batch_size=128",
      "cluster.host.launch_us=60", NULL}},
    {"ZB-H1", {LLAMA8, "cluster.num_gpus=16", "model.pipeline_model_parallel_size=4", "sim.pipeline_schedule=zb-h1",
               "train.global_batch_size=64", NULL}},
    {"DualPipeV", {LLAMA8, "cluster.num_gpus=16", "model.pipeline_model_parallel_size=4",
                   "sim.pipeline_schedule=dualpipev", "train.global_batch_size=64", NULL}},
    {"Mixtral, EP 8, PP 2",
     {"model.name=mixtral-8x7b", "cluster.topology=dgx-h100", "cluster.num_gpus=32",
      "model.tensor_model_parallel_size=2", "model.pipeline_model_parallel_size=2",
      "model.expert_model_parallel_size=8", "model.sequence_parallel=true", "train.global_batch_size=64", NULL}},
};

Test(step_sends, lags_give_the_figures_of_send_tasks, .timeout = 120)
{
    int with_lags = 0;
    for (size_t i = 0; i < sizeof layouts / sizeof *layouts; i++) {
        /* Simulated as the step chooses (from samples where they gain),
         * then whole. */
        for (int whole = 0; whole < 2; whole++) {
            const char *kv[16];
            size_t n = 0;
            for (; layouts[i].kv[n]; n++)
                kv[n] = layouts[i].kv[n];
            if (whole)
                kv[n++] = "sim.steady_extension=false";
            kv[n] = NULL;
            char what[128];
            snprintf(what, sizeof what, "%s%s", layouts[i].name, whole ? ", whole" : "");
            with_lags += check_layout(kv, what);
        }
    }
    cr_assert_geq(with_lags, 8, "only %d of the steps had their sends as lags", with_lags);
    cr_assert_geq(folded, 3, "only %d steps folded their host's stand-ins", folded);
    cr_assert_geq(held, 2, "only %d steps had a GPU span held back by its host", held);
    cr_assert_geq(ops_folded, 2, "only %d steps folded host ops of a pass placed as ops", ops_folded);
}

/* A slow scale-out link between the stages of an interleaved pipeline
 * with asynchronous p2p: a send takes longer than the passes between two
 * sends, so the PP stream would queue, and the step has its sends as
 * tasks, with the figures of sends as tasks throughout. */
Test(step_sends, sends_that_would_queue_are_tasks, .timeout = 60)
{
    const char *kv[] = {"model.name=llama3-8b", "cluster.topology=dgx-h100", "cluster.num_gpus=16",
                        "model.tensor_model_parallel_size=8", "model.pipeline_model_parallel_size=2",
                        "model.virtual_pipeline_model_parallel_size=2", "cluster.scaleout.nic_bw_gbytes_per_s=0.05",
                        "train.global_batch_size=16", "sim.steady_extension=false", NULL};
    sim a;
    sim_run(&a, kv);
    cr_assert_not_null(step_engine(a.st));
    cr_assert(!a.st->lag_sends, "the sends stayed lags though they queue");
    sim_free(&a);
    check_layout(kv, "queued sends");
}

/* A trace shows every send as a task. */
Test(step_sends, a_trace_keeps_the_send_tasks)
{
    const char *kv[] = {LLAMA8, "cluster.num_gpus=16", "model.pipeline_model_parallel_size=4",
                        "train.global_batch_size=16", NULL};
    sim a;
    sim_run(&a, kv);
    sim b;
    sim_rerun_every_kernel(&a, &b);
    cr_assert(!b.st->lag_sends);
    const engine_t *e = step_engine(b.st);
    size_t sends = 0;
    for (size_t t = 0; t < eng_num_tasks(e); t++) {
        step_task_info info;
        step_task_describe(b.st, (eng_task)t, &info);
        sends += info.stream == STREAM_PP;
    }
    /* Each microbatch crosses 3 stage boundaries each way. */
    int64_t pp, v, M;
    step_shape(b.st, &pp, &v, &M);
    cr_assert_eq(pp, 4);
    cr_assert_eq(M, 8, "GBS 16 over DP 2");
    cr_assert_eq(sends, (size_t)(2 * 3 * M));
    step_destroy(b.st);
    sim_free(&a);
}
