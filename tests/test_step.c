/* One simulated step, checked against closed forms: the ideal pipeline's
 * bubble, 1F1B in-flight counts, warmup counts read back from the trace,
 * and stage memory against Megatron's theoretical_memory_usage.py. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "memory.h"
#include "schedule.h"
#include "step.h"
#include "strategy.h"
#include "trace.h"
#include "sim_run.h"


/* --- ideal pipeline bubble ------------------------------------------------ */

static void check_ideal(int p, int v, int m, const char *topk_model)
{
    char pp[64], vp[80], gpus[64], gbs[64];
    snprintf(pp, sizeof pp, "model.pipeline_model_parallel_size=%d", p);
    snprintf(vp, sizeof vp, "model.virtual_pipeline_model_parallel_size=%d", v > 1 ? v : 0);
    snprintf(gpus, sizeof gpus, "cluster.num_gpus=%d", p * 2);
    snprintf(gbs, sizeof gbs, "train.global_batch_size=%d", m * 2); /* DP 2 */
    const char *kv[] = {topk_model, "cluster.topology=dgx-h100", gpus, pp, vp, gbs, "model.num_layers=48",
                        "model.seq_length=2048", "sim.ideal_pipeline=true", NULL};
    sim x;
    sim_run(&x, kv);
    const step_result *r = step_result_get(x.st);
    double expect = (double)(p - 1) / (double)(v * m + p - 1);
    cr_assert(fabs(r->bubble_fraction - expect) <= 1e-9 * fmax(expect, 1e-12) + 1e-15,
              "p=%d v=%d m=%d: bubble %.12f, expected %.12f", p, v, m, r->bubble_fraction, expect);
    sim_free(&x);
}

Test(step, ideal_pipeline_bubble_1f1b)
{
    check_ideal(4, 1, 8, "model.name=llama3-8b");
    check_ideal(8, 1, 16, "model.name=llama3-8b");
    check_ideal(2, 1, 3, "model.name=llama3-8b");
    check_ideal(1, 1, 4, "model.name=llama3-8b");
}

Test(step, ideal_pipeline_bubble_interleaved)
{
    check_ideal(4, 2, 8, "model.name=llama3-8b");
    check_ideal(4, 3, 12, "model.name=llama3-8b");
    check_ideal(2, 4, 6, "model.name=llama3-8b");
    check_ideal(8, 2, 16, "model.name=llama3-8b");
}

Test(step, ideal_pipeline_bubble_moe)
{
    check_ideal(4, 2, 8, "model.name=mixtral-8x7b");
}

/* --- in-flight microbatches --------------------------------------------- */

static void check_inflight(int p, int M)
{
    char pp[64], gpus[64], gbs[64];
    snprintf(pp, sizeof pp, "model.pipeline_model_parallel_size=%d", p);
    snprintf(gpus, sizeof gpus, "cluster.num_gpus=%d", p);
    snprintf(gbs, sizeof gbs, "train.global_batch_size=%d", M);
    const char *kv[] = {"model.name=llama3-8b", "cluster.topology=dgx-h100", gpus, pp, gbs,
                        "model.seq_length=4096", NULL};
    sim x;
    sim_run(&x, kv);
    const step_result *r = step_result_get(x.st);
    for (int s = 0; s < p; s++) {
        int64_t expect = (p - s) < M ? (p - s) : M;
        cr_assert_eq(r->stages[s].inflight_microbatches_max, expect, "p=%d M=%d stage %d: %lld, expected %lld", p, M,
                     s, (long long)r->stages[s].inflight_microbatches_max, (long long)expect);
    }
    sim_free(&x);
}

Test(step, inflight_1f1b_is_min_p_minus_r_M)
{
    check_inflight(4, 8);
    check_inflight(4, 2);
    check_inflight(8, 16);
    check_inflight(2, 1);
}

/* --- warmup counts from the trace ---------------------------------------- */

typedef struct ev {
    int pid;
    double ts;
    char name;
} ev;

static int cmp_ev(const void *a, const void *b)
{
    const ev *x = a, *y = b;
    return x->ts < y->ts ? -1 : x->ts > y->ts;
}

/* Reads the F/B events of the trace and counts, per stage, the forwards
 * that start before the stage's first backward. */
static void warmup_from_trace(const char *text, int p, int *f_before_b)
{
    size_t cap = 4096, n = 0;
    ev *evs = malloc(cap * sizeof *evs);
    const char *q = text;
    while ((q = strstr(q, "{\"ph\":\"X\",\"name\":\"")) != NULL) {
        q += strlen("{\"ph\":\"X\",\"name\":\"");
        char name = q[0];
        if ((name == 'F' || name == 'B') && q[1] == '"') {
            int pid;
            double ts;
            const char *pp = strstr(q, "\"pid\":"), *tt = strstr(q, "\"ts\":");
            cr_assert(pp && tt);
            sscanf(pp, "\"pid\":%d", &pid);
            sscanf(tt, "\"ts\":%lf", &ts);
            if (n == cap)
                evs = realloc(evs, (cap *= 2) * sizeof *evs);
            evs[n++] = (ev){pid, ts, name};
        }
    }
    qsort(evs, n, sizeof *evs, cmp_ev);
    for (int s = 0; s < p; s++) {
        int count = 0;
        for (size_t i = 0; i < n; i++) {
            if (evs[i].pid != s)
                continue;
            if (evs[i].name == 'B')
                break;
            count++;
        }
        f_before_b[s] = count;
    }
    free(evs);
}

/* The step's Chrome trace as text (caller frees). */
static char *trace_text(const sim *x)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    cr_assert_eq(trace_write(f, x->st, NULL), SIM_OK);
    fclose(f);
    return buf;
}

static void check_warmup(int p, int v, int M)
{
    char pp[64], vp[80], gpus[64], gbs[64];
    snprintf(pp, sizeof pp, "model.pipeline_model_parallel_size=%d", p);
    snprintf(vp, sizeof vp, "model.virtual_pipeline_model_parallel_size=%d", v > 1 ? v : 0);
    snprintf(gpus, sizeof gpus, "cluster.num_gpus=%d", p);
    snprintf(gbs, sizeof gbs, "train.global_batch_size=%d", M);
    const char *kv[] = {"model.name=llama3-8b", "cluster.topology=dgx-h100", gpus, pp, vp, gbs,
                        "model.num_layers=48", "model.seq_length=2048", NULL};
    sim x;
    sim_run_graph(&x, kv);
    char *buf = trace_text(&x);
    cr_assert(strstr(buf, "\"traceEvents\"") != NULL);
    int counts[64];
    warmup_from_trace(buf, p, counts);
    for (int s = 0; s < p; s++) {
        int64_t w = sched_warmup(p, v, M, p, s);
        /* The steady state starts with one more forward before the first
         * backward, unless everything was warmup. */
        int64_t expect = w < (int64_t)M * v ? w + 1 : w;
        cr_assert_eq(counts[s], expect, "p=%d v=%d M=%d stage %d: %d forwards before the first backward, expected %lld",
                     p, v, M, s, counts[s], (long long)expect);
    }
    free(buf);
    sim_free(&x);
}

Test(step, warmup_counts_from_trace)
{
    check_warmup(4, 1, 8);
    check_warmup(4, 1, 2);
    check_warmup(4, 2, 8);
    check_warmup(8, 3, 16);
}

/* --- memory against Megatron's estimator ----------------------------------
 * Transcribed from megatron/training/theoretical_memory_usage.py (HEAD):
 * compute_weight_and_optimizer_memory and compute_activation_memory, for a
 * dense GPT (MHA, 4h GeLU MLP, LayerNorm) with SP and selective recompute. */

typedef struct gpt {
    double L, h, F, a, V, s, b, t, p, v, dp, M;
} gpt;

static double megatron_weights_and_optimizer(const gpt *g)
{
    double attention = 2.0 * g->h * g->h * 2.0; /* 2h(q+kv), q = kv = h */
    double mlp = 2.0 * g->h * g->F;
    double layernorm = 2.0 * g->h * 2.0;
    double tp_sharded = (attention + mlp) * g->L;
    double replicated = layernorm * g->L + 2.0 * g->h;
    double embedding = g->h * g->V;
    double tp_part = (tp_sharded / g->p + embedding) / g->t;
    double repl_part = replicated / g->p;
    return (tp_part + repl_part) * (6.0 + 12.0 / g->dp);
}

static double megatron_activations(const gpt *g)
{
    double A = g->s * g->b * g->h * (18.0 + 4.0 * g->F / g->h);
    A *= g->L;
    A += 8.0 * g->s * g->b * g->p;
    A += g->s * g->b * g->h * g->p;
    if (g->v > 1) {
        A *= 1.0 + (g->p - 1.0) / (g->p * g->v);
    } else if (g->p > 1) {
        A *= fmin(1.0, g->M / g->p);
    }
    if (g->p == 1)
        A += g->s * g->b * g->h * 4.0 * (1.0 + g->V / g->h);
    return A / g->t;
}

static void check_memory(int p, int v, int M)
{
    gpt g = {.L = 48, .h = 4096, .F = 16384, .a = 32, .V = 51200, .s = 4096, .b = 1, .t = 4, .p = p, .v = v,
             .dp = 2, .M = M};
    char pp[64], vp[80], gpus[64], gbs[64];
    snprintf(pp, sizeof pp, "model.pipeline_model_parallel_size=%d", p);
    snprintf(vp, sizeof vp, "model.virtual_pipeline_model_parallel_size=%d", v > 1 ? v : 0);
    snprintf(gpus, sizeof gpus, "cluster.num_gpus=%d", 8 * p);
    snprintf(gbs, sizeof gbs, "train.global_batch_size=%d", 2 * M);
    /* Rotary positions: Megatron's estimator does not count a learned
     * position table, so the comparison leaves it out. */
    const char *kv[] = {"model.num_layers=48", "model.hidden_size=4096", "model.ffn_hidden_size=16384",
                        "model.num_attention_heads=32", "model.vocab_size=51200", "model.seq_length=4096",
                        "model.normalization=LayerNorm", "model.gated_linear_unit=false",
                        "model.position_embedding_type=rope", "model.share_embeddings_and_output_weights=true",
                        "model.tensor_model_parallel_size=4", "model.sequence_parallel=true",
                        "model.recompute_granularity=selective", "ddp.use_distributed_optimizer=true",
                        "cluster.topology=dgx-h100", gpus, pp, vp, gbs, NULL};
    sim x;
    sim_run(&x, kv);
    const stage_result *s0 = &step_result_get(x.st)->stages[0];
    double ours = s0->weights_bytes + s0->gradients_bytes + s0->optimizer_bytes;
    double theirs = megatron_weights_and_optimizer(&g);
    cr_assert(fabs(ours / theirs - 1.0) < 0.005, "p=%d v=%d: weights+grads+optimizer %.6g vs Megatron %.6g", p, v,
              ours, theirs);
    double act = s0->activations_peak_bytes, act_m = megatron_activations(&g);
    cr_assert(fabs(act / act_m - 1.0) < 0.03, "p=%d v=%d M=%d: activation peak %.6g vs Megatron %.6g (%.2f%%)", p, v,
              M, act, act_m, 100.0 * (act / act_m - 1.0));
    sim_free(&x);
}

Test(step, memory_matches_megatron_1f1b)
{
    check_memory(4, 1, 8);
    check_memory(2, 1, 16);
    check_memory(4, 1, 2);
}

Test(step, memory_matches_megatron_interleaved)
{
    check_memory(4, 2, 8);
    check_memory(4, 3, 16);
    check_memory(2, 4, 8);
}

Test(step, memory_matches_megatron_no_pipeline)
{
    check_memory(1, 1, 4);
}

/* --- the cost of a step does not grow with DP ---------------------------- */

Test(step, cost_independent_of_dp)
{
    const char *small[] = {"model.name=llama3-8b", "cluster.topology=dgx-h100", "cluster.num_gpus=16",
                           "model.pipeline_model_parallel_size=2", "train.global_batch_size=64", NULL};
    const char *big[] = {"model.name=llama3-8b", "cluster.topology=dgx-h100", "cluster.num_gpus=4096",
                         "model.pipeline_model_parallel_size=2", "train.global_batch_size=16384", NULL};
    sim a, b;
    sim_run(&a, small);
    sim_run(&b, big);
    cr_assert_eq(step_result_get(a.st)->tasks, step_result_get(b.st)->tasks);
    sim_free(&a);
    sim_free(&b);
}

/* --- determinism -------------------------------------------------------- */

Test(step, same_inputs_same_bytes)
{
    const char *kv[] = {"model.name=mixtral-8x7b", "cluster.topology=dgx-h100", "cluster.num_gpus=64",
                        "model.tensor_model_parallel_size=2", "model.sequence_parallel=true",
                        "model.pipeline_model_parallel_size=4", "model.expert_model_parallel_size=8",
                        "model.expert_tensor_parallel_size=1", "train.global_batch_size=64", NULL};
    char *out[2];
    for (int i = 0; i < 2; i++) {
        sim x;
        sim_run_graph(&x, kv);
        size_t len;
        FILE *f = open_memstream(&out[i], &len);
        cr_assert_eq(trace_write(f, x.st, NULL), SIM_OK);
        fclose(f);
        sim_free(&x);
    }
    cr_assert_str_eq(out[0], out[1]);
    free(out[0]);
    free(out[1]);
}

/* --- two-level simulation is exact ---------------------------------------
 * Identical passes stand as one task of their simulated span; with every
 * kernel a task the step must come out the same. */

static void check_two_level(const char *const *kv)
{
    sim a, b;
    sim_run(&a, kv);
    sim_rerun_every_kernel(&a, &b);
    const step_result *ra = step_result_get(a.st), *rb = step_result_get(b.st);
    cr_assert_eq(ra->step_time_s, rb->step_time_s, "%s: two-level %.9f s, every kernel %.9f s", kv[0],
                 ra->step_time_s, rb->step_time_s);
    cr_assert_eq(ra->bubble_fraction, rb->bubble_fraction);
    for (int64_t r = 0; r < ra->n_stages; r++)
        cr_assert_eq(ra->stages[r].activations_peak_bytes, rb->stages[r].activations_peak_bytes);
    cr_assert(ra->tasks < rb->tasks);
    /* Communication inside passes is carried over from their summaries. */
    cr_assert(fabs(ra->comm_s[STREAM_TP] - rb->comm_s[STREAM_TP]) <= 1e-9 * rb->comm_s[STREAM_TP] + 1e-12);
    cr_assert(fabs(ra->comm_s[STREAM_EP] - rb->comm_s[STREAM_EP]) <= 1e-9 * rb->comm_s[STREAM_EP] + 1e-12);
    step_destroy(b.st);
    sim_free(&a);
}

Test(step, two_level_equals_every_kernel)
{
    const char *dense[] = {"model.name=llama3-70b", "cluster.topology=dgx-h100", "cluster.num_gpus=64",
                           "model.tensor_model_parallel_size=4", "model.sequence_parallel=true",
                           "model.pipeline_model_parallel_size=4", "model.virtual_pipeline_model_parallel_size=5",
                           "model.context_parallel_size=2", "train.global_batch_size=64",
                           "ddp.use_distributed_optimizer=true", "ddp.overlap_grad_reduce=true",
                           "ddp.overlap_param_gather=true", "mixed_precision=fp8", NULL};
    check_two_level(dense);
    const char *moe[] = {"model.name=mixtral-8x7b", "cluster.topology=dgx-h100", "cluster.num_gpus=64",
                         "model.tensor_model_parallel_size=2", "model.sequence_parallel=true",
                         "model.pipeline_model_parallel_size=4", "model.expert_model_parallel_size=8",
                         "model.expert_tensor_parallel_size=1", "model.moe_token_dispatcher_type=alltoall",
                         "train.global_batch_size=64", "model.recompute_granularity=full", NULL};
    check_two_level(moe);
    const char *tied[] = {"model.name=llama3-8b", "cluster.topology=dgx-a100", "cluster.num_gpus=16",
                          "model.pipeline_model_parallel_size=4", "model.share_embeddings_and_output_weights=true",
                          "train.global_batch_size=32", "model.tp_comm_overlap=false", NULL};
    check_two_level(tied);
}

/* --- Korthikanti et al. 2022, Table 2 ------------------------------------
 * Per-layer activation bytes of a GPT layer (MHA, 4h GeLU MLP) with
 * attention scores materialized (unfused attention). */

static double layer_bytes(const char *const *extra)
{
    const char *kv[32] = {"model.num_layers=8", "model.hidden_size=4096", "model.ffn_hidden_size=16384",
                          "model.num_attention_heads=32", "model.vocab_size=51200", "model.seq_length=2048",
                          "model.attention_backend=unfused", "model.tensor_model_parallel_size=4",
                          "cluster.topology=dgx-a100", "cluster.num_gpus=4", "train.global_batch_size=4"};
    int n = 11;
    for (; *extra; extra++)
        kv[n++] = *extra;
    kv[n] = NULL;
    sim x;
    sim_err err;
    sim_err_clear(&err);
    x.cfg = cfg_create(PARSIM_SOURCE_DIR);
    for (int i = 0; kv[i]; i++)
        cr_assert_eq(cfg_set_override(x.cfg, kv[i], &err), SIM_OK, "%s", err.msg);
    cr_assert_eq(cfg_resolve(x.cfg, &x.in, &err), SIM_OK, "%s", err.msg);
    cr_assert_eq(strategy_resolve(&x.s, &x.in.model, &x.in.cluster, &x.in.par, &x.in.train, &x.in.ddp, &err),
                 SIM_OK, "%s", err.msg);
    double bytes = memory_layer_activation_bytes(&x.in, &x.s, false);
    cfg_destroy(x.cfg);
    return bytes;
}

Test(step, korthikanti_table2_activation_rows)
{
    const double s = 2048, b = 1, h = 4096, a = 32, t = 4, sbh = s * b * h;
    const char *tp_only[] = {NULL};
    const char *tp_sp[] = {"model.sequence_parallel=true", NULL};
    const char *tp_sel[] = {"model.recompute_granularity=selective", NULL};
    const char *tp_sp_sel[] = {"model.sequence_parallel=true", "model.recompute_granularity=selective", NULL};
    const char *full[] = {"model.recompute_granularity=full", NULL};
    struct {
        const char *const *kv;
        double expect;
        const char *row;
    } rows[] = {
        {tp_only, sbh * (10.0 + 24.0 / t + 5.0 * a * s / (h * t)), "tensor parallel"},
        {tp_sp, sbh * (34.0 / t + 5.0 * a * s / (h * t)), "tensor + sequence parallel"},
        {tp_sel, sbh * (10.0 + 24.0 / t), "tensor parallel + selective"},
        {tp_sp_sel, sbh * 34.0 / t, "tensor + sequence + selective"},
        {full, sbh * 2.0, "full recompute"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        double got = layer_bytes(rows[i].kv);
        cr_expect(fabs(got / rows[i].expect - 1.0) < 1e-12, "%s: %.6g bytes, Table 2 gives %.6g", rows[i].row, got,
                  rows[i].expect);
    }
}

/* A fixed cost per pass adds exactly 2 x M of it to a PP=1 step (with the
 * host issuing at no cost, so that nothing hides it). */
#define NO_HOST "cluster.host.launch_us=0", "cluster.host.op_overhead_us=0", "cluster.host.sync_us=0", \
                "cluster.host.optimizer_us=0"
Test(step, pass_overhead_adds_per_pass)
{
    const char *base[] = {"model.name=llama3-8b", "cluster.topology=dgx-h100", "cluster.num_gpus=8",
                          "train.global_batch_size=32", NO_HOST, NULL};
    const char *with[] = {"model.name=llama3-8b", "cluster.topology=dgx-h100", "cluster.num_gpus=8",
                          "train.global_batch_size=32", "cluster.compute.pass_overhead_us=250", NO_HOST, NULL};
    sim a, b;
    sim_run(&a, base);
    sim_run(&b, with);
    double M = (double)a.s.num_microbatches;
    double added = step_result_get(b.st)->step_time_s - step_result_get(a.st)->step_time_s;
    cr_assert(fabs(added - 2.0 * M * 250e-6) < 1e-9, "added %.9f s for M = %.0f", added, M);
    sim_free(&a);
    sim_free(&b);
}

/* With overlap_param_gather, Megatron gathers the parameters bucket by
 * bucket and the first forward waits for each bucket just before its
 * layers: the forward starts once the first bucket is in and runs beside
 * the gathers of later ones. */
Test(step, param_gather_overlaps_first_forward_by_bucket)
{
    const char *kv[] = {"model.name=llama3-8b", "cluster.topology=dgx-h100", "cluster.num_gpus=64",
                        "train.global_batch_size=64", "ddp.use_distributed_optimizer=true",
                        "ddp.overlap_grad_reduce=true", "ddp.overlap_param_gather=true", NULL};
    sim x, y;
    sim_run(&x, kv);
    sim_rerun_every_kernel(&x, &y); /* as a trace simulates it */
    char *buf = trace_text(&y);
    step_destroy(y.st);
    double first_ag_end = INFINITY, last_ag_end = 0, embedding_ts = -1;
    int n_ag = 0, n_rs = 0;
    const char *tag = "{\"ph\":\"X\",\"name\":\"";
    for (const char *q = buf; (q = strstr(q, tag)) != NULL;) {
        q += strlen(tag);
        int pid = -1;
        double ts = 0, dur = 0;
        const char *pp = strstr(q, "\"pid\":"), *tt = strstr(q, "\"ts\":"), *dd = strstr(q, "\"dur\":");
        cr_assert(pp && tt && dd);
        sscanf(pp, "\"pid\":%d", &pid);
        sscanf(tt, "\"ts\":%lf", &ts);
        sscanf(dd, "\"dur\":%lf", &dur);
        if (pid != 0)
            continue;
        if (strncmp(q, "dp_ag\"", 6) == 0) {
            n_ag++;
            first_ag_end = fmin(first_ag_end, ts + dur);
            last_ag_end = fmax(last_ag_end, ts + dur);
        } else if (strncmp(q, "dp_rs\"", 6) == 0) {
            n_rs++;
        } else if (strncmp(q, "embedding\"", 10) == 0 && embedding_ts < 0) {
            embedding_ts = ts;
        }
    }
    free(buf);
    cr_assert_gt(n_ag, 1, "one gather per bucket expected, got %d", n_ag);
    cr_assert_eq(n_ag, n_rs, "%d gathers for %d reduce-scatters", n_ag, n_rs);
    cr_assert(embedding_ts >= first_ag_end - 1e-6, "forward at %.3f us before its bucket (%.3f us)", embedding_ts,
              first_ag_end);
    cr_assert(embedding_ts < last_ag_end, "forward at %.3f us waited for every gather (last ends %.3f us)",
              embedding_ts, last_ag_end);
    sim_free(&x);
}

/* LoRA: the base weights are frozen, so gradients and optimizer state
 * cover only the adapters, A (in -> r) and B (r -> out) per target with
 * the TP-sharded side divided by TP (here qkv, column-parallel, and fc2,
 * row-parallel), and the backward drops the base weight-gradient GEMMs. */
Test(step, lora_trains_only_the_adapters)
{
    const char *full_kv[] = {"model.name=llama2-7b", "cluster.topology=dgx-h100", "cluster.num_gpus=8",
                             "model.tensor_model_parallel_size=2", "train.global_batch_size=32",
                             "ddp.use_distributed_optimizer=true", NULL};
    const char *lora_kv[] = {"model.name=llama2-7b", "cluster.topology=dgx-h100", "cluster.num_gpus=8",
                             "model.tensor_model_parallel_size=2", "train.global_batch_size=32",
                             "ddp.use_distributed_optimizer=true", "peft.scheme=lora", "peft.dim=16",
                             "peft.target_modules=[linear_qkv,linear_fc2]", NULL};
    sim full, lora;
    sim_run(&full, full_kv);
    sim_run(&lora, lora_kv);
    const double L = 32, h = 4096, a = 32, g = 32, d = 128, F = 11008, t = 2, r = 16, dp = 4;
    double adapters = L * (r * (h + (a + 2 * g) * d / t) + r * (F / t + h));
    stage_static_mem mf, ml;
    memory_static(&full.in, &full.s, 0, &mf);
    memory_static(&lora.in, &lora.s, 0, &ml);
    cr_assert(fabs(ml.gradients_bytes - 4.0 * adapters) < 1e-6 * adapters, "grads %g B, adapters %g",
              ml.gradients_bytes, adapters);
    cr_assert(fabs(ml.optimizer_bytes - 12.0 * adapters / dp) < 1e-6 * adapters, "optimizer %g B",
              ml.optimizer_bytes);
    cr_assert(fabs(ml.weights_bytes - mf.weights_bytes - 2.0 * adapters) < 1e-6 * adapters);
    double tf = step_result_get(full.st)->step_time_s, tl = step_result_get(lora.st)->step_time_s;
    cr_assert(tl < 0.9 * tf, "LoRA step %g s vs full %g s", tl, tf);
    sim_free(&full);
    sim_free(&lora);
}

/* Sliding-window layers attend to W keys: a windowed model's step is
 * shorter, and by less than its attention time. */
Test(step, sliding_window_shortens_attention)
{
    const char *full_kv[] = {"model.name=llama3-8b", "cluster.topology=dgx-h100", "cluster.num_gpus=8",
                             "model.seq_length=16384", "train.global_batch_size=8", NULL};
    const char *win_kv[] = {"model.name=llama3-8b", "cluster.topology=dgx-h100", "cluster.num_gpus=8",
                            "model.seq_length=16384", "train.global_batch_size=8", "model.window_size=[512,0]",
                            "model.window_attn_skip_freq=2", NULL};
    sim full, win;
    sim_run(&full, full_kv);
    sim_run(&win, win_kv);
    double tf = step_result_get(full.st)->step_time_s, tw = step_result_get(win.st)->step_time_s;
    cr_assert(tw < 0.95 * tf, "windowed %g s vs full %g s", tw, tf);
    cr_assert_eq(model_num_window_layers(&win.in.model), 16);
    cr_assert(step_result_get(win.st)->model_tflops_per_gpu * tw < step_result_get(full.st)->model_tflops_per_gpu * tf);
    sim_free(&full);
    sim_free(&win);
}
