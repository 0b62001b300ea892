/* A stage's static memory (memory_static, the peak bound's per-stage
 * figures) against the per-chunk functions summed chunk by chunk: bit for
 * bit, on layouts whose stages mix dense and MoE layers (DeepSeek-V3:
 * three dense layers, then MoE; uneven first and last stages), with the
 * embedding, the output layer and MTP on their stages, under the
 * distributed optimizer, Megatron-FSDP ZeRO-3 (units and the unit buffer)
 * and LoRA (trained parameters apart from the weights). */
#include <criterion/criterion.h>
#include <string.h>

#include "config.h"
#include "memory.h"
#include "strategy.h"

static void resolve(const char *file, const char *const *over, run_inputs *in, strategy_t *s)
{
    sim_err err;
    sim_err_clear(&err);
    cfg_t *cfg = cfg_create(PARSIM_SOURCE_DIR);
    cr_assert_not_null(cfg);
    char path[512];
    snprintf(path, sizeof path, "%s/configs/%s", PARSIM_SOURCE_DIR, file);
    int rc = cfg_load_file(cfg, path, CFG_PRIO_FILE, &err);
    for (int i = 0; rc == SIM_OK && over[i]; i++)
        rc = cfg_set_override(cfg, over[i], &err);
    if (rc == SIM_OK)
        rc = cfg_resolve_all(cfg, in, s, &err);
    char msg[1024];
    sim_err_format(&err, msg, sizeof msg);
    cr_assert_eq(rc, SIM_OK, "%s", msg);
    cfg_destroy(cfg);
}

/* Every stage: the parameters, trained parameters and units summed over
 * the chunks as memory_static sums them, and the bytes they make. */
static void expect_stages(const char *file, const char *const *over, bool mixed, const char *what)
{
    run_inputs in;
    strategy_t s;
    resolve(file, over, &in, &s);
    cr_assert_gt(s.pp, 1, "%s", what);
    bool some_mixed = false;
    for (int64_t r = 0; r < s.pp; r++) {
        double dense = 0, expert = 0, tr_dense = 0, tr_expert = 0;
        mem_units units = {0};
        int moe_layers = 0, layers = 0;
        for (int64_t c = 0; c < s.v; c++) {
            double d, e;
            memory_chunk_params(&in, &s, r, c, &d, &e);
            dense += d;
            expert += e;
            memory_chunk_trained_params(&in, &s, r, c, &d, &e);
            tr_dense += d;
            tr_expert += e;
            mem_units u;
            memory_chunk_units(&in, &s, r, c, &u);
            units.w_dense += u.w_dense;
            units.w_expert += u.w_expert;
            units.t_dense += u.t_dense;
            units.t_expert += u.t_expert;
            int64_t first, count;
            strategy_chunk_layers(&s, r, c, &first, &count);
            for (int64_t l = first; l < first + count; l++, layers++)
                moe_layers += model_layer_is_moe(&in.model, l);
        }
        some_mixed |= moe_layers > 0 && moe_layers < layers;
        stage_static_mem sm;
        memory_static(&in, &s, r, &sm);
        cr_expect(sm.dense_params == dense, "%s stage %lld: dense %.17g, want %.17g", what, (long long)r,
                  sm.dense_params, dense);
        cr_expect(sm.expert_params == expert, "%s stage %lld: expert %.17g, want %.17g", what, (long long)r,
                  sm.expert_params, expert);
        const double din = (double)s.dp_inner, ein = (double)s.edp_inner;
        const double o = s.hfsdp ? (double)s.dp_outer : 1.0;
        double d_dense = s.zero >= DP_SHARD_OPTIM ? din * o : 1.0;
        double d_expert = s.zero >= DP_SHARD_OPTIM ? ein * o : 1.0;
        double shard = tr_dense / d_dense + tr_expert / d_expert;
        cr_expect(sm.shard_params == shard, "%s stage %lld: shard %.17g, want %.17g", what, (long long)r,
                  sm.shard_params, shard);
        if (s.zero == DP_SHARD_OPTIM_GRADS_PARAMS && !in.peft.lora) {
            /* Weights: the non-unit parameters whole, the units sharded,
             * and the buffer pair. */
            double w = 2.0 * ((dense + expert - (units.w_dense + units.w_expert)) + units.w_dense / din +
                              units.w_expert / ein);
            double buffer = sm.fsdp_buffer_bytes / (2.0 + (in.ddp.grad_reduce_in_fp32 ? 4.0 : 2.0)) * 2.0;
            cr_expect(sm.fsdp_buffer_bytes > 0, "%s stage %lld: no unit buffer", what, (long long)r);
            cr_expect(sm.weights_bytes == w + buffer, "%s stage %lld: weights %.17g, want %.17g", what,
                      (long long)r, sm.weights_bytes, w + buffer);
        }
    }
    cr_expect(some_mixed == mixed, "%s: a stage mixes dense and MoE layers: %d", what, some_mixed);
    /* The bound holds each stage's static bytes at least. */
    double lb = memory_peak_lower_bound(&in, &s);
    for (int64_t r = 0; r < s.pp; r++) {
        stage_static_mem sm;
        memory_static(&in, &s, r, &sm);
        cr_expect(lb >= sm.weights_bytes + sm.gradients_bytes + sm.optimizer_bytes, "%s stage %lld: bound %.17g",
                  what, (long long)r, lb);
    }
}

#define DSV3 "deepseek-v3-h100x256.cfg"
#define DSV3_PP8 "cluster.num_gpus=1024", "model.tensor_model_parallel_size=2", \
                 "model.pipeline_model_parallel_size=8", "model.expert_model_parallel_size=64", \
                 "model.num_layers_in_first_pipeline_stage=7", "model.num_layers_in_last_pipeline_stage=6"

Test(memory_stage, distributed_optimizer)
{
    const char *over[] = {DSV3_PP8, "ddp.use_distributed_optimizer=true", NULL};
    expect_stages(DSV3, over, true, "dopt");
}

Test(memory_stage, fsdp_zero3)
{
    const char *over[] = {DSV3_PP8, "ddp.use_megatron_fsdp=true", "ddp.data_parallel_sharding_strategy=optim_grads_params",
                          NULL};
    expect_stages(DSV3, over, true, "fsdp3");
}

/* Dense, interleaved, with LoRA: the trained parameters are the adapters. */
Test(memory_stage, lora_interleaved)
{
    const char *over[] = {"cluster.num_gpus=64", "model.tensor_model_parallel_size=4",
                          "model.pipeline_model_parallel_size=4", "model.virtual_pipeline_model_parallel_size=2",
                          "peft.scheme=lora", NULL};
    expect_stages("llama3-70b-h100x64.cfg", over, false, "lora");
}

/* A middle stage's activations: its layers' bytes summed in order (no
 * embedding or output layer there), and under full recompute the backward
 * transient the largest layer's without recompute; the stage mixes dense
 * and MoE layers (layers 1 .. 9 on stage 1). */
Test(memory_stage, activations)
{
    const char *over[] = {"cluster.num_gpus=1024", "model.tensor_model_parallel_size=2",
                          "model.pipeline_model_parallel_size=8", "model.expert_model_parallel_size=64",
                          "model.num_layers_in_first_pipeline_stage=1", "model.num_layers_in_last_pipeline_stage=6",
                          "model.recompute_granularity=full", NULL};
    run_inputs in;
    strategy_t s;
    resolve(DSV3, over, &in, &s);
    strategy_t none = s;
    none.par.recompute_granularity = RECOMPUTE_NONE;
    for (int64_t r = 1; r + 1 < s.pp; r++) {
        int64_t first, count;
        strategy_chunk_layers(&s, r, 0, &first, &count);
        double sum = 0, worst = 0;
        for (int64_t l = first; l < first + count; l++) {
            sum += memory_layer_activation_bytes_at(&in, &s, l);
            double b = memory_layer_activation_bytes_at(&in, &none, l);
            worst = b > worst ? b : worst;
        }
        double got = memory_chunk_activation_bytes(&in, &s, r, 0);
        cr_expect(got == sum, "stage %lld: %.17g, want %.17g", (long long)r, got, sum);
        got = memory_chunk_backward_transient_bytes(&in, &s, r, 0);
        cr_expect(got == worst && worst > 0, "stage %lld transient: %.17g, want %.17g", (long long)r, got, worst);
    }
    double dense = memory_layer_activation_bytes_at(&in, &none, 1), moe = memory_layer_activation_bytes_at(&in, &none, 3);
    cr_expect(dense != moe, "dense and MoE layers keep the same bytes: %.17g", dense);
    int64_t first, count;
    strategy_chunk_layers(&s, 1, 0, &first, &count);
    cr_expect(first == 1 && count == 9, "stage 1: layers %lld + %lld", (long long)first, (long long)count);
}
