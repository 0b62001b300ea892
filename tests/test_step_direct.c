/* The whole step walked without a graph (step_direct.h) has every figure
 * of the same step simulated on its graph (sim.graph_only), bit for bit,
 * tasks and events included: on layouts of the kinds the walk takes (1F1B
 * and interleaved schedules, blocking and asynchronous p2p, PP 1, CP, the
 * host ahead of its GPU and behind it, the distributed optimizer with
 * overlapped gathers and reductions, whose first and last passes keep
 * their ops and whose last stage's tails are measured from their ops,
 * Megatron-FSDP, MoE whose host waits for the token counts); and the
 * layouts it declines (overlapped pairs, a V schedule, a split backward,
 * a trace) run on the graph. */
#include <criterion/criterion.h>

#include <string.h>

#include "sim_run.h"
#include "step_internal.h"

#define LLAMA8 "model.name=llama3-8b", "cluster.topology=dgx-h100", "model.tensor_model_parallel_size=2"
#define DISTOPT "ddp.use_distributed_optimizer=true", "ddp.overlap_grad_reduce=true", "ddp.overlap_param_gather=true"

/* Every figure, the tasks and events too. */
static void expect_same(const step_result *a, const step_result *b, const char *what)
{
    sim_expect_same_figures(a, b, what);
    cr_assert_eq(a->tasks, b->tasks, "%s: %llu tasks vs %llu", what, (unsigned long long)a->tasks,
                 (unsigned long long)b->tasks);
    cr_assert_eq(a->events, b->events, "%s", what);
}

/* The layout walked as the step chooses, and on its whole graph: the
 * same figures.  Returns whether it was walked. */
static bool check_layout(const char *const *kv, const char *what)
{
    const char *whole[24];
    size_t n = 0;
    for (; kv[n]; n++)
        whole[n] = kv[n];
    whole[n++] = "sim.steady_extension=false";
    whole[n] = NULL;
    sim a;
    sim_run(&a, whole);
    sim b = {.in = a.in, .s = a.s};
    b.in.sim.graph_only = true;
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(step_run(&b.st, &b.in, &b.s, &err), SIM_OK, "%s: %s", what, err.msg);
    cr_assert_not_null(step_engine(b.st), "%s: the graph simulated no engine", what);
    expect_same(step_result_get(a.st), step_result_get(b.st), what);
    const bool walked = a.st->direct;
    cr_assert(walked == (step_engine(a.st) == NULL), "%s", what);
    cr_assert(!step_extended(a.st), "%s: a walked step counts as from samples", what);
    step_destroy(b.st);
    sim_free(&a);
    return walked;
}

typedef struct layout {
    const char *name;
    bool walked; /* the walk takes it */
    const char *kv[16];
} layout;

static const layout layouts[] = {
    {"1F1B, PP 4", true,
     {LLAMA8, "cluster.num_gpus=16", "model.pipeline_model_parallel_size=4", "train.global_batch_size=64", NULL}},
    {"PP 1", true, {LLAMA8, "cluster.num_gpus=8", "train.global_batch_size=32", NULL}},
    {"PP 1, distributed optimizer, overlapped", true,
     {LLAMA8, "cluster.num_gpus=8", "train.global_batch_size=32", DISTOPT, NULL}},
    {"1F1B, PP 2, MBS 2, distributed optimizer, overlapped", true,
     {LLAMA8, "cluster.num_gpus=8", "model.pipeline_model_parallel_size=2", "train.micro_batch_size=2",
      "train.global_batch_size=32", DISTOPT, NULL}},
    {"interleaved, asynchronous p2p", true,
     {LLAMA8, "cluster.num_gpus=16", "model.pipeline_model_parallel_size=4",
      "model.virtual_pipeline_model_parallel_size=2", "train.global_batch_size=64", NULL}},
    {"interleaved, blocking p2p", true,
     {LLAMA8, "cluster.num_gpus=16", "model.pipeline_model_parallel_size=4",
      "model.virtual_pipeline_model_parallel_size=2", "model.overlap_p2p_comm=false", "train.global_batch_size=64",
      NULL}},
    {"Llama 3 70B, PP 4, VP 5, CP 2, distributed optimizer, overlapped", true,
     {"model.name=llama3-70b", "cluster.topology=dgx-h100", "cluster.num_gpus=64", "model.tensor_model_parallel_size=4",
      "model.pipeline_model_parallel_size=4", "model.virtual_pipeline_model_parallel_size=5",
      "model.context_parallel_size=2", "model.sequence_parallel=true", "model.seq_length=8192",
      "train.global_batch_size=128", DISTOPT, NULL}},
    {"Llama 3 70B, PP 16, VP 5, TP 8, distributed optimizer, overlapped", true,
     {"model.name=llama3-70b", "cluster.topology=dgx-h100", "cluster.num_gpus=1024",
      "model.tensor_model_parallel_size=8", "model.pipeline_model_parallel_size=16",
      "model.virtual_pipeline_model_parallel_size=5", "model.sequence_parallel=true", "model.seq_length=8192",
      "train.global_batch_size=1024", DISTOPT, NULL}},
    {"1F1B, PP 4, host behind its GPU", true,
     {LLAMA8, "cluster.num_gpus=16", "model.pipeline_model_parallel_size=4", "train.global_batch_size=256",
      "model.seq_length=1024", "cluster.host.launch_us=150", NULL}},
    {"interleaved, host behind its GPU, distributed optimizer", true,
     {LLAMA8, "cluster.num_gpus=16", "model.pipeline_model_parallel_size=4",
      "model.virtual_pipeline_model_parallel_size=2", "train.global_batch_size=256", "model.seq_length=1024",
      "cluster.host.launch_us=80", DISTOPT, NULL}},
    {"no host", true,
     {LLAMA8, "cluster.num_gpus=16", "model.pipeline_model_parallel_size=4", "train.global_batch_size=64",
      "cluster.host.launch_us=0", "cluster.host.op_overhead_us=0", "cluster.host.sync_us=0",
      "cluster.host.optimizer_us=0", NULL}},
    {"Megatron-FSDP", true,
     {LLAMA8, "cluster.num_gpus=16", "model.pipeline_model_parallel_size=2", "train.global_batch_size=64",
      "ddp.use_megatron_fsdp=true", "ddp.data_parallel_sharding_strategy=optim_grads_params", NULL}},
    {"Mixtral, EP 8, PP 2 (dropless: the host syncs)", true,
     {"model.name=mixtral-8x7b", "cluster.topology=dgx-h100", "cluster.num_gpus=32",
      "model.tensor_model_parallel_size=2", "model.pipeline_model_parallel_size=2",
      "model.expert_model_parallel_size=8", "model.sequence_parallel=true", "train.global_batch_size=64", NULL}},
    {"MoE all-to-all with the host's syncs", true,
     {"model.name=qwen3-30b-a3b", "cluster.topology=dgx-h100", "cluster.num_gpus=16",
      "model.expert_model_parallel_size=8", "model.moe_token_dispatcher_type=alltoall",
      "model.pipeline_model_parallel_size=2", "model.virtual_pipeline_model_parallel_size=2", "model.num_layers=8",
      "train.global_batch_size=256", "model.seq_length=2048", "cluster.host.launch_us=60", NULL}},
    {"combined 1F1B (EP overlap)", false,
     {"model.name=qwen3-30b-a3b", "cluster.topology=dgx-h100", "cluster.num_gpus=16",
      "model.expert_model_parallel_size=8", "model.moe_token_dispatcher_type=alltoall",
      "model.overlap_moe_expert_parallel_comm=true", "model.pipeline_model_parallel_size=2",
      "model.virtual_pipeline_model_parallel_size=2", "model.num_layers=8", "train.global_batch_size=128",
      "cluster.host.launch_us=60", NULL}},
    {"DualPipeV", false,
     {LLAMA8, "cluster.num_gpus=16", "model.pipeline_model_parallel_size=4", "sim.pipeline_schedule=dualpipev",
      "train.global_batch_size=64", NULL}},
    {"ZB-H1", false,
     {LLAMA8, "cluster.num_gpus=16", "model.pipeline_model_parallel_size=4", "sim.pipeline_schedule=zb-h1",
      "train.global_batch_size=64", NULL}},
};

Test(step_direct, the_walk_gives_the_figures_of_the_graph, .timeout = 120)
{
    for (size_t i = 0; i < sizeof layouts / sizeof *layouts; i++) {
        const bool walked = check_layout(layouts[i].kv, layouts[i].name);
        cr_expect_eq(walked, layouts[i].walked, "%s: %s", layouts[i].name,
                     walked ? "walked, expected on the graph" : "on the graph, expected walked");
    }
}

/* The layouts the walk takes, over microbatches from one to many: the
 * fill and drain of every schedule length, and a step long enough that
 * samples would pay. */
Test(step_direct, every_length_of_the_schedule, .timeout = 120)
{
    /* DP 2: M = GBS / 2; interleaved from M = PP on (a whole group). */
    static const char *const gbs[] = {"train.global_batch_size=4",  "train.global_batch_size=8",
                                      "train.global_batch_size=16", "train.global_batch_size=24",
                                      "train.global_batch_size=40", "train.global_batch_size=256"};
    int walked = 0;
    for (size_t g = 0; g < sizeof gbs / sizeof *gbs; g++) {
        const char *one[] = {LLAMA8, "cluster.num_gpus=16", "model.pipeline_model_parallel_size=4", DISTOPT, gbs[g],
                             NULL};
        const char *inter[] = {LLAMA8, "cluster.num_gpus=16", "model.pipeline_model_parallel_size=4",
                               "model.virtual_pipeline_model_parallel_size=2", "cluster.host.launch_us=80", DISTOPT,
                               gbs[g], NULL};
        char what[96];
        snprintf(what, sizeof what, "1F1B, %s", gbs[g]);
        walked += check_layout(one, what);
        if (g > 0) { /* interleaving needs M >= PP */
            snprintf(what, sizeof what, "interleaved, %s", gbs[g]);
            walked += check_layout(inter, what);
        }
    }
    cr_assert_geq(walked, 9, "only %d of the steps were walked", walked);
}

/* A trace needs every task: the step keeps its graph. */
Test(step_direct, a_trace_keeps_the_graph)
{
    const char *kv[] = {LLAMA8, "cluster.num_gpus=16", "model.pipeline_model_parallel_size=4",
                        "train.global_batch_size=16", NULL};
    sim a;
    sim_run(&a, kv);
    cr_assert(a.st->direct, "the layout was not walked");
    sim b;
    sim_rerun_every_kernel(&a, &b);
    cr_assert(!b.st->direct);
    cr_assert_not_null(step_engine(b.st));
    step_destroy(b.st);
    sim_free(&a);
}
