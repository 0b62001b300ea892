/* handover: overrides and a Slurm script for a layout (see handover.h). */
#include "handover.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char *const cp_comm_names[] = { "p2p", "all_gather", "a2a", "a2a+p2p" };
static const char *const recompute_names[] = { "none", "selective", "full" };

static bool shell_safe(const char *s)
{
    if (!s[0])
        return false;
    for (; *s; s++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-+=:/,@%", *s))
            return false;
    return true;
}

void handover_shell_word(FILE *out, const char *s)
{
    if (shell_safe(s)) {
        fputs(s, out);
        return;
    }
    fputc('\'', out);
    for (; *s; s++) {
        if (*s == '\'')
            fputs("'\\''", out);
        else
            fputc(*s, out);
    }
    fputc('\'', out);
}

bool handover_recipe_ok(const char *name)
{
    if (!name[0] || name[0] == '-' || strlen(name) > 128)
        return false;
    for (; *name; name++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", *name))
            return false;
    return true;
}

/* One KEY=VALUE word; Bridge spells a 0 that means "the default" null. */
static void word(FILE *out, bool *first, const char *key, const char *value)
{
    char w[256];
    snprintf(w, sizeof w, "%s=%s", key, value);
    if (!*first)
        fputc(' ', out);
    *first = false;
    handover_shell_word(out, w);
}

static void word_int(FILE *out, bool *first, const char *key, int64_t v, bool zero_is_null)
{
    char num[32];
    if (zero_is_null && v == 0)
        snprintf(num, sizeof num, "null");
    else
        snprintf(num, sizeof num, "%" PRId64, v);
    word(out, first, key, num);
}

static void word_bool(FILE *out, bool *first, const char *key, bool v) { word(out, first, key, v ? "true" : "false"); }

void handover_overrides(FILE *out, const run_inputs *in, handover_flavor fl)
{
    const parallel_spec *p = &in->par;
    const bool br = fl == HANDOVER_BRIDGE;
    bool first = true;
    if (!br)
        word_int(out, &first, "cluster.num_gpus", in->cluster.num_gpus, false);
    word_int(out, &first, "model.tensor_model_parallel_size", p->tp, false);
    word_int(out, &first, "model.pipeline_model_parallel_size", p->pp, false);
    /* Bridge: no interleaving is null (VPP 1 is not accepted everywhere) */
    word_int(out, &first, "model.virtual_pipeline_model_parallel_size", br && p->vp <= 1 ? 0 : p->vp, br);
    word_int(out, &first, "model.num_layers_in_first_pipeline_stage", p->num_layers_in_first_pipeline_stage, br);
    word_int(out, &first, "model.num_layers_in_last_pipeline_stage", p->num_layers_in_last_pipeline_stage, br);
    word_bool(out, &first, "model.account_for_embedding_in_pipeline_split", p->account_for_embedding_in_pipeline_split);
    word_bool(out, &first, "model.account_for_loss_in_pipeline_split", p->account_for_loss_in_pipeline_split);
    word_int(out, &first, "model.context_parallel_size", p->cp, false);
    int cpk = (int)p->cp_comm_type;
    word(out, &first, "model.cp_comm_type", cpk >= 0 && cpk < 4 ? cp_comm_names[cpk] : "p2p");
    if (!br || p->n_hierarchical_cp_sizes > 0) {
        char list[160] = "[";
        for (int k = 0; k < p->n_hierarchical_cp_sizes && k < MAX_HIER_CP; k++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%" PRId64, k ? "," : "",
                     p->hierarchical_cp_sizes[k]);
        snprintf(list + strlen(list), sizeof list - strlen(list), "]");
        word(out, &first, "model.hierarchical_context_parallel_sizes", list);
    }
    word_int(out, &first, "model.expert_model_parallel_size", p->ep, false);
    word_int(out, &first, "model.expert_tensor_parallel_size", p->etp, br);
    word_bool(out, &first, "model.sequence_parallel", p->sequence_parallel);
    word_bool(out, &first, "model.tp_comm_overlap", p->tp_comm_overlap);
    int rk = (int)p->recompute_granularity;
    word(out, &first, "model.recompute_granularity",
         br && rk == RECOMPUTE_NONE ? "null" : rk >= 0 && rk < 3 ? recompute_names[rk] : "none");
    word_int(out, &first, "train.micro_batch_size", in->train.micro_batch_size, false);
    word_int(out, &first, "train.global_batch_size", in->train.global_batch_size, false);
    word_bool(out, &first, "ddp.use_distributed_optimizer", in->ddp.use_distributed_optimizer);
    word_bool(out, &first, "ddp.overlap_grad_reduce", in->ddp.overlap_grad_reduce);
    word_bool(out, &first, "ddp.overlap_param_gather", in->ddp.overlap_param_gather);
    if (in->ddp.use_megatron_fsdp) {
        const ddp_spec *d = &in->ddp;
        word_bool(out, &first, "ddp.use_megatron_fsdp", true);
        word(out, &first, "ddp.data_parallel_sharding_strategy", dp_shard_name(d->sharding));
        word_bool(out, &first, "ddp.fsdp_double_buffer", d->fsdp_double_buffer);
        if (d->num_distributed_optimizer_instances > 1) {
            word_int(out, &first, "ddp.num_distributed_optimizer_instances", d->num_distributed_optimizer_instances,
                     false);
            word(out, &first, "ddp.outer_dp_sharding_strategy", dp_shard_name(d->outer_sharding));
        }
    }
    /* the EP overlap: always for a rerun (the base may set it), only when on for Bridge */
    if (!br || p->overlap_moe_ep_comm) {
        word_bool(out, &first, "model.overlap_moe_expert_parallel_comm", p->overlap_moe_ep_comm);
        word_bool(out, &first, "model.delay_wgrad_compute", p->delay_wgrad_compute);
    }
    /* parsim's schedules beyond Megatron's have no Bridge name */
    if (!br && p->pipeline_schedule != SCHED_MEGATRON)
        word(out, &first, "sim.pipeline_schedule", sched_name_str(p->pipeline_schedule));
}

/* name with every character the shell or Slurm could read replaced. */
static void plain_name(char *dst, size_t len, const char *src)
{
    size_t k = 0;
    for (; src[k] && k + 1 < len; k++)
        dst[k] = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", src[k]) ? src[k] : '_';
    dst[k] = '\0';
    if (!k)
        snprintf(dst, len, "model");
}

int handover_sbatch(FILE *out, const run_inputs *in, const strategy_t *s, const char *recipe, sim_err *err)
{
    const int64_t world = s->world, gpn = in->cluster.gpus_per_node;
    if (gpn < 1 || (world > gpn && world % gpn != 0))
        return sim_err_set_at(err, SIM_EINVAL, NULL, 0, "cluster.num_gpus",
                              "%" PRId64 " GPUs are not whole nodes of %" PRId64
                              " (cluster.gpus_per_node): no batch script for it",
                              world, gpn);
    const int64_t nodes = world > gpn ? world / gpn : 1, per_node = world > gpn ? gpn : world;
    char model[64], gpu[64], topo[64];
    plain_name(model, sizeof model, in->model.name);
    plain_name(gpu, sizeof gpu, in->cluster.gpu.name);
    plain_name(topo, sizeof topo, in->cluster.name);
    fprintf(out, "#!/bin/bash\n");
    fprintf(out, "# Megatron Bridge job for the layout parsim planned: %s on %" PRId64 " x %s (%s)\n", model,
            world, gpu, topo);
    fprintf(out, "#   TP %" PRId64 "  PP %" PRId64 "  VP %" PRId64 "  CP %" PRId64 "  EP %" PRId64 "  ETP %" PRId64
                 "  SP %s  micro batch %" PRId64 "  global batch %" PRId64 "\n",
            s->tp, s->pp, s->v, s->cp, s->ep, s->etp, s->par.sequence_parallel ? "on" : "off",
            s->train.micro_batch_size, s->train.global_batch_size);
    const int64_t dense = s->tp * s->cp * s->pp, expert = s->ep * s->etp * s->pp;
    fprintf(out, "#   the layout runs on multiples of PP x lcm(TP x CP, EP x ETP) = %" PRId64 " GPUs (DP %" PRId64
                 ", expert DP %" PRId64 " there); on %" PRId64 ": DP %" PRId64 ", expert DP %" PRId64 "\n",
            s->min_gpus, dense > 0 ? s->min_gpus / dense : 0, expert > 0 ? s->min_gpus / expert : 0, world, s->dp,
            s->edp);
    fprintf(out, "#SBATCH --job-name=parsim-%s\n", model);
    fprintf(out, "#SBATCH --nodes=%" PRId64 "\n", nodes);
    fprintf(out, "#SBATCH --ntasks-per-node=1\n");
    fprintf(out, "#SBATCH --gpus-per-node=%" PRId64 "\n", per_node);
    fprintf(out, "#SBATCH --exclusive\n\n");
    fprintf(out, "set -euo pipefail\n");
    if (recipe)
        fprintf(out, "RECIPE=%s\n", recipe);
    else
        fprintf(out, "RECIPE=${RECIPE:?name the Megatron Bridge recipe: RECIPE=NAME sbatch %s.sbatch}\n", model);
    fprintf(out, "MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\n");
    fprintf(out, "MASTER_PORT=${MASTER_PORT:-29500}\n");
    fprintf(out, "export MASTER_ADDR MASTER_PORT\n\n");
    fprintf(out, "srun --ntasks-per-node=1 torchrun --nnodes=\"$SLURM_JOB_NUM_NODES\" --nproc-per-node=%" PRId64
                 " \\\n",
            per_node);
    fprintf(out, "  --rdzv-backend=c10d --rdzv-endpoint=\"$MASTER_ADDR:$MASTER_PORT\" \\\n");
    fprintf(out, "  scripts/training/run_recipe.py --recipe \"$RECIPE\" \\\n  ");
    handover_overrides(out, in, HANDOVER_BRIDGE);
    fputc('\n', out);
    return SIM_OK;
}
