/* Shared-expert overlap (model.moe_shared_expert_overlap, Megatron Core's
 * SharedExpertMLP on its side stream): less exposed EP time on a model
 * with shared experts, the same FLOPs and the same all-to-alls, the shared
 * fc1 running beside the dispatch in the trace, no effect without shared
 * experts, Megatron's two refusals, and the recipe setting applied. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recipes.h"
#include "scratch.h"
#include "sim_run.h"

/* Moonlight-16B-A3B (64 routed experts, shared experts of 2 x 1408) with
 * EP 8 on one H100 node: the all-to-alls cross NVLink. */
#define MOONLIGHT(disp)                                                                                        \
    "model.name=moonlight-16b-a3b", "cluster.topology=dgx-h100", "cluster.num_gpus=8",                        \
        "model.expert_model_parallel_size=8", "model.moe_token_dispatcher_type=" disp,                        \
        "train.micro_batch_size=1", "train.global_batch_size=16", "model.num_layers=4", "model.moe_layer_freq=1"

static void expect_overlap_hides_ep(const char *const *off, const char *const *on)
{
    sim a, b;
    sim_run(&a, off);
    sim_run(&b, on);
    const step_result *ra = step_result_get(a.st), *rb = step_result_get(b.st);
    double ea = ra->exposed_s[STREAM_EP], eb = rb->exposed_s[STREAM_EP];
    cr_expect_gt(ea, 0.0, "EP exposed without the overlap");
    cr_expect_lt(eb, ea, "exposed EP %.6f s with the overlap, %.6f s without", eb, ea);
    cr_expect_lt(rb->step_time_s, ra->step_time_s, "step %.6f s with, %.6f s without", rb->step_time_s,
                 ra->step_time_s);
    cr_expect_eq(ra->model_flops, rb->model_flops, "the same FLOPs");
    cr_expect_eq(ra->comm_s[STREAM_EP], rb->comm_s[STREAM_EP], "the same all-to-alls: %.9f / %.9f s",
                 ra->comm_s[STREAM_EP], rb->comm_s[STREAM_EP]);
    /* the same kernels: the step gains no more than the exposed
     * communication it loses */
    double hidden = ra->exposed_total_s - rb->exposed_total_s;
    cr_expect_leq(ra->step_time_s - rb->step_time_s, hidden + 1e-9, "gain %.6f s, communication hidden %.6f s",
                  ra->step_time_s - rb->step_time_s, hidden);
    sim_free(&a);
    sim_free(&b);
}

Test(shared_overlap, exposed_ep_lower_same_flops_alltoall)
{
    expect_overlap_hides_ep((const char *const[]){MOONLIGHT("alltoall"), NULL},
                            (const char *const[]){MOONLIGHT("alltoall"), "model.moe_shared_expert_overlap=true", NULL});
}

Test(shared_overlap, exposed_ep_lower_same_flops_with_tp_and_sp)
{
    /* TP 2 with SP: the shared experts' TP collectives move with them */
    expect_overlap_hides_ep(
        (const char *const[]){MOONLIGHT("alltoall"), "model.tensor_model_parallel_size=2",
                              "model.expert_tensor_parallel_size=1", "model.sequence_parallel=true", NULL},
        (const char *const[]){MOONLIGHT("alltoall"), "model.tensor_model_parallel_size=2",
                              "model.expert_tensor_parallel_size=1", "model.sequence_parallel=true",
                              "model.moe_shared_expert_overlap=true", NULL});
}

/* Without shared experts, or without an EP exchange, the key changes nothing. */
Test(shared_overlap, nothing_to_overlap_nothing_changes)
{
    const char *const cases[][12] = {
        {"model.name=qwen3-30b-a3b", "cluster.topology=dgx-h100", "cluster.num_gpus=8",
         "model.expert_model_parallel_size=8", "model.moe_token_dispatcher_type=alltoall", "train.micro_batch_size=1",
         "train.global_batch_size=16", "model.num_layers=4", "model.moe_layer_freq=1", NULL},
        {"model.name=moonlight-16b-a3b", "cluster.topology=dgx-h100", "cluster.num_gpus=8",
         "model.expert_model_parallel_size=1", "model.moe_token_dispatcher_type=alltoall", "train.micro_batch_size=1",
         "train.global_batch_size=16", "model.num_layers=4", "model.moe_layer_freq=1", NULL},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *on[16];
        size_t n = 0;
        for (; cases[c][n]; n++)
            on[n] = cases[c][n];
        on[n++] = "model.moe_shared_expert_overlap=true";
        on[n] = NULL;
        sim a, b;
        sim_run(&a, cases[c]);
        sim_run(&b, on);
        cr_expect_eq(step_result_get(a.st)->step_time_s, step_result_get(b.st)->step_time_s, "case %zu", c);
        sim_free(&a);
        sim_free(&b);
    }
}

/* In the trace, the first shared fc1 of a microbatch starts before its
 * dispatch all-to-all ends: it runs beside it. */
Test(shared_overlap, shared_fc1_beside_the_dispatch_in_the_trace)
{
    make_dir();
    char path[128];
    result r;
    runf(&r,
         "run model.name=moonlight-16b-a3b cluster.topology=dgx-h100 cluster.num_gpus=8 "
         "model.expert_model_parallel_size=8 model.moe_token_dispatcher_type=alltoall train.micro_batch_size=1 "
         "train.global_batch_size=8 model.num_layers=2 model.moe_layer_freq=1 model.moe_shared_expert_overlap=true --trace '%s'",
         path_in(path, sizeof path, "trace.json"));
    cr_assert_eq(r.status, 0, "%s", r.out);
    size_t len;
    char *text = read_file(path, &len);
    double fc1 = -1, d0 = -1, d1 = -1;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char *ts = strstr(line, "\"ts\":"), *dur = strstr(line, "\"dur\":");
        if (!ts || !dur || !strstr(line, "\"pid\":0,"))
            continue;
        double a = strtod(ts + 5, NULL), b = a + strtod(dur + 6, NULL);
        if (strstr(line, "\"name\":\"shared_fc1\"") && fc1 < 0)
            fc1 = a;
        if (strstr(line, "\"name\":\"ep_dispatch\"") && d0 < 0) {
            d0 = a;
            d1 = b;
        }
    }
    free(text);
    remove_dir();
    cr_assert(fc1 >= 0 && d0 >= 0, "shared_fc1 and ep_dispatch in the trace");
    cr_expect(fc1 < d1 && fc1 >= d0 - 1e-3, "shared_fc1 at %.3f us, the dispatch [%.3f, %.3f] us", fc1, d0, d1);
}

/* Megatron refuses it with the allgather dispatcher and with the EP
 * all-to-all overlap (transformer_config.py). */
Test(shared_overlap, refusals_name_the_key)
{
    static const char base[] = "run model.name=moonlight-16b-a3b cluster.topology=dgx-h100 cluster.num_gpus=8 "
                               "model.expert_model_parallel_size=8 train.micro_batch_size=1 "
                               "train.global_batch_size=16 model.moe_shared_expert_overlap=true ";
    static const struct {
        const char *extra, *rule;
    } cases[] = {
        {"model.moe_token_dispatcher_type=allgather", "alltoall or flex"},
        {"model.moe_token_dispatcher_type=alltoall model.overlap_moe_expert_parallel_comm=true",
         "model.overlap_moe_expert_parallel_comm"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        result r;
        runf(&r, "%s%s", base, cases[i].extra);
        expect_refusal(&r, cases[i].extra, "model.moe_shared_expert_overlap", cases[i].rule);
    }
    /* a value that is no boolean names the key too */
    result r;
    runf(&r, "%smodel.moe_token_dispatcher_type=alltoall model.moe_shared_expert_overlap=sometimes", base);
    expect_refusal(&r, "bad value", "model.moe_shared_expert_overlap", NULL);
}

/* A recipe's setting is applied, not listed among the ignored ones. */
Test(shared_overlap, recipe_setting_is_applied)
{
    static const char *const values[] = {"true", "false"};
    for (int i = 0; i < 2; i++) {
        recipe_setting set = {"model.moe_shared_expert_overlap", values[i]};
        recipe_row row = {.n = 1, .set = &set};
        recipe_mapped m;
        recipes_map(&row, &set, &m);
        cr_expect_eq(m.action, RECIPE_APPLY, "%s: action %d", values[i], (int)m.action);
        cr_expect_str_eq(m.key, "model.moe_shared_expert_overlap");
        cr_expect_str_eq(m.value, values[i]);
    }
}
