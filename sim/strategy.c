/* strategy: Megatron's rules for a parallel layout, the sizes derived from
 * it and where its groups sit on the fabric.
 *
 * The rules are checked in a fixed order and the first one violated is
 * reported, naming the config key a user would change (the reader of the key adds
 * its file:line), the rule and the numbers.  Sources: reference §5.1
 * (world-size relations), §5.4 (asserts) and §3.3 (interleaved schedule).
 *
 * One deliberate difference from the usual statement: the smallest world is
 * pp * lcm(tp*cp, ep*etp), because Megatron requires the world size to be a
 * multiple of both tp*cp*pp and etp*ep*pp; the often-quoted
 * pp * max(tp*cp, ep*etp) is right only when one of the two divides the
 * other.  Errors and the layout view say so when the two differ.
 */
#include "strategy.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "intmath.h"
#include "net.h"

/* Sizes come from config as int64; products of four of them can overflow.
 * Every caller treats an overflowing product as "larger than the world". */
static bool mul_ok(int64_t a, int64_t b, int64_t *out)
{
    int64_t p;
    if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &p))
        return false;
    *out = p;
    return true;
}

/* The key only: whoever read the key (config, the command line) knows its
 * file and line and adds them (cfg_err_locate). */
#define BAD(key, ...) sim_err_set_at(err, SIM_EINVAL, NULL, 0, key, __VA_ARGS__)

#define K_TP "model.tensor_model_parallel_size"
#define K_PP "model.pipeline_model_parallel_size"
#define K_VP "model.virtual_pipeline_model_parallel_size"
#define K_CP "model.context_parallel_size"
#define K_EP "model.expert_model_parallel_size"
#define K_ETP "model.expert_tensor_parallel_size"
#define K_WORLD "cluster.num_gpus"
#define K_GBS "train.global_batch_size"
#define K_MBS "train.micro_batch_size"
#define K_N "model.microbatch_group_size_per_vp_stage"

#define K_SCHED "sim.pipeline_schedule"

/* Rule 10: the pipeline schedule against the chunks per rank: 1f1b and
 * zb-h1 run one chunk, interleaved more than one, the V schedules (zb-v,
 * dualpipev) two on each of at least two ranks. */
static int check_schedule(const strategy_t *s, sim_err *err)
{
    const sched_name n = s->par.pipeline_schedule;
    const char *name = sched_name_str(n);
    if ((n == SCHED_1F1B || n == SCHED_ZB_H1) && s->v != 1)
        return BAD(K_SCHED, "%s runs one model chunk per pipeline rank; virtual_pipeline_model_parallel_size is %" PRId64,
                   name, s->v);
    if (n == SCHED_INTERLEAVED && s->v < 2)
        return BAD(K_SCHED, "interleaved needs virtual_pipeline_model_parallel_size >= 2 (got %" PRId64 ")", s->v);
    if (sched_name_is_v(n) && s->v != 2)
        return BAD(K_SCHED, "%s places two model chunks per pipeline rank in a V; virtual_pipeline_model_parallel_size is %" PRId64,
                   name, s->v);
    if (sched_name_is_v(n) && s->pp < 2)
        return BAD(K_SCHED, "%s needs pipeline_model_parallel_size >= 2 (got %" PRId64 ")", name, s->pp);
    return SIM_OK;
}

/* Rule 11: Megatron's conditions for the EP all-to-all overlap (combined
 * 1F1B, transformer_config.py:3002-3101).  bf16/fp16 there is the
 * parameter and autocast dtype, which fp8 recipes keep (bf16 with fp8
 * GEMMs); parsim has no fp32 training, so no precision is refused.  The
 * shared-expert overlap's two conditions (transformer_config.py) first. */
int strategy_check_ep_overlap(const model_spec *m, const parallel_spec *p, int64_t pp, int64_t v, sim_err *err)
{
    /* The shared-expert overlap is the alltoall / flex dispatcher's (it
     * calls the shared experts between its exchanges), and the combined
     * 1F1B schedules the shared experts itself. */
    if (p->moe_shared_expert_overlap && p->moe_token_dispatcher == MOE_DISPATCHER_ALLGATHER)
        return BAD("model.moe_shared_expert_overlap", "needs model.moe_token_dispatcher_type alltoall or flex");
    if (p->moe_shared_expert_overlap && p->overlap_moe_ep_comm)
        return BAD("model.moe_shared_expert_overlap", "cannot go with model.overlap_moe_expert_parallel_comm");
    if (p->delay_wgrad_compute && !p->overlap_moe_ep_comm)
        return BAD("model.delay_wgrad_compute", "requires model.overlap_moe_expert_parallel_comm");
    if (!p->overlap_moe_ep_comm)
        return SIM_OK;
    const char *k = "model.overlap_moe_expert_parallel_comm";
    if (p->ep <= 1)
        return BAD(k, "needs expert_model_parallel_size > 1 (got %" PRId64 ")", p->ep);
    if (p->moe_token_dispatcher != MOE_DISPATCHER_ALLTOALL && p->moe_token_dispatcher != MOE_DISPATCHER_FLEX)
        return BAD(k, "needs model.moe_token_dispatcher_type alltoall or flex");
    /* DualPipeV pairs F and B by itself: the overlap runs its pairs as
     * overlapped templates; the zero-bubble orders have no pairs. */
    if (p->pipeline_schedule == SCHED_ZB_H1 || p->pipeline_schedule == SCHED_ZB_V)
        return BAD(k, "is Megatron's combined 1F1B (or DualPipeV's F&B pairs): sim.pipeline_schedule %s has no "
                   "paired passes", sched_name_str(p->pipeline_schedule));
    if (pp > 1 && v <= 1)
        return BAD(k, "with pipeline_model_parallel_size %" PRId64 " needs virtual_pipeline_model_parallel_size > 1",
                   pp);
    if (p->recompute_granularity == RECOMPUTE_FULL)
        return BAD(k, "cannot go with full recompute (model.recompute_granularity)");
    if (p->recompute_num_layers_given)
        return BAD(k, "cannot go with model.recompute_num_layers");
    if (p->recompute_granularity == RECOMPUTE_SELECTIVE && (p->recompute_modules & RECOMPUTE_MOD_MOE))
        return BAD(k, "cannot go with moe in model.recompute_modules");
    if (m->mtp_num_layers > 1)
        return BAD(k, "allows at most one MTP layer (model.mtp_num_layers is %" PRId64 ")", m->mtp_num_layers);
    return SIM_OK;
}

/* Rule 12: CPU activation offloading.  Megatron's checks
 * (transformer_config.py, __post_init__): the offloaded layers are fewer
 * than the layers, no pipeline parallelism, no activation recompute; CUDA
 * graphs are refused where config reads them (check_graphs).  parsim's own:
 * weight offloading and the combined 1F1B's overlapped layers are not
 * modeled, and the copies need the host link's bandwidth. */
static int check_offload(const model_spec *m, const cluster_spec *c, const parallel_spec *p, sim_err *err)
{
    const char *k = "model.cpu_offloading";
    if (!p->cpu_offloading)
        return SIM_OK;
    if (p->cpu_offloading_num_layers >= m->num_layers)
        return BAD("model.cpu_offloading_num_layers",
                   "CPU offloading can be done only for layers less than model.num_layers (%" PRId64 "), got %" PRId64,
                   m->num_layers, p->cpu_offloading_num_layers);
    if (p->pp > 1)
        return BAD(k, "has no support for pipeline parallelism (pipeline_model_parallel_size %" PRId64 ")", p->pp);
    if (p->recompute_granularity != RECOMPUTE_NONE)
        return BAD(k, "does not work with activation recompute (model.recompute_granularity)");
    if (p->cpu_offloading_weights)
        return BAD("model.cpu_offloading_weights", "weight offloading is not modeled (only activations)");
    if (p->overlap_moe_ep_comm)
        return BAD(k, "with model.overlap_moe_expert_parallel_comm is not modeled");
    if (p->cpu_offloading_activations && p->cpu_offloading_num_layers > 0 && !(c->gpu.host_link_bytes_per_s > 0))
        return BAD("cluster.gpu.host_link_gbytes_per_s", "is needed for CPU offloading (the topology gives none)");
    return SIM_OK;
}

/* Rule 1: every size is a positive count (0 means "default" only where
 * the key says so). */
static int check_sizes(const model_spec *m, const cluster_spec *c, const parallel_spec *p,
                       const train_spec *t, sim_err *err)
{
    const struct {
        const char *key;
        int64_t v;
        int64_t min;
    } sizes[] = {
        { K_TP, p->tp, 1 },          { K_PP, p->pp, 1 },
        { K_VP, p->vp, 0 },          { K_CP, p->cp, 1 },
        { K_EP, p->ep, 1 },          { K_ETP, p->etp, 0 },
        { K_N, p->microbatch_group_size_per_vp_stage, 0 },
        { K_WORLD, c->num_gpus, 1 }, { "cluster.gpus_per_node", c->gpus_per_node, 1 },
        { "cluster.nvlink_domain_gpus", c->nvlink_domain_gpus, 1 },
        { K_GBS, t->global_batch_size, 1 }, { K_MBS, t->micro_batch_size, 1 },
        { "model.num_layers", m->num_layers, 1 },
        { "model.num_attention_heads", m->num_attention_heads, 1 },
        { "model.seq_length", m->seq_length, 1 },
        { "model.num_query_groups", m->num_query_groups, 0 },
        { "model.num_moe_experts", m->num_moe_experts, 0 },
        { "model.num_layers_in_first_pipeline_stage", p->num_layers_in_first_pipeline_stage, 0 },
        { "model.num_layers_in_last_pipeline_stage", p->num_layers_in_last_pipeline_stage, 0 },
    };
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        if (sizes[k].v < sizes[k].min)
            return BAD(sizes[k].key, "must be >= %" PRId64 " (got %" PRId64 ")", sizes[k].min,
                       sizes[k].v);
    return SIM_OK;
}

/* Rule 7: the world holds whole dense (tp*cp*pp) and expert (etp*ep*pp)
 * model replicas. */
static int check_world(strategy_t *s, sim_err *err)
{
    int64_t dense_mp = 0, expert_mp = 0, tpcp = 0, epetp = 0, lcm = 0, min_gpus = 0;
    bool ok = mul_ok(s->tp, s->cp, &tpcp) && mul_ok(tpcp, s->pp, &dense_mp) &&
              mul_ok(s->ep, s->etp, &epetp) && mul_ok(epetp, s->pp, &expert_mp) &&
              mul_ok(tpcp / imath_gcd(tpcp, epetp), epetp, &lcm) && mul_ok(s->pp, lcm, &min_gpus);
    if (!ok)
        return BAD(K_WORLD, "the parallel sizes multiply past any world size "
                            "(tp %" PRId64 ", cp %" PRId64 ", pp %" PRId64 ", ep %" PRId64
                            ", etp %" PRId64 ")", s->tp, s->cp, s->pp, s->ep, s->etp);
    s->min_gpus = min_gpus;
    s->min_gpus_common = s->pp * (tpcp > epetp ? tpcp : epetp);

    if (s->world % dense_mp == 0 && s->world % expert_mp == 0)
        return SIM_OK;
    char note[200] = "";
    if (s->min_gpus != s->min_gpus_common)
        snprintf(note, sizeof note,
                 ", not pp*max(tp*cp, ep*etp) = %" PRId64 ", since neither %" PRId64
                 " nor %" PRId64 " divides the other", s->min_gpus_common, tpcp, epetp);
    return BAD(K_WORLD,
               "%" PRId64 " GPUs: the world size must be a multiple of tp*cp*pp = %" PRId64
               " (%" PRId64 "x%" PRId64 "x%" PRId64 ") and of etp*ep*pp = %" PRId64
               " (%" PRId64 "x%" PRId64 "x%" PRId64 "); the smallest such world is "
               "pp*lcm(tp*cp, ep*etp) = %" PRId64 " GPUs%s",
               s->world, dense_mp, s->tp, s->cp, s->pp, expert_mp, s->etp, s->ep, s->pp,
               s->min_gpus, note);
}

/* Mamba-2 mixers under TP and CP (megatron/core/ssm/mamba_mixer.py:259-274,
 * mamba_context_parallel.py:104-129): heads and groups split over TP; CP
 * is the head-parallel all-to-all, so the heads of a TP rank split over
 * CP.  Groups of a TP rank split over CP too, or, when fewer than CP, are
 * repeated CP / (G/TP) times (group_repeat_count, an integer). */
int64_t strategy_mamba_group_repeat(const model_spec *m, int64_t tp, int64_t cp)
{
    int64_t groups = tp >= 1 ? m->mamba_num_groups / tp : 0;
    return groups >= 1 && groups < cp && cp % groups == 0 ? cp / groups : 1;
}

int strategy_check_mamba(const model_spec *m, int64_t tp, int64_t cp, sim_err *err)
{
    if (!model_has_mamba(m) || tp < 1 || cp < 1)
        return SIM_OK; /* tp, cp < 1: their own rules */
    if (m->mamba_num_heads % tp != 0)
        return BAD("model.mamba_num_heads", "%" PRId64 " Mamba heads must be divisible by "
                   "tensor_model_parallel_size (%" PRId64 ")", m->mamba_num_heads, tp);
    if (m->mamba_num_groups % tp != 0)
        return BAD("model.mamba_num_groups", "%" PRId64 " Mamba groups must be divisible by "
                   "tensor_model_parallel_size (%" PRId64 ")", m->mamba_num_groups, tp);
    int64_t heads = m->mamba_num_heads / tp, groups = m->mamba_num_groups / tp;
    if (heads % cp != 0)
        return BAD(K_CP, "the Mamba heads of a TP rank (mamba_num_heads / tensor_model_parallel_size = %" PRId64
                   ") must be divisible by context_parallel_size (%" PRId64 ")", heads, cp);
    if (groups % cp != 0 && cp % groups != 0)
        return BAD(K_CP, "the Mamba groups of a TP rank (mamba_num_groups / tensor_model_parallel_size = %" PRId64
                   ") and context_parallel_size (%" PRId64 ") must divide one another", groups, cp);
    return SIM_OK;
}

/* Layers per virtual stage, as Megatron's get_num_layers_to_build splits
 * them: evenly; or with num_layers_in_first/last_pipeline_stage on the
 * first/last rank and the rest evenly over the middle ranks; or counting
 * the embedding and/or the loss as one layer each
 * (account_for_*_in_pipeline_split).  Fills s->vstage_start. */
/* Expands Megatron's layout grammar into out (stages separated by '|'):
 * X*N repeats the symbol X, (...)*N the group; spaces and commas are
 * ignored.  Returns the expanded length or -1 on a syntax error. */
static int expand_layout(const char *in, size_t *pos, char *out, size_t cap, size_t n, int depth)
{
    while (in[*pos] && in[*pos] != ')') {
        char ch = in[*pos];
        size_t start = n;
        if (ch == ' ' || ch == ',') {
            (*pos)++;
            continue;
        }
        if (ch == '(') {
            if (depth > 8)
                return -1;
            (*pos)++;
            int r = expand_layout(in, pos, out, cap, n, depth + 1);
            if (r < 0 || in[*pos] != ')')
                return -1;
            (*pos)++;
            n = (size_t)r;
        } else if (ch == 'E' || ch == 't' || ch == 'm' || ch == 'L' || ch == '|') {
            if (n + 1 >= cap)
                return -1;
            out[n++] = ch;
            (*pos)++;
        } else {
            return -1;
        }
        if (in[*pos] == '*') {
            (*pos)++;
            char *end;
            long times = strtol(in + *pos, &end, 10);
            if (end == in + *pos || times < 0 || times > 4096)
                return -1;
            *pos = (size_t)(end - in);
            size_t len = n - start;
            if (times == 0)
                n = start;
            for (long k = 1; k < times; k++) {
                if (n + len >= cap)
                    return -1;
                memmove(out + n, out + start, len);
                n += len;
            }
        }
    }
    return (int)n;
}

/* Layers per virtual stage from a layout string. */
static int split_by_layout(strategy_t *s, const model_spec *m, sim_err *err, int64_t *count)
{
    static const char *const key = "model.pipeline_model_parallel_layout";
    char buf[8192];
    size_t pos = 0;
    int n = expand_layout(s->par.pipeline_model_parallel_layout, &pos, buf, sizeof buf, 0, 0);
    if (n < 0 || s->par.pipeline_model_parallel_layout[pos] != '\0')
        return BAD(key, "cannot read the layout near position %zu (symbols E t m L |, X*N, (..)*N)", pos);
    const int64_t nv = s->pp * s->v;
    int64_t stage = 0, layers = 0;
    count[0] = 0;
    for (int i = 0; i < n; i++) {
        if (buf[i] == '|') {
            if (++stage >= nv)
                return BAD(key, "has more than pipeline x virtual = %" PRId64 " stages", nv);
            count[stage] = 0;
        } else if (buf[i] == 't') {
            count[stage]++;
            layers++;
        } else if (buf[i] == 'E' && stage != 0) {
            return BAD(key, "the embedding (E) must be in the first stage");
        } else if (buf[i] == 'L' && stage != nv - 1) {
            return BAD(key, "the loss (L) must be in the last stage");
        }
    }
    if (stage + 1 != nv)
        return BAD(key, "has %" PRId64 " stages, pipeline x virtual size is %" PRId64, stage + 1, nv);
    if (layers != m->num_layers)
        return BAD(key, "places %" PRId64 " decoder layers (t), the model has %" PRId64, layers, m->num_layers);
    return SIM_OK;
}


/* What would make an uneven layer count split (Megatron's uneven-pipeline
 * keys), for the message that refuses it. */
static void uneven_split_hint(int64_t L, int64_t p, int64_t v, bool counted, char *buf, size_t len)
{
    if (!counted && (L + 2) % p == 0 && ((L + 2) / p) % v == 0)
        snprintf(buf, len, "; %" PRId64 " + 2 = %" PRId64 " would split: model.account_for_embedding_in_pipeline_split"
                 "=true model.account_for_loss_in_pipeline_split=true count the embedding and the loss as layers",
                 L, L + 2);
    else if (!counted && (L + 1) % p == 0 && ((L + 1) / p) % v == 0)
        snprintf(buf, len, "; %" PRId64 " + 1 = %" PRId64 " would split: model.account_for_embedding_in_pipeline_split"
                 "=true (or account_for_loss_in_pipeline_split) counts one of them as a layer", L, L + 1);
    else
        snprintf(buf, len, "; uneven splits: model.num_layers_in_first_pipeline_stage / "
                 "num_layers_in_last_pipeline_stage, or model.pipeline_model_parallel_layout");
}

static int split_layers(strategy_t *s, const model_spec *m, sim_err *err)
{
    const parallel_spec *par = &s->par;
    const int64_t L = m->num_layers, p = s->pp, v = s->v;
    const int64_t first = par->num_layers_in_first_pipeline_stage, last = par->num_layers_in_last_pipeline_stage;
    const bool acc_emb = par->account_for_embedding_in_pipeline_split,
               acc_loss = par->account_for_loss_in_pipeline_split;
    int64_t count[MODEL_MAX_LAYERS + 2], nv = 0;
    if (!mul_ok(p, v, &nv) || nv > MODEL_MAX_LAYERS + 2)
        return BAD(p > MODEL_MAX_LAYERS + 2 ? K_PP : K_VP,
                   "pipeline_model_parallel_size x virtual size (%" PRId64 " x %" PRId64
                   ") exceeds %d virtual stages", p, v, MODEL_MAX_LAYERS + 2);
    if (L > MODEL_MAX_LAYERS)
        return BAD("model.num_layers", "must be <= %d (got %" PRId64 ")", MODEL_MAX_LAYERS, L);

    if (m->hybrid_segments > 0) {
        /* A hybrid pattern with '|': one segment per virtual stage, in
         * order (megatron-features.md B.1: VPP = segments / PP,
         * arguments.py:840-860).  Without '|' the symbols split evenly
         * like the layers below (hybrid_layer_allocation.py:331-372). */
        if (first > 0 || last > 0 || acc_emb || acc_loss || par->pipeline_model_parallel_layout[0])
            return BAD("model.hybrid_layer_pattern",
                       "stage boundaries ('|') cannot be combined with first/last stage layers, "
                       "account_for_*_in_pipeline_split or pipeline_model_parallel_layout");
        if (m->hybrid_segments != nv)
            return BAD("model.hybrid_layer_pattern",
                       "has %" PRId32 " pipeline segments ('|'), pipeline x virtual size is %" PRId64,
                       m->hybrid_segments, nv);
        for (int64_t vs = 0; vs < nv; vs++)
            count[vs] = m->hybrid_segment_layers[vs];
    } else if (par->pipeline_model_parallel_layout[0]) {
        if (first > 0 || last > 0 || acc_emb || acc_loss)
            return BAD("model.pipeline_model_parallel_layout",
                       "cannot be combined with first/last stage layers or account_for_*_in_pipeline_split");
        int rc = split_by_layout(s, m, err, count);
        if (rc)
            return rc;
    } else if (first > 0 || last > 0) {
        const char *key = first > 0 ? "model.num_layers_in_first_pipeline_stage"
                                    : "model.num_layers_in_last_pipeline_stage";
        if (acc_emb || acc_loss)
            return BAD(key, "cannot be combined with account_for_embedding/loss_in_pipeline_split");
        if (p < 2)
            return BAD(key, "needs pipeline_model_parallel_size > 1 (got %" PRId64 ")", p);
        if (first > L || last > L)
            return BAD(key, "first (%" PRId64 ") and last (%" PRId64 ") stage layers exceed "
                       "num_layers (%" PRId64 ")", first, last, L);
        if (first % v != 0 || last % v != 0)
            return BAD(key, "layers on the first/last pipeline stage (%" PRId64 "/%" PRId64
                       ") must be divisible by the virtual size (%" PRId64 ")", first, last, v);
        int64_t middle_ranks = p - (first > 0) - (last > 0), middle = L - first - last;
        if (middle < 0 || (middle_ranks == 0 && middle != 0))
            return BAD(key, "first (%" PRId64 ") and last (%" PRId64 ") stage layers do not add up to "
                       "num_layers (%" PRId64 ")", first, last, L);
        if (middle_ranks > 0 && (middle % middle_ranks != 0 || (middle / middle_ranks) % v != 0))
            return BAD(key, "the %" PRId64 " middle layers must split evenly over %" PRId64
                       " middle pipeline stages and %" PRId64 " virtual stages each", middle, middle_ranks, v);
        int64_t per_mid = middle_ranks > 0 ? middle / middle_ranks / v : 0;
        for (int64_t c = 0; c < v; c++)
            for (int64_t r = 0; r < p; r++)
                count[strategy_vstage(s, r, c)] = r == 0 && first > 0      ? first / v
                                   : r == p - 1 && last > 0 ? last / v
                                                            : per_mid;
    } else {
        int64_t units = L + (acc_emb ? 1 : 0) + (acc_loss ? 1 : 0);
        const char *key = acc_emb || acc_loss ? "model.account_for_embedding_in_pipeline_split" : K_PP;
        if (units % p != 0) {
            char hint[320];
            uneven_split_hint(L, p, v, acc_emb || acc_loss, hint, sizeof hint);
            return BAD(key, "num_layers (%" PRId64 "%s) must be divisible by pipeline_model_parallel_size (%"
                       PRId64 ")%s", units, acc_emb || acc_loss ? ", with embedding/loss counted as layers" : "", p,
                       hint);
        }
        if ((units / p) % v != 0)
            return BAD(K_VP, "layers per pipeline stage (%" PRId64 " = %" PRId64 "/%" PRId64
                       ") must be divisible by virtual_pipeline_model_parallel_size (%" PRId64 ")",
                       units / p, units, p, v);
        for (int64_t vs = 0; vs < nv; vs++)
            count[vs] = units / nv;
        if (acc_emb)
            count[0]--;
        if (acc_loss)
            count[nv - 1]--;
        if (count[0] < 0 || count[nv - 1] < 0)
            return BAD(key, "a virtual stage would hold fewer than zero layers");
    }
    s->vstage_start[0] = 0;
    s->layers_per_chunk = 0;
    for (int64_t vs = 0; vs < nv; vs++) {
        s->vstage_start[vs + 1] = s->vstage_start[vs] + (int32_t)count[vs];
        if (count[vs] > s->layers_per_chunk)
            s->layers_per_chunk = count[vs];
    }
    return SIM_OK;
}

void strategy_plan(const strategy_t *s, sched_plan *out)
{
    sched_plan_init(out, s->par.pipeline_schedule, s->pp, s->v, s->num_microbatches, s->group_size_n);
    out->combined = s->par.overlap_moe_ep_comm;
}

int64_t strategy_vstage(const strategy_t *s, int64_t stage, int64_t chunk)
{
    sched_plan pl;
    strategy_plan(s, &pl);
    return sched_vstage(&pl, stage, chunk);
}

void strategy_chunk_layers(const strategy_t *s, int64_t stage, int64_t chunk, int64_t *first, int64_t *count)
{
    int64_t vs = strategy_vstage(s, stage, chunk);
    *first = s->vstage_start[vs];
    *count = s->vstage_start[vs + 1] - s->vstage_start[vs];
}

bool strategy_split_layers(const model_spec *m, int64_t pp, int64_t vp, parallel_spec *par)
{
    const int64_t L = m->num_layers, v = vp > 1 ? vp : 1;
    int64_t nv;
    par->num_layers_in_first_pipeline_stage = 0;
    par->num_layers_in_last_pipeline_stage = 0;
    par->account_for_embedding_in_pipeline_split = false;
    par->account_for_loss_in_pipeline_split = false;
    /* Every split below puts at least L + 2 layer units on pp x v virtual
     * stages; more stages than that never split (nor overflow below). */
    if (pp < 1 || L < 1 || L > INT64_MAX - 2 || __builtin_mul_overflow(pp, v, &nv) || nv > L + 2)
        return false;
    if (L % nv == 0)
        return true;
    if (pp > 1 && (L + 2) % nv == 0 && (L + 2) / nv >= 2) {
        par->account_for_embedding_in_pipeline_split = true;
        par->account_for_loss_in_pipeline_split = true;
        return true;
    }
    if (pp < 2 || L % v != 0)
        return false;
    /* Middle stages hold m layers (a multiple of v, at least L/pp); the
     * rest splits over the first and last, each a multiple of v, >= v. */
    int64_t mid = pp > 2 ? v * ((L + nv - 1) / nv) : 0;
    int64_t rest = L - (pp - 2) * mid;
    int64_t last = v * (rest / (2 * v)), first = rest - last;
    if (last < v || first < v || (pp > 2 && first > mid))
        return false;
    par->num_layers_in_first_pipeline_stage = first;
    par->num_layers_in_last_pipeline_stage = last;
    return true;
}

/* Rule 3: CP splits each sequence into 2*cp chunks (load balancing for
 * the causal mask). */
int strategy_check_cp(const model_spec *m, int64_t cp, sim_err *err)
{
    int64_t two_cp = 0;
    if (cp < 1)
        return BAD(K_CP, "must be >= 1 (got %" PRId64 ")", cp);
    if (cp > 1 && (!mul_ok(2, cp, &two_cp) || m->seq_length % two_cp != 0))
        return BAD(K_CP,
                   "seq_length (%" PRId64 ") must be a multiple of 2 * context_parallel_size "
                   "(2 x %" PRId64 ")", m->seq_length, cp);
    return SIM_OK;
}

/* Rule 4: experts split over EP. */
int strategy_check_ep(const model_spec *m, int64_t ep, sim_err *err)
{
    if (ep < 1)
        return BAD(K_EP, "must be >= 1 (got %" PRId64 ")", ep);
    if (ep > 1 && m->num_moe_experts == 0)
        return BAD(K_EP,
                   "expert parallelism (%" PRId64 ") needs a MoE model (model.num_moe_experts "
                   "is 0)", ep);
    if (m->num_moe_experts > 0 && m->num_moe_experts % ep != 0)
        return BAD(K_EP,
                   "num_moe_experts (%" PRId64 ") must be a multiple of "
                   "expert_model_parallel_size (%" PRId64 ")", m->num_moe_experts, ep);
    return SIM_OK;
}

/* Rule 5: heads and query groups split over TP. */
int strategy_check_tp(const model_spec *m, int64_t tp, sim_err *err)
{
    const int64_t a = m->num_attention_heads;
    const int64_t g = m->num_query_groups ? m->num_query_groups : a;
    if (tp < 1)
        return BAD(K_TP, "must be >= 1 (got %" PRId64 ")", tp);
    if (a % tp != 0)
        return BAD(K_TP,
                   "num_attention_heads (%" PRId64 ") must be a multiple of "
                   "tensor_model_parallel_size (%" PRId64 ")", a, tp);
    if (g > 0 && g % tp != 0 && tp % g != 0)
        return BAD(K_TP,
                   "num_query_groups (%" PRId64 ") must be a multiple or a divisor of "
                   "tensor_model_parallel_size (%" PRId64 ")", g, tp);
    return SIM_OK;
}

/* Rule 12: data-parallel sharding (the distributed optimizer, Megatron-FSDP,
 * HSDP / HFSDP; megatron-features.md C.1) and the groups its shards use.
 * The sharding strategies are read only with use_megatron_fsdp, as only
 * Megatron's FSDP adapter reads them (mcore_fsdp_adapter.py:104-228):
 * Bridge writes optim_grads_params for every run. */
#define K_INST "ddp.num_distributed_optimizer_instances"
static int check_sharding(strategy_t *s, const model_spec *m, const cluster_spec *c, const ddp_spec *ddp,
                          sim_err *err)
{
    const bool fsdp = ddp->use_megatron_fsdp;
    const int64_t o = ddp->num_distributed_optimizer_instances, dpcp = s->dp * s->cp;
    s->zero = fsdp ? ddp->sharding : ddp->use_distributed_optimizer ? DP_SHARD_OPTIM : DP_SHARD_NONE;
    s->hfsdp = fsdp && ddp->outer_sharding == DP_SHARD_OPTIM;
    /* config sets these with use_megatron_fsdp; a caller that changed them
     * after (search) asks for what Megatron never runs. */
    if (fsdp && !ddp->use_distributed_optimizer)
        return BAD("ddp.use_distributed_optimizer", "Megatron-FSDP runs the distributed optimizer (it sets it)");
    if (s->zero >= DP_SHARD_OPTIM_GRADS && !ddp->overlap_grad_reduce)
        return BAD("ddp.overlap_grad_reduce", "data_parallel_sharding_strategy optim_grads and "
                   "optim_grads_params reduce gradients in every backward: overlap_grad_reduce is forced on");
    if (s->zero == DP_SHARD_OPTIM_GRADS_PARAMS && !ddp->overlap_param_gather)
        return BAD("ddp.overlap_param_gather", "data_parallel_sharding_strategy optim_grads_params gathers "
                   "parameters per unit: overlap_param_gather is forced on");
    if (o < 1)
        return BAD(K_INST, "must be >= 1 (got %" PRId64 ")", o);
    if (o > 1 && s->zero == DP_SHARD_NONE)
        return BAD(K_INST, "%" PRId64 " optimizer instances need a sharded optimizer "
                   "(ddp.use_distributed_optimizer, or Megatron-FSDP with a strategy other than no_shard)", o);
    /* parallel_state.py: (dp*cp) % num_distributed_optimizer_instances == 0 */
    if (dpcp % o != 0)
        return BAD(K_INST, "data_parallel_size x context_parallel_size (%" PRId64 " x %" PRId64
                   ") must be a multiple of the instances (%" PRId64 ")", s->dp, s->cp, o);
    if (m->num_moe_experts > 0 && s->edp % o != 0)
        return BAD(K_INST, "the expert data-parallel size (%" PRId64 ") must be a multiple of the "
                   "instances (%" PRId64 "): expert shards split over them like the dense ones", s->edp, o);
    if (s->hfsdp && o == 1)
        return BAD("ddp.outer_dp_sharding_strategy", "optim (HFSDP) shards the optimizer state over the "
                   "optimizer instances: it needs ddp.num_distributed_optimizer_instances > 1");
    if (ddp->fp8_param_gather) {
        precision_kind p = s->par.precision;
        if (p != PREC_FP8_DELAYED && p != PREC_FP8_CS && p != PREC_MXFP8 && p != PREC_FP8_BLOCKWISE)
            return BAD("mixed_precision.fp8_param_gather", "gathers fp8 parameters: it needs an FP8 recipe "
                       "(mixed_precision fp8, fp8-cs, fp8-delayed, mxfp8 or fp8-blockwise)");
        if (s->zero == DP_SHARD_NONE)
            return BAD("mixed_precision.fp8_param_gather", "needs a parameter all-gather: the distributed "
                       "optimizer or Megatron-FSDP with a strategy other than no_shard");
    }
    s->dp_outer = o;
    s->dp_inner = dpcp / o;
    s->edp_inner = s->edp % o == 0 ? s->edp / o : s->edp;
    /* Inner groups are consecutive ranks of the DP x CP (expert-DP) group;
     * an outer group takes one rank of each. */
    const struct { int64_t size, stride; } g[STRATEGY_SHARD_GROUPS] = {
        [SHARD_DENSE_INNER] = { s->dp_inner, s->tp },
        [SHARD_DENSE_OUTER] = { o, s->tp * s->dp_inner },
        [SHARD_EXPERT_INNER] = { s->edp_inner, s->etp * s->ep },
        [SHARD_EXPERT_OUTER] = { s->edp / s->edp_inner, s->etp * s->ep * s->edp_inner },
    };
    for (int k = 0; k < STRATEGY_SHARD_GROUPS; k++)
        net_group_placements(c, s->world, g[k].size, g[k].stride, &s->shard_places[k]);
    return SIM_OK;
}

int strategy_resolve(strategy_t *out, const model_spec *m, const cluster_spec *c,
                     const parallel_spec *par, const train_spec *train, const ddp_spec *ddp,
                     sim_err *err)
{
    memset(out, 0, sizeof *out);
    int rc = check_sizes(m, c, par, train, err);
    if (rc)
        return rc;

    strategy_t *s = out;
    s->par = *par;
    s->train = *train;
    s->ddp = *ddp;
    s->world = c->num_gpus;
    s->tp = par->tp;
    s->pp = par->pp;
    s->cp = par->cp;
    s->ep = par->ep;
    s->etp = par->etp ? par->etp : par->tp;  /* Megatron: ETP defaults to TP */
    s->v = par->vp ? par->vp : 1;
    /* A hybrid pattern's '|' segments give the virtual size when it is
     * not set (arguments.py:840-860). */
    if (!par->vp && m->hybrid_segments > 0 && s->pp > 0 && m->hybrid_segments % s->pp == 0)
        s->v = m->hybrid_segments / s->pp;
    /* The V schedules hold two chunks per rank. */
    else if (!par->vp && sched_name_is_v(par->pipeline_schedule))
        s->v = 2;
    if ((rc = check_schedule(s, err)))
        return rc;
    s->group_size_n = par->microbatch_group_size_per_vp_stage ? par->microbatch_group_size_per_vp_stage
                                                               : par->pp;
    s->par.etp = s->etp;
    s->par.vp = s->v;
    s->par.microbatch_group_size_per_vp_stage = s->group_size_n;

    const int64_t a = m->num_attention_heads;

    /* 2. sequence parallelism shards along the TP group */
    if (par->sequence_parallel && s->tp <= 1)
        return BAD("model.sequence_parallel",
                   "sequence parallelism requires tensor_model_parallel_size > 1 (got %" PRId64
                   ")", s->tp);

    /* 3-5. CP against the sequence, EP against the experts, TP against
     * the heads */
    if ((rc = strategy_check_cp(m, s->cp, err)) || (rc = strategy_check_ep(m, s->ep, err)) ||
        (rc = strategy_check_tp(m, s->tp, err)))
        return rc;

    if ((rc = strategy_check_mamba(m, s->tp, s->cp, err)))
        return rc;

    int64_t padded = 0;
    if (!model_padded_vocab_checked(m, s->tp, &padded))
        return BAD("model.make_vocab_size_divisible_by",
                   "the vocabulary (%" PRId64 ") padded to a multiple of make_vocab_size_divisible_by"
                   " x tensor_model_parallel_size (%" PRId64 " x %" PRId64 ") passes 2^63",
                   m->vocab_size, m->make_vocab_size_divisible_by, s->tp);

    /* 6. layers split over stages and virtual stages */
    if (s->v > 1 && !sched_name_is_v(par->pipeline_schedule)) {
        if (s->pp <= 1)
            return BAD(K_VP,
                       "an interleaved schedule (virtual size %" PRId64 ") needs "
                       "pipeline_model_parallel_size > 1 (got %" PRId64 ")", s->v, s->pp);
        if (!par->overlap_p2p_comm && s->pp <= 2)
            return BAD(K_VP,
                       "an interleaved schedule without model.overlap_p2p_comm needs "
                       "pipeline_model_parallel_size > 2 (got %" PRId64 ")", s->pp);
    }
    rc = split_layers(s, m, err);
    if (rc)
        return rc;

    /* 7. world size */
    rc = check_world(s, err);
    if (rc)
        return rc;
    s->dp = s->world / (s->tp * s->cp * s->pp);
    s->edp = s->world / (s->etp * s->ep * s->pp);

    /* 8. batch */
    int64_t per_step = 0;
    if (!mul_ok(train->micro_batch_size, s->dp, &per_step) ||
        train->global_batch_size % per_step != 0)
        return BAD(K_GBS,
                   "global batch size (%" PRId64 ") is not divisible by micro batch size (%"
                   PRId64 ") times data parallel size (%" PRId64 ")",
                   train->global_batch_size, train->micro_batch_size, s->dp);
    s->num_microbatches = train->global_batch_size / per_step;
    int64_t virtual_mbs = 0; /* the schedules count passes as M x v in int64 */
    if (!mul_ok(s->num_microbatches, s->v, &virtual_mbs) || !mul_ok(virtual_mbs, s->pp, &virtual_mbs))
        return BAD(K_GBS,
                   "%" PRId64 " microbatches x %" PRId64 " virtual stages x %" PRId64
                   " pipeline stages pass 2^63 passes", s->num_microbatches, s->v, s->pp);

    if (sched_name_is_v(par->pipeline_schedule) && s->num_microbatches < 2 * s->pp)
        return BAD(K_GBS,
                   "the %s schedule needs at least 2 x pipeline_model_parallel_size = %" PRId64
                   " microbatches, got %" PRId64 " (gbs / (mbs * dp))",
                   sched_name_str(par->pipeline_schedule), 2 * s->pp, s->num_microbatches);

    /* 9. interleaved: microbatches go through the chunks in groups of N */
    if (s->v > 1 && !sched_name_is_v(par->pipeline_schedule)) {
        const char *key = par->microbatch_group_size_per_vp_stage ? K_N : K_GBS;
        int64_t M = s->num_microbatches, N = s->group_size_n;
        if (N < s->pp || N > M)
            return BAD(key,
                       "interleaved schedule: microbatch_group_size_per_vp_stage (%" PRId64
                       ") must be in [pp = %" PRId64 ", M = %" PRId64 "] (M = microbatches "
                       "per step = gbs / (mbs * dp))", N, s->pp, M);
        int64_t r = M % N;
        if (r > 0 && r < s->pp)
            return BAD(key,
                       "interleaved schedule: the remainder of M = %" PRId64 " microbatches "
                       "divided by N = %" PRId64 " is %" PRId64 "; it must be 0 or >= pp = %"
                       PRId64, M, N, r, s->pp);
    }

    if ((rc = strategy_check_ep_overlap(m, &s->par, s->pp, s->v, err)))
        return rc;
    if ((rc = check_offload(m, c, &s->par, err)))
        return rc;

    /* 10. context-parallel communication */
    if (s->cp > 1 && par->cp_comm_type == CP_COMM_A2A && (a / s->tp) % s->cp != 0)
        return BAD("model.cp_comm_type",
                   "cp_comm_type a2a needs the heads per TP rank (%" PRId64 " = %" PRId64
                   "/%" PRId64 ") to be a multiple of context_parallel_size (%" PRId64 ")",
                   a / s->tp, a, s->tp, s->cp);
    if (par->cp_comm_type == CP_COMM_A2A_P2P && par->n_hierarchical_cp_sizes == 0)
        return BAD("model.hierarchical_context_parallel_sizes",
                   "must be set when cp_comm_type is a2a+p2p");
    if (par->n_hierarchical_cp_sizes > 0) {
        int64_t prod = 1;
        for (int k = 0; k < par->n_hierarchical_cp_sizes; k++)
            if (!mul_ok(prod, par->hierarchical_cp_sizes[k], &prod))
                prod = -1;
        if (prod != s->cp)
            return BAD("model.hierarchical_context_parallel_sizes",
                       "the product of the sizes (%" PRId64 ") must equal "
                       "context_parallel_size (%" PRId64 ")", prod, s->cp);
        if (par->cp_comm_type == CP_COMM_A2A_P2P &&
            (a / s->tp) % par->hierarchical_cp_sizes[0] != 0)
            return BAD("model.hierarchical_context_parallel_sizes",
                       "the a2a level (%" PRId64 ") must divide the heads per TP rank (%"
                       PRId64 ")", par->hierarchical_cp_sizes[0], a / s->tp);
    }

    /* 11. overlap options */
    if (ddp->overlap_param_gather && !(ddp->use_distributed_optimizer && ddp->overlap_grad_reduce))
        return BAD("ddp.overlap_param_gather",
                   "requires ddp.use_distributed_optimizer and ddp.overlap_grad_reduce");
    if (par->tp_comm_overlap && !par->sequence_parallel)
        return BAD("model.tp_comm_overlap",
                   "tensor parallel communication/GEMM overlap requires "
                   "model.sequence_parallel");
    if ((rc = check_sharding(s, m, c, ddp, err)) != SIM_OK)
        return rc;

    /* Groups, Megatron's default order: dense tp-cp-dp-pp, expert
     * etp-ep-edp-pp, leftmost fastest.  Each kind's collective steps are
     * paced by its slowest placement. */
    int64_t tpcp = s->tp * s->cp, tpcpdp = tpcp * s->dp;
    const struct { int64_t size, stride; } dims[GROUP_COUNT] = {
        [GROUP_TP] = { s->tp, 1 },
        [GROUP_CP] = { s->cp, s->tp },
        [GROUP_DP] = { s->dp, tpcp },
        [GROUP_DP_CP] = { s->cp * s->dp, s->tp },
        [GROUP_PP] = { s->pp, tpcpdp },
        [GROUP_ETP] = { s->etp, 1 },
        [GROUP_EP] = { s->ep, s->etp },
        [GROUP_EDP] = { s->edp, s->etp * s->ep },
    };
    for (int k = 0; k < GROUP_COUNT; k++) {
        group_placements *p = &s->places[k];
        net_group_placements(c, s->world, dims[k].size, dims[k].stride, p);
        s->groups[k] = p->span[p->worst];
    }
    return SIM_OK;
}

void strategy_coords(const strategy_t *s, int64_t rank, rank_coords *out)
{
    out->tp = rank % s->tp;
    out->cp = rank / s->tp % s->cp;
    out->dp = rank / (s->tp * s->cp) % s->dp;
    out->pp = rank / (s->tp * s->cp * s->dp);
    out->etp = rank % s->etp;
    out->ep = rank / s->etp % s->ep;
    out->edp = rank / (s->etp * s->ep) % s->edp;
}

const char *group_kind_name(group_kind g)
{
    switch (g) {
    case GROUP_TP: return "tp";
    case GROUP_CP: return "cp";
    case GROUP_DP: return "dp";
    case GROUP_DP_CP: return "dp_cp";
    case GROUP_PP: return "pp";
    case GROUP_EP: return "ep";
    case GROUP_ETP: return "etp";
    case GROUP_EDP: return "edp";
    case GROUP_COUNT: break;
    }
    return "?";
}

static const char *const group_label[GROUP_COUNT] = {
    [GROUP_TP] = "TP", [GROUP_CP] = "CP",   [GROUP_DP] = "DP",   [GROUP_DP_CP] = "DP-CP",
    [GROUP_PP] = "PP", [GROUP_EP] = "EP",   [GROUP_ETP] = "ETP", [GROUP_EDP] = "EDP",
};

/* Groups whose collectives sit on the critical path of every layer; the
 * layout view warns when they leave the NVLink domain. */
static const group_kind warn_kinds[] = { GROUP_TP, GROUP_EP, GROUP_ETP };

static bool is_warn_kind(int k)
{
    for (size_t i = 0; i < sizeof warn_kinds / sizeof warn_kinds[0]; i++)
        if ((int)warn_kinds[i] == k)
            return true;
    return false;
}

/* Groups of kind k placed like the slowest on `domains`: with more than
 * one domain when `crossing`, else with as many as the slowest. */
static int64_t groups_with_domains(const group_placements *p, bool crossing)
{
    int64_t d = p->span[p->worst].domains, count = 0;
    for (int i = 0; i < p->n; i++)
        if (crossing ? p->span[i].domains > 1 : p->span[i].domains == d)
            count += p->groups[i];
    return count;
}

/* The warning about a kind whose groups are placed differently, or 0
 * characters when they all sit alike.  Sets *crossing when some groups
 * stay in one NVLink domain and others leave it. */
static size_t placement_warning(const strategy_t *s, int k, char *buf, size_t len, bool *crossing)
{
    const group_placements *p = &s->places[k];
    const group_span *w = &p->span[p->worst];
    *crossing = false;
    if (w->size <= 1 || p->n <= 1)
        return 0;
    int64_t fewest = w->domains;
    for (int i = 0; i < p->n; i++)
        if (p->span[i].domains < fewest)
            fewest = p->span[i].domains;
    int r;
    if (fewest <= 1 && w->domains > 1) {
        *crossing = true;
        r = snprintf(buf, len, "warning: %" PRId64 " of %" PRId64 " %s groups cross an NVLink "
                     "domain boundary; the step is paced by those\n",
                     groups_with_domains(p, true), p->total, group_label[k]);
    } else if (fewest < w->domains) {
        r = snprintf(buf, len, "warning: %" PRId64 " of %" PRId64 " %s groups span %" PRId64
                     " NVLink domains, the others fewer; the step is paced by those\n",
                     groups_with_domains(p, false), p->total, group_label[k], w->domains);
    } else {
        r = snprintf(buf, len, "warning: %s groups are placed %d ways (nodes, scalable units "
                     "or spine share differ); the step is paced by the slowest, %" PRId64
                     " of %" PRId64 " groups\n", group_label[k], p->n, p->groups[p->worst],
                     p->total);
    }
    return r > 0 ? (size_t)r : 0;
}

int strategy_layout_warnings(const strategy_t *s, char *buf, size_t len)
{
    int count = 0;
    size_t w = 0;
    char line[256];
    if (buf && len)
        buf[0] = '\0';
    for (int k = 0; k < GROUP_COUNT; k++) {
        bool crossing;
        size_t n = placement_warning(s, k, line, sizeof line, &crossing);
        const group_span *g = &s->groups[k];
        if (!crossing && is_warn_kind(k) && g->size > 1 && !g->in_nvlink_domain) {
            /* every group of the kind leaves the domain */
            count++;
            if (buf && w < len) {
                if (g->nodes > 1)
                    w += (size_t)snprintf(buf + w, len - w,
                                          "warning: %s group spans %" PRId64 " nodes: its "
                                          "collectives leave the NVLink domain\n",
                                          group_label[k], g->nodes);
                else
                    w += (size_t)snprintf(buf + w, len - w,
                                          "warning: %s group spans %" PRId64 " NVLink domains: "
                                          "its collectives leave the NVLink domain\n",
                                          group_label[k], g->domains);
            }
        }
        if (n == 0)
            continue;
        count++;
        if (buf && w < len)
            w += (size_t)snprintf(buf + w, len - w, "%s", line);
    }
    return count;
}

/* Every distinct placement of each kind: how many groups have it, the
 * lowest base, and what it spans. */
static void print_placements(const strategy_t *s, FILE *out)
{
    fprintf(out, "\nplacements (groups of a kind that sit alike on nodes, NVLink domains and "
                 "scalable units)\n");
    fprintf(out, "%-6s %15s %10s %6s %8s %6s %6s\n", "group", "groups", "from rank", "nodes",
            "domains", "units", "spine");
    for (int k = 0; k < GROUP_COUNT; k++) {
        const group_placements *p = &s->places[k];
        if (p->span[0].size <= 1)
            continue;
        for (int i = 0; i < p->n; i++) {
            const group_span *g = &p->span[i];
            char count[48];
            snprintf(count, sizeof count, "%" PRId64 " of %" PRId64, p->groups[i], p->total);
            const char *note = p->envelope && i == p->n - 1 ? "(the most over the rest)" : "";
            if (p->n > 1 && i == p->worst)
                note = p->envelope && i == p->n - 1 ? "(the most over the rest; slowest)"
                                                    : "(slowest)";
            fprintf(out, "%-6s %15s %10" PRId64 " %6" PRId64 " %8" PRId64 " %6" PRId64
                         " %6.3f%s%s\n", i ? "" : group_label[k], count, g->base, g->nodes,
                    g->domains, g->sus, fmax(g->spine_hop_fraction, g->spine_peer_fraction),
                    *note ? "  " : "", note);
        }
    }
}

void strategy_print_layout(const strategy_t *s, const cluster_spec *c, FILE *out)
{
    enum { MAX_RANKS = 64, MAX_MEMBERS = 16 };
    fprintf(out, "layout: world %" PRId64 " = tp %" PRId64 " x cp %" PRId64 " x dp %" PRId64
                 " x pp %" PRId64 "; experts: etp %" PRId64 " x ep %" PRId64 " x edp %" PRId64
                 " x pp %" PRId64 "\n",
            s->world, s->tp, s->cp, s->dp, s->pp, s->etp, s->ep, s->edp, s->pp);
    fprintf(out, "min GPUs: pp*lcm(tp*cp, ep*etp) = %" PRId64, s->min_gpus);
    if (s->min_gpus != s->min_gpus_common)
        fprintf(out, " (the usual pp*max(tp*cp, ep*etp) = %" PRId64 " is too few: neither "
                     "size divides the other)", s->min_gpus_common);
    fprintf(out, "\n\n%6s %5s | %4s %4s %4s %4s | %4s %4s %4s\n", "rank", "node", "tp", "cp",
            "dp", "pp", "etp", "ep", "edp");
    int64_t shown = s->world < MAX_RANKS ? s->world : MAX_RANKS;
    for (int64_t r = 0; r < shown; r++) {
        rank_coords rc;
        strategy_coords(s, r, &rc);
        fprintf(out, "%6" PRId64 " %5" PRId64 " | %4" PRId64 " %4" PRId64 " %4" PRId64
                     " %4" PRId64 " | %4" PRId64 " %4" PRId64 " %4" PRId64 "\n",
                r, cluster_node_of(c, r), rc.tp, rc.cp, rc.dp, rc.pp, rc.etp, rc.ep, rc.edp);
    }
    if (s->world > shown)
        fprintf(out, "  ... %" PRId64 " more ranks omitted\n", s->world - shown);

    fprintf(out, "\n%-6s %6s %7s %6s  %-16s %s\n", "group", "size", "stride", "nodes", "tier",
            "slowest group (the lowest of its placement)");
    for (int k = 0; k < GROUP_COUNT; k++) {
        const group_span *g = &s->groups[k];
        char tier[32];
        if (g->size <= 1)
            snprintf(tier, sizeof tier, "-");
        else if (g->in_nvlink_domain)
            snprintf(tier, sizeof tier, "%s", scaleup_kind_name(c->scaleup.kind));
        else if (g->sus > 1)
            snprintf(tier, sizeof tier, "%s+spine", fabric_kind_name(c->scaleout.kind));
        else
            snprintf(tier, sizeof tier, "%s", fabric_kind_name(c->scaleout.kind));
        fprintf(out, "%-6s %6" PRId64 " %7" PRId64 " %6" PRId64 "  %-16s [", group_label[k],
                g->size, g->stride, g->nodes, tier);
        int64_t n = g->size < MAX_MEMBERS ? g->size : MAX_MEMBERS;
        for (int64_t m = 0; m < n; m++)
            fprintf(out, "%s%" PRId64, m ? ", " : "", g->base + m * g->stride);
        if (g->size > n)
            fprintf(out, ", ... %" PRId64 " more", g->size - n);
        fprintf(out, "]\n");
    }

    print_placements(s, out);

    char warn[2048];
    if (strategy_layout_warnings(s, warn, sizeof warn) > 0)
        fprintf(out, "\n%s", warn);
}
