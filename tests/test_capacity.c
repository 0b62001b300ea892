/* Drop-and-pad experts (model.moe_expert_capacity_factor,
 * moe_pad_expert_input_to_capacity): capacity sets the rows each expert
 * runs, padding makes the shapes static so the dispatch needs no
 * token-count sync and the experts can be graphed; Megatron's rules between
 * the keys are exit 2 naming the key. */
#include <criterion/criterion.h>
#include <string.h>

#include "cli_run.h"
#include "sim_run.h"
#include "streams.h"

#define MOE                                                                                          \
    "model.name=qwen3-30b-a3b", "cluster.topology=dgx-h100", "cluster.num_gpus=8",                   \
        "model.expert_model_parallel_size=8", "model.moe_token_dispatcher_type=alltoall",            \
        "train.global_batch_size=16", "train.micro_batch_size=1", "model.seq_length=1024"
#define MOE_ARGS                                                                                     \
    "model.name=qwen3-30b-a3b cluster.topology=dgx-h100 cluster.num_gpus=8 "                         \
    "model.expert_model_parallel_size=8 model.moe_token_dispatcher_type=alltoall "                   \
    "train.global_batch_size=16 train.micro_batch_size=1 model.seq_length=1024"

typedef struct figures {
    double step_s, host_s;
} figures;

static figures run_it(const char *const *kv)
{
    sim x;
    sim_run(&x, kv);
    const step_result *r = step_result_get(x.st);
    figures f = { r->step_time_s, r->comm_s[STREAM_HOST] };
    sim_free(&x);
    return f;
}

/* Padding to a capacity of 2 shares doubles the rows the experts run; a
 * capacity of half a share without padding drops half of them. */
Test(capacity, capacity_sets_the_rows_the_experts_run)
{
    const char *dropless[] = { MOE, NULL };
    const char *pad2[] = { MOE, "model.moe_expert_capacity_factor=2", "model.moe_pad_expert_input_to_capacity=true",
                           NULL };
    const char *drop_half[] = { MOE, "model.moe_expert_capacity_factor=0.5", NULL };
    const char *drop_more[] = { MOE, "model.moe_expert_capacity_factor=1.5", NULL };
    figures d = run_it(dropless), p = run_it(pad2), h = run_it(drop_half), m = run_it(drop_more);
    cr_assert_gt(p.step_s, d.step_s, "padded to 2 shares: %.6f s, dropless %.6f s", p.step_s, d.step_s);
    cr_assert_lt(h.step_s, d.step_s, "half a share: %.6f s, dropless %.6f s", h.step_s, d.step_s);
    /* without padding a capacity above one share drops nothing under balanced routing */
    cr_assert_eq(m.step_s, d.step_s, "1.5 shares unpadded: %.9f s, dropless %.9f s", m.step_s, d.step_s);
}

/* Static shapes: no host sync before the dispatch, so the host spends less
 * per step at the same rows (capacity factor 1 pads nothing under balanced
 * routing). */
Test(capacity, padding_removes_the_token_count_sync)
{
    const char *dropless[] = { MOE, NULL };
    const char *pad1[] = { MOE, "model.moe_expert_capacity_factor=1", "model.moe_pad_expert_input_to_capacity=true",
                           NULL };
    figures d = run_it(dropless), p = run_it(pad1);
    cr_assert_lt(p.host_s, d.host_s, "host %.6f s padded vs %.6f s dropless", p.host_s, d.host_s);
    cr_assert_leq(p.step_s, d.step_s);
}

/* Whole-layer graphs (the legacy enable_cuda_graph switch) include the
 * experts only when they are padded. */
Test(capacity, padded_experts_are_graphed_with_the_layer)
{
    const char *pad[] = { MOE, "model.moe_expert_capacity_factor=1", "model.moe_pad_expert_input_to_capacity=true",
                          NULL };
    const char *pad_graph[] = { MOE, "model.moe_expert_capacity_factor=1",
                                "model.moe_pad_expert_input_to_capacity=true", "model.enable_cuda_graph=true", NULL };
    const char *dl_graph[] = { MOE, "model.enable_cuda_graph=true", NULL };
    const char *dl[] = { MOE, NULL };
    figures p = run_it(pad), pg = run_it(pad_graph), dg = run_it(dl_graph), d = run_it(dl);
    cr_assert_lt(pg.host_s, p.host_s, "graphs: host %.6f s vs %.6f s eager", pg.host_s, p.host_s);
    /* graphing the padded layer saves more host time than the dropless one,
     * whose experts stay eager */
    cr_assert_gt(p.host_s - pg.host_s, d.host_s - dg.host_s, "padded saves %.6f s, dropless %.6f s",
                 p.host_s - pg.host_s, d.host_s - dg.host_s);
}

Test(capacity, rules_are_exit_2_naming_the_key)
{
    result r;
    run(&r, "run " MOE_ARGS " model.moe_pad_expert_input_to_capacity=true");
    expect_refusal(&r, "pad without capacity", "model.moe_pad_expert_input_to_capacity", "capacity_factor");
    run(&r, "run " MOE_ARGS " model.cuda_graph_impl=transformer_engine model.cuda_graph_modules=[moe]");
    expect_refusal(&r, "moe graphed dropless", "model.cuda_graph_modules", "drop-and-pad");
    run(&r, "run " MOE_ARGS " model.cuda_graph_impl=transformer_engine model.cuda_graph_modules=[moe] "
            "model.moe_expert_capacity_factor=1 model.moe_pad_expert_input_to_capacity=true");
    cr_assert_eq(r.status, 0, "%s", r.out);
    run(&r, "run " MOE_ARGS " model.moe_expert_capacity_factor=-1");
    expect_refusal(&r, "negative capacity", "model.moe_expert_capacity_factor", NULL);
}
