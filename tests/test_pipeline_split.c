/* Uneven pipeline stages: Megatron's num_layers_in_first/last_pipeline_stage
 * and account_for_embedding/loss_in_pipeline_split. */
#include <criterion/criterion.h>
#include <string.h>

#include "config.h"
#include "strategy.h"

static int resolve(strategy_t *s, const char *const *kv, sim_err *err)
{
    cfg_t *cfg = cfg_create(PARSIM_SOURCE_DIR);
    run_inputs in;
    int rc = SIM_OK;
    for (; *kv && rc == SIM_OK; kv++)
        rc = cfg_set_override(cfg, *kv, err);
    if (rc == SIM_OK)
        rc = cfg_resolve(cfg, &in, err);
    if (rc == SIM_OK)
        rc = strategy_resolve(s, &in.model, &in.cluster, &in.par, &in.train, &in.ddp, err);
    if (rc != SIM_OK)
        cfg_err_locate(cfg, err);
    cfg_destroy(cfg);
    return rc;
}

static void expect_counts(const strategy_t *s, const int *counts, int n)
{
    int64_t next = 0;
    for (int vs = 0; vs < n; vs++) {
        int64_t first, count;
        strategy_chunk_layers(s, vs % s->pp, vs / s->pp, &first, &count);
        cr_expect_eq(first, next, "virtual stage %d starts at %lld, expected %lld", vs, (long long)first,
                     (long long)next);
        cr_expect_eq(count, counts[vs], "virtual stage %d has %lld layers, expected %d", vs, (long long)count,
                     counts[vs]);
        next = first + count;
    }
}

#define BASE "model.name=deepseek-v3", "cluster.topology=dgx-h100", "cluster.num_gpus=256", \
             "model.tensor_model_parallel_size=8", "model.expert_tensor_parallel_size=1", "model.sequence_parallel=true", "train.global_batch_size=1024"

Test(pipeline_split, first_and_last_stage_layers)
{
    /* 61 layers over PP 8: 5 + 6 x 9 + 2. */
    const char *kv[] = {BASE, "model.pipeline_model_parallel_size=8", "model.num_layers_in_first_pipeline_stage=5",
                        "model.num_layers_in_last_pipeline_stage=2", "model.expert_model_parallel_size=32", NULL};
    strategy_t s;
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(resolve(&s, kv, &err), SIM_OK, "%s", err.msg);
    const int counts[] = {5, 9, 9, 9, 9, 9, 9, 2};
    expect_counts(&s, counts, 8);
}

Test(pipeline_split, first_last_with_virtual_stages)
{
    /* PP 4, VP 2, 61 layers: first 6 (3+3), last 2 (1+1) leave 53 middle
     * layers, which do not split over 2 ranks x 2 chunks: rejected. */
    const char *bad[] = {BASE, "model.pipeline_model_parallel_size=4", "model.virtual_pipeline_model_parallel_size=2",
                         "model.num_layers_in_first_pipeline_stage=6", "model.num_layers_in_last_pipeline_stage=2",
                         "model.expert_model_parallel_size=64", "train.global_batch_size=1024", NULL};
    strategy_t s;
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(resolve(&s, bad, &err), SIM_EINVAL);
    cr_assert_str_eq(err.key, "model.num_layers_in_first_pipeline_stage");
    /* first 5 (odd) is not divisible by VP 2. */
    const char *odd[] = {BASE, "model.pipeline_model_parallel_size=4", "model.virtual_pipeline_model_parallel_size=2",
                         "model.num_layers_in_first_pipeline_stage=5", "model.num_layers_in_last_pipeline_stage=4",
                         "model.expert_model_parallel_size=64", NULL};
    sim_err_clear(&err);
    cr_assert_eq(resolve(&s, odd, &err), SIM_EINVAL);
    /* A valid interleaved split on a 62-layer variant: 4 + 2 x 28 + 2. */
    const char *ok[] = {BASE, "model.num_layers=62", "model.pipeline_model_parallel_size=4",
                        "model.virtual_pipeline_model_parallel_size=2", "model.num_layers_in_first_pipeline_stage=4",
                        "model.num_layers_in_last_pipeline_stage=2", "model.expert_model_parallel_size=64",
                        "model.moe_layer_freq=1", NULL};
    sim_err_clear(&err);
    cr_assert_eq(resolve(&s, ok, &err), SIM_OK, "%s: %s", err.key, err.msg);
    /* rank 0: 2 per chunk; ranks 1, 2: 56/2 = 28 -> 14 per chunk; rank 3: 1 per chunk. */
    const int counts[] = {2, 14, 14, 1, 2, 14, 14, 1};
    expect_counts(&s, counts, 8);
}

Test(pipeline_split, account_for_embedding_and_loss)
{
    /* 62 layers + embedding + loss = 64 units over PP 8 x VP 2: 4 each,
     * the first virtual stage 3 layers, the last 3. */
    const char *kv[] = {BASE, "model.num_layers=62", "model.pipeline_model_parallel_size=8",
                        "model.virtual_pipeline_model_parallel_size=2",
                        "model.account_for_embedding_in_pipeline_split=true",
                        "model.account_for_loss_in_pipeline_split=true", "model.expert_model_parallel_size=32",
                        "model.moe_layer_freq=1", NULL};
    strategy_t s;
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(resolve(&s, kv, &err), SIM_OK, "%s: %s", err.key, err.msg);
    int counts[16];
    for (int i = 0; i < 16; i++)
        counts[i] = 4;
    counts[0] = 3;
    counts[15] = 3;
    expect_counts(&s, counts, 16);
}

Test(pipeline_split, even_split_still_required_by_default)
{
    const char *kv[] = {BASE, "model.pipeline_model_parallel_size=8", "model.expert_model_parallel_size=32", NULL};
    strategy_t s;
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(resolve(&s, kv, &err), SIM_EINVAL);
    cr_assert_str_eq(err.key, "model.pipeline_model_parallel_size");
}

Test(pipeline_split, cannot_mix_explicit_and_accounted)
{
    const char *kv[] = {BASE, "model.pipeline_model_parallel_size=8", "model.num_layers_in_first_pipeline_stage=5",
                        "model.num_layers_in_last_pipeline_stage=2", "model.account_for_loss_in_pipeline_split=true",
                        "model.expert_model_parallel_size=32", NULL};
    strategy_t s;
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(resolve(&s, kv, &err), SIM_EINVAL);
}

Test(pipeline_split, megatron_layout_string)
{
    /* 61 layers over PP 16: embedding + 3, 14 x 4, 2 + loss. */
    const char *kv[] = {BASE, "model.pipeline_model_parallel_size=16", "model.expert_model_parallel_size=16",
                        "model.pipeline_model_parallel_layout=Et*3|(tttt|)*14t*2L", NULL};
    strategy_t s;
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(resolve(&s, kv, &err), SIM_OK, "%s: %s", err.key, err.msg);
    int counts[16];
    for (int i = 0; i < 16; i++)
        counts[i] = 4;
    counts[0] = 3;
    counts[15] = 2;
    expect_counts(&s, counts, 16);
}

Test(pipeline_split, bad_layouts_are_rejected)
{
    static const char *const layouts[] = {
        "model.pipeline_model_parallel_layout=Et*3|(tttt|)*14t*3L", /* 62 layers */
        "model.pipeline_model_parallel_layout=Et*3|(tttt|)*13t*6L", /* 15 stages */
        "model.pipeline_model_parallel_layout=t*3|E(tttt|)*14t*2L", /* E not first */
        "model.pipeline_model_parallel_layout=Et*3|(tttt|*14t*2L",  /* unbalanced ( */
        "model.pipeline_model_parallel_layout=Ex*3|(tttt|)*14t*2L", /* unknown symbol */
    };
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
        const char *kv[] = {BASE, "model.pipeline_model_parallel_size=16", "model.expert_model_parallel_size=16",
                            layouts[i], NULL};
        strategy_t s;
        sim_err err;
        sim_err_clear(&err);
        cr_expect_eq(resolve(&s, kv, &err), SIM_EINVAL, "%s accepted", layouts[i]);
        cr_expect_str_eq(err.key, "model.pipeline_model_parallel_layout");
    }
}

/* Megatron's docstring: 16 layers, p=4, v=2 puts layers [1,2][9,10] on GPU 0,
 * [3,4][11,12] on GPU 1, ... (1-based; 0-based here): chunk c of rank r is
 * virtual stage c*p + r. */
Test(pipeline_split, even_split_megatron_docstring)
{
    const char *kv[] = {"model.name=llama3-8b", "cluster.topology=dgx-h100", "cluster.num_gpus=8",
                        "train.global_batch_size=8", "model.num_layers=16", "model.pipeline_model_parallel_size=4",
                        "model.virtual_pipeline_model_parallel_size=2", NULL};
    strategy_t s;
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(resolve(&s, kv, &err), SIM_OK, "%s: %s", err.key, err.msg);
    const int64_t want[4][2] = {{0, 8}, {2, 10}, {4, 12}, {6, 14}};
    for (int64_t r = 0; r < 4; r++)
        for (int64_t c = 0; c < 2; c++) {
            int64_t first, count;
            strategy_chunk_layers(&s, r, c, &first, &count);
            cr_assert_eq(first, want[r][c], "rank %lld chunk %lld", (long long)r, (long long)c);
            cr_assert_eq(count, 2);
        }
}
