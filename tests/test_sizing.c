/* The sizing checklist of `parsim run --layout`. */
#include <criterion/criterion.h>
#include <string.h>

#include "cli_run.h"

#define MIXTRAL_48 "run model.name=mixtral-8x7b cluster.topology=dgx-h100 cluster.num_gpus=48 " \
    "model.tensor_model_parallel_size=2 model.context_parallel_size=3 "                   \
    "model.expert_model_parallel_size=4 model.seq_length=12288 train.global_batch_size=48 --layout"

/* TP x CP = 6 and EP x ETP = 8: the minimum is lcm 24, and both common
 * products are named and refused with their reason. */
Test(sizing, minimum_gpus_and_the_products_it_is_not)
{
    result r;
    run(&r, MIXTRAL_48);
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "min GPUs       24 = pp x lcm(tp x cp, ep x etp) = 1 x lcm(6, 8)"), "%s", r.out);
    cr_expect(strstr(r.out, "not tp x cp x ep x etp x pp = 48"), "%s", r.out);
    cr_expect(strstr(r.out, "not pp x max(tp x cp, ep x etp) = 8: a stage must hold whole groups of both, "
                            "and neither 6 nor 8 divides the other"),
              "%s", r.out);
    cr_expect(strstr(r.out, "dense  dp  = world / (tp x cp x pp) = 48 / (2 x 3 x 1) = 8"), "%s", r.out);
    cr_expect(strstr(r.out, "expert edp = world / (ep x etp x pp) = 48 / (4 x 2 x 1) = 6"), "%s", r.out);
    cr_expect(strstr(r.out, "NVLink domain  8 GPUs the job fills: tp 2 inside; ep 4 inside"), "%s", r.out);
    cr_expect(strstr(r.out, "SP             off: recommended with TP > 1 from 2K tokens"), "%s", r.out);
    cr_expect(strstr(r.out, "seq 12288 is a multiple of 2 x cp = 6"), "%s", r.out);
    cr_expect(strstr(r.out, "long sequence  seq 12288, 8K-32K tokens: add CP 2"), "%s", r.out);
}

/* A dense layout whose TP group spans two 8-GPU nodes says so; SP needs TP. */
Test(sizing, groups_across_the_nvlink_domain)
{
    result r;
    run(&r, "run model.name=llama3-70b cluster.topology=dgx-h100 cluster.num_gpus=64 "
            "model.tensor_model_parallel_size=16 model.sequence_parallel=true "
            "model.seq_length=1024 train.global_batch_size=64 --layout");
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "tp 16 crosses it (larger than the domain)"), "%s", r.out);
    cr_expect(strstr(r.out, "SP             on"), "%s", r.out);
    cr_expect(strstr(r.out, "under 2K tokens: neither SP nor CP needed"), "%s", r.out);
    cr_expect(!strstr(r.out, "not tp x cp x ep") && !strstr(r.out, "expert edp"), "a dense layout has no expert sizes: %s", r.out);

    run(&r, "run model.name=llama3-8b cluster.topology=dgx-h100 cluster.num_gpus=8 "
            "model.seq_length=65536 model.context_parallel_size=8 train.global_batch_size=8 --layout");
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "SP             off (needs TP > 1)"), "%s", r.out);
    cr_expect(strstr(r.out, "32K tokens and more: CP 4-8 (8 from 64K), hierarchical (cp_comm_type a2a+p2p)"), "%s", r.out);
}

/* An uneven layer count is refused with the keys that would split it. */
Test(sizing, uneven_layers_name_the_keys_that_split_them)
{
    result r;
    run(&r, "run model.name=llama3.1-405b cluster.topology=dgx-h100 cluster.num_gpus=64 "
            "model.pipeline_model_parallel_size=8 model.tensor_model_parallel_size=8 train.global_batch_size=64");
    expect_refusal(&r, "126 layers on 8 stages", "num_layers (126) must be divisible by pipeline_model_parallel_size (8)",
                   "126 + 2 = 128 would split: model.account_for_embedding_in_pipeline_split=true "
                   "model.account_for_loss_in_pipeline_split=true");
    run(&r, "run model.name=llama3.1-405b cluster.topology=dgx-h100 cluster.num_gpus=40 "
            "model.pipeline_model_parallel_size=5 model.tensor_model_parallel_size=8 train.global_batch_size=64");
    expect_refusal(&r, "126 layers on 5 stages", "uneven splits: model.num_layers_in_first_pipeline_stage",
                   "model.pipeline_model_parallel_layout");
}
