/* Communication of every parallel dimension, checked by the direction and
 * size of its effect on a simulated step: TP leaving the NVLink domain,
 * Ethernet vs InfiniBand, the four CP communication types, EP all-to-all
 * against top-k and placement. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "step.h"
#include "strategy.h"
#include "trace.h"
#include "workload.h"

typedef struct sim {
    cfg_t *cfg;
    run_inputs in;
    strategy_t s;
    step_t *st;
    const step_result *r;
} sim;

/* Runs the step for a space-separated list of overrides. */
static void sim_run(sim *x, const char *settings)
{
    sim_err err;
    sim_err_clear(&err);
    x->cfg = cfg_create(PARSIM_SOURCE_DIR);
    char *copy = strdup(settings), *save = NULL;
    for (char *kv = strtok_r(copy, " ", &save); kv; kv = strtok_r(NULL, " ", &save))
        cr_assert_eq(cfg_set_override(x->cfg, kv, &err), SIM_OK, "%s: %s", kv, err.msg);
    free(copy);
    char buf[1024];
    int rc = cfg_resolve(x->cfg, &x->in, &err);
    if (rc == SIM_OK)
        rc = strategy_resolve(&x->s, &x->in.model, &x->in.cluster, &x->in.par, &x->in.train, &x->in.ddp, &err);
    if (rc == SIM_OK)
        rc = step_run(&x->st, &x->in, &x->s, &err);
    sim_err_format(&err, buf, sizeof buf);
    cr_assert_eq(rc, SIM_OK, "%s: %s", settings, buf);
    x->r = step_result_get(x->st);
}

static void sim_free(sim *x)
{
    step_destroy(x->st);
    cfg_destroy(x->cfg);
}

#define L70 "model.name=llama3-70b model.seq_length=4096 cluster.num_gpus=16 train.global_batch_size=32 " \
            "model.sequence_parallel=true "

Test(traffic, tp_across_nodes_is_clearly_slower_than_tp8_pp2)
{
    sim tp16, tp8pp2;
    sim_run(&tp16, L70 "cluster.topology=dgx-h100 model.tensor_model_parallel_size=16");
    sim_run(&tp8pp2, L70 "cluster.topology=dgx-h100 model.tensor_model_parallel_size=8 "
                         "model.pipeline_model_parallel_size=2");
    cr_assert(!tp16.s.groups[GROUP_TP].in_nvlink_domain);
    cr_assert(tp8pp2.s.groups[GROUP_TP].in_nvlink_domain);
    cr_assert(tp16.r->step_time_s > 1.2 * tp8pp2.r->step_time_s, "TP16 %.3f s vs TP8xPP2 %.3f s",
              tp16.r->step_time_s, tp8pp2.r->step_time_s);
    /* Per GPU TP16 moves about twice the TP bytes of TP8 x PP2 (all layers
     * instead of half, at (15/16) vs (7/8) of the activation), and across
     * nodes at the NICs' bandwidth rather than NVLink's. */
    cr_assert(tp16.r->comm_s[STREAM_TP] > 2.0 * tp8pp2.r->comm_s[STREAM_TP], "TP comm %.3f s vs %.3f s",
              tp16.r->comm_s[STREAM_TP], tp8pp2.r->comm_s[STREAM_TP]);
    sim_free(&tp16);
    sim_free(&tp8pp2);
}

Test(traffic, tp_beyond_the_node_costs_more_on_ethernet_than_on_infiniband)
{
    sim ib, eth;
    sim_run(&ib, L70 "cluster.topology=dgx-h100 model.tensor_model_parallel_size=16");
    sim_run(&eth, L70 "cluster.topology=h100-eth-100g model.tensor_model_parallel_size=16");
    cr_assert(eth.r->comm_s[STREAM_TP] > 1.5 * ib.r->comm_s[STREAM_TP], "TP comm: Ethernet %.3f s, IB %.3f s",
              eth.r->comm_s[STREAM_TP], ib.r->comm_s[STREAM_TP]);
    cr_assert(eth.r->step_time_s > 1.2 * ib.r->step_time_s, "step: Ethernet %.3f s, IB %.3f s",
              eth.r->step_time_s, ib.r->step_time_s);
    sim_free(&ib);
    sim_free(&eth);
}

/* Llama 3 8B at 128K tokens on 16 H100s, CP 8 (TP 2) and CP 16. */
#define CP128K "model.name=llama3-8b cluster.topology=dgx-h100 cluster.num_gpus=16 model.seq_length=131072 " \
               "train.global_batch_size=1 "

static void cp_cases(const char *layout, const char *hier)
{
    static const char *const types[] = {"p2p", "all_gather", "a2a", "a2a+p2p"};
    sim x[4];
    for (int i = 0; i < 4; i++) {
        char settings[512];
        snprintf(settings, sizeof settings, CP128K "%s model.cp_comm_type=%s %s", layout, types[i],
                 i == 3 ? hier : "");
        sim_run(&x[i], settings);
    }
    const step_result *p2p = x[0].r, *ag = x[1].r, *a2a = x[2].r, *hier_r = x[3].r;
    /* Four different times. */
    for (int i = 0; i < 4; i++)
        for (int j = i + 1; j < 4; j++)
            cr_expect(x[i].r->step_time_s != x[j].r->step_time_s, "%s: %s and %s give the same step time", layout,
                      types[i], types[j]);
    /* p2p hides its ring behind the attention steps; all_gather and a2a
     * are synchronous and fully exposed. */
    cr_expect(p2p->exposed_s[STREAM_CP] < 0.25 * p2p->comm_s[STREAM_CP], "%s p2p: exposed %.4f of %.4f s", layout,
              p2p->exposed_s[STREAM_CP], p2p->comm_s[STREAM_CP]);
    cr_expect(ag->exposed_s[STREAM_CP] > 0.9 * ag->comm_s[STREAM_CP], "%s all_gather: exposed %.4f of %.4f", layout,
              ag->exposed_s[STREAM_CP], ag->comm_s[STREAM_CP]);
    cr_expect(a2a->exposed_s[STREAM_CP] > 0.9 * a2a->comm_s[STREAM_CP], "%s a2a: exposed %.4f of %.4f", layout,
              a2a->exposed_s[STREAM_CP], a2a->comm_s[STREAM_CP]);
    /* The hierarchical form exposes its a2a part only. */
    cr_expect(hier_r->exposed_s[STREAM_CP] < a2a->exposed_s[STREAM_CP], "%s: a2a+p2p exposed %.4f vs a2a %.4f",
              layout, hier_r->exposed_s[STREAM_CP], a2a->exposed_s[STREAM_CP]);
    cr_expect(p2p->step_time_s < ag->step_time_s && p2p->step_time_s < a2a->step_time_s,
              "%s: p2p %.4f, all_gather %.4f, a2a %.4f", layout, p2p->step_time_s, ag->step_time_s,
              a2a->step_time_s);
    for (int i = 0; i < 4; i++)
        sim_free(&x[i]);
}

Test(traffic, cp8_four_comm_types_differ_as_explained)
{
    cp_cases("model.context_parallel_size=8 model.tensor_model_parallel_size=2 model.sequence_parallel=true",
             "model.hierarchical_context_parallel_sizes=[2,4]");
}

Test(traffic, cp16_four_comm_types_differ_as_explained)
{
    cp_cases("model.context_parallel_size=16", "model.hierarchical_context_parallel_sizes=[8,2]");
}

/* In the trace, ring steps on the cp stream run while attention runs (a
 * trace has every kernel a task, as parsim run --trace simulates it). */
Test(traffic, trace_shows_cp_ring_overlapping_attention)
{
    sim x;
    sim_run(&x, CP128K "model.context_parallel_size=8 model.tensor_model_parallel_size=2 "
                       "model.sequence_parallel=true model.cp_comm_type=p2p");
    sim_err err;
    sim_err_clear(&err);
    step_destroy(x.st);
    x.in.sim.keep_ops = true;
    cr_assert_eq(step_run(&x.st, &x.in, &x.s, &err), SIM_OK, "%s", err.msg);
    const engine_t *e = step_engine(x.st);
    size_t n = eng_num_tasks(e), overlapping = 0;
    /* Collect attention spans of stage 0, then look for ring sends inside. */
    for (size_t i = 0; i < n && overlapping == 0; i++) {
        step_task_info a;
        step_task_describe(x.st, (eng_task)i, &a);
        if (a.stream != STREAM_CP || strcmp(a.name, "cp_p2p") != 0)
            continue;
        sim_time_ps s0 = eng_task_start(e, (eng_task)i), e0 = eng_task_end(e, (eng_task)i);
        for (size_t j = i > 8 ? i - 8 : 0; j < n && j < i + 8; j++) {
            step_task_info b;
            step_task_describe(x.st, (eng_task)j, &b);
            if (b.stream == STREAM_COMPUTE && !strncmp(b.name, "attn", 4) && eng_task_start(e, (eng_task)j) < e0 &&
                eng_task_end(e, (eng_task)j) > s0)
                overlapping++;
        }
    }
    cr_assert(overlapping > 0, "no cp_p2p task overlaps an attention task");
    /* And the Chrome trace carries them on the cp thread. */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_eq(trace_write(f, x.st, NULL), SIM_OK);
    fclose(f);
    cr_assert(strstr(buf, "\"name\":\"cp_p2p\"") != NULL);
    free(buf);
    sim_free(&x);
}

#define QWEN "model.name=qwen3-30b-a3b cluster.topology=dgx-h100 cluster.num_gpus=16 model.seq_length=4096 " \
             "train.global_batch_size=32 model.expert_tensor_parallel_size=1 model.moe_token_dispatcher_type=alltoall "

Test(traffic, ep_all_to_all_grows_with_topk)
{
    double prev = 0;
    for (int k = 1; k <= 8; k *= 2) {
        char settings[512];
        snprintf(settings, sizeof settings, QWEN "model.expert_model_parallel_size=8 model.moe_router_topk=%d", k);
        sim x;
        sim_run(&x, settings);
        cr_assert(x.r->comm_s[STREAM_EP] > 1.5 * prev, "top-%d: EP comm %.4f s, top-%d: %.4f s", k,
                  x.r->comm_s[STREAM_EP], k / 2, prev);
        prev = x.r->comm_s[STREAM_EP];
        sim_free(&x);
    }
}

Test(traffic, ep_all_to_all_grows_when_ep_leaves_nvlink)
{
    sim in_node, across;
    sim_run(&in_node, QWEN "model.expert_model_parallel_size=8");
    sim_run(&across, QWEN "model.expert_model_parallel_size=16");
    cr_assert(in_node.s.groups[GROUP_EP].in_nvlink_domain);
    cr_assert(!across.s.groups[GROUP_EP].in_nvlink_domain);
    cr_assert(across.r->comm_s[STREAM_EP] > 2.0 * in_node.r->comm_s[STREAM_EP], "EP 16: %.4f s, EP 8: %.4f s",
              across.r->comm_s[STREAM_EP], in_node.r->comm_s[STREAM_EP]);
    sim_free(&in_node);
    sim_free(&across);
}

/* flex (DeepEP) sends a token across domains once per destination domain:
 * less than all-to-all across nodes; inside one its kernels run at the
 * kernel table's DeepEP rate, not NCCL's all-to-all bandwidth. */
Test(traffic, flex_dispatch_dedups_across_domains)
{
    sim a2a, flex, flex_in;
    sim_run(&a2a, QWEN "model.expert_model_parallel_size=16");
    sim_run(&flex, QWEN "model.expert_model_parallel_size=16 model.moe_token_dispatcher_type=flex");
    cr_assert(flex.r->comm_s[STREAM_EP] < 0.7 * a2a.r->comm_s[STREAM_EP], "flex %.4f s vs alltoall %.4f s",
              flex.r->comm_s[STREAM_EP], a2a.r->comm_s[STREAM_EP]);
    sim a2a_in;
    sim_run(&a2a_in, QWEN "model.expert_model_parallel_size=8");
    sim_run(&flex_in, QWEN "model.expert_model_parallel_size=8 model.moe_token_dispatcher_type=flex");
    cr_assert_neq(flex_in.r->comm_s[STREAM_EP], a2a_in.r->comm_s[STREAM_EP]);
    sim_free(&a2a);
    sim_free(&flex);
    sim_free(&a2a_in);
    sim_free(&flex_in);
}
