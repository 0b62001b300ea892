/* workload: the op templates of one step (contract in workload.h).
 *
 * A pass is built as an op list (wl_opbuf) by small emitters, one per
 * piece of Megatron's layer: column/row-parallel linears with their TP
 * collectives, attention (fused, unfused, the CP ring beside its steps),
 * MLP and MoE (router, permutes, EP all-to-all, grouped GEMMs), embedding
 * and output layer.  Each emitter costs its kernels with compute and its
 * collectives with net and appends them; an op names its dependencies by
 * absolute index when pushed and is stored with the distance back, so a
 * template can be copied and instantiated anywhere.  The emitters and
 * their primitives live in wl_*.c (shared through wl_build.h); this file
 * puts layers, chunks and stages together.
 *
 * Layers of one type (dense/MoE x full/sliding-window attention) have the
 * same ops: each is built once into a layer cache, fused there, and
 * appended per layer; chunks that hold the same run of layer types and no
 * embedding, output or bucketing share a twin's ops.  Fusing merges an
 * op into the one before it where nothing else can tell (same stream,
 * single dependency, nothing waits on the first), keeping the ops that
 * release a DP bucket or wait for a parameter all-gather as ends.
 *
 * DP buckets follow Megatron's DDP: gradients fill buckets in backward
 * order (ddp.bucket_size, else max(40M, 1M x DP) parameters, only on the
 * first chunk of the first stage when overlapped); each records the
 * backward op after which it is final and the forward op where its
 * parameters are first used.
 *
 * Failures are sticky in the op buffer (oom, first op of an out-of-range
 * duration); a chunk is checked once when built: every computed duration
 * (op, whole pass, bucket, p2p, optimizer, embedding all-reduce) must lie
 * in [0, LIMIT_DURATION_S], else SIM_EINVAL names it.
 */
#include "workload.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "memory.h"
#include "net.h"
#include "wl_build.h"
#include "wl_fsdp.h"

/* ---- one chunk ------------------------------------------------------- */

/* Every layer of a type (mixer attention / Mamba / none, MLP dense / MoE
 * / none, full or sliding-window attention) has the same ops: they are
 * built once per workload and copied. */
enum { LAYER_KINDS = 18 };
typedef struct layer_cache {
    wl_opbuf pass[LAYER_KINDS][SCHED_KINDS]; /* [layer_kind][F, B, and W of a split backward] */
    bool built[LAYER_KINDS][SCHED_KINDS];
} layer_cache;

/* mlp + 3 window + 6 mixer (model_mlp_kind, model_mixer_kind). */
static int kind_of(int mixer, int mlp, bool window)
{
    return mlp + 3 * (window ? 1 : 0) + 6 * mixer;
}

static int layer_kind(const ctx *x, int64_t layer)
{
    if (x->ideal && !x->m->hybrid)
        layer = 0; /* identical work everywhere: the first layer's type */
    const model_layer *l = &x->m->layers[layer];
    int mlp = l->mlp == MODEL_MLP_NONE ? MODEL_MLP_NONE : model_layer_is_moe(x->m, layer) ? MODEL_MLP_MOE : MODEL_MLP_DENSE;
    return kind_of(l->mixer, mlp, model_layer_is_window(x->m, layer));
}

/* A hybrid MTP layer (config has checked that an E layer has experts;
 * MTP attention is full attention [assumed]). */
static int mtp_layer_kind(const ctx *x, int32_t i)
{
    const model_layer *l = &x->m->mtp_layers[i];
    return kind_of(l->mixer, l->mlp, false);
}

static const wl_opbuf *cached_layer(const ctx *x0, int kind, sched_kind which);

/* Room for `more` ops beyond the buffer's, doubling as wl_push does
 * (sticky failure: false and oom set). */
static bool reserve(wl_opbuf *dst, int64_t more)
{
    if (dst->oom)
        return false;
    if (more > INT32_MAX - dst->n) {
        dst->oom = 1;
        return false;
    }
    if (dst->n + more <= dst->cap)
        return true;
    int64_t cap = dst->cap ? dst->cap : 64;
    while (cap < (int64_t)dst->n + more)
        cap *= 2;
    if (cap > INT32_MAX)
        cap = INT32_MAX;
    wl_op *ops = realloc(dst->ops, (size_t)cap * sizeof *ops);
    if (!ops) {
        dst->oom = 1;
        return false;
    }
    dst->ops = ops;
    dst->cap = (int32_t)cap;
    return true;
}

/* Room for a chunk's layers in one growth rather than one per doubling
 * (a hint: the first layer's size for all of them). */
static void reserve_layers(const ctx *x, wl_opbuf *dst, int64_t first, int64_t count, sched_kind which)
{
    if (count > 0)
        reserve(dst, count * (int64_t)cached_layer(x, layer_kind(x, first), which)->n + 64);
}

/* Appends a cached op list in one copy; its first GPU op follows the op
 * before it (host ops ahead of it issue it and wait for nothing). */
static void append(wl_opbuf *dst, const wl_opbuf *src)
{
    if (src->oom) {
        dst->oom = 1;
        return;
    }
    if (src->too_long_name)
        too_long(dst, src->too_long_name, src->too_long_s);
    if (src->n > 0) {
        if (!reserve(dst, src->n))
            return;
        const int32_t before = dst->n - 1;
        wl_op *at = dst->ops + dst->n;
        memcpy(at, src->ops, (size_t)src->n * sizeof *at);
        for (int32_t i = 0; i < src->n; i++)
            if (at[i].stream != STREAM_HOST) {
                at[i].dep_back[0] = before >= 0 ? dst->n + i - before : 0;
                break;
            }
        dst->n += src->n;
    }
    dst->flops += src->flops;
}

static void layer_fwd(const ctx *x, wl_opbuf *b, int mixer, int mlp)
{
    if (mixer == MODEL_MIXER_ATTENTION)
        attention_fwd(x, b);
    else if (mixer == MODEL_MIXER_MAMBA)
        mamba_fwd(x, b);
    if (mlp != MODEL_MLP_NONE)
        mlp_fwd(x, b, mlp == MODEL_MLP_MOE);
}

static void layer_bwd(const ctx *x, wl_opbuf *b, int mixer, int mlp)
{
    const parallel_spec *p = &x->s->par;
    bool full = p->recompute_granularity == RECOMPUTE_FULL;
    unsigned mods = p->recompute_granularity == RECOMPUTE_SELECTIVE ? p->recompute_modules : 0u;
    bool moe = mlp == MODEL_MLP_MOE;
    if (full)
        layer_fwd(x, b, mixer, mlp); /* rebuild the layer's activations first */
    if (mlp != MODEL_MLP_NONE)
        mlp_bwd(x, b, moe, (mods & RECOMPUTE_MOD_MLP) && !moe);
    if (mixer == MODEL_MIXER_ATTENTION)
        attention_bwd(x, b, (mods & RECOMPUTE_MOD_CORE_ATTN) != 0);
    else if (mixer == MODEL_MIXER_MAMBA)
        mamba_bwd(x, b);
}

/* wl_fuse_chains on scratch of b->n + 1 entries each: refs[] counts
 * (saturating) the ops that wait on each op (a chain link needs exactly
 * one), idx[] maps each op to its fused op. */
static void fuse_chains_in(wl_opbuf *b, int32_t *map, const int32_t *pins, int32_t n_pins, uint8_t *refs,
                           int32_t *idx)
{
    int32_t n = b->n;
    memset(refs, 0, (size_t)n + 1);
    for (int32_t i = 0; i < n; i++)
        for (int j = 0; j < 2; j++)
            if (b->ops[i].dep_back[j] && refs[i - b->ops[i].dep_back[j]] < 255)
                refs[i - b->ops[i].dep_back[j]]++;
    for (int32_t k = 0; k < n_pins; k++)
        if (pins[k] >= 0 && pins[k] < n)
            refs[pins[k]] = 255; /* something else waits on its end */
    int32_t out = 0;
    for (int32_t i = 0; i < n; i++) {
        wl_op op = b->ops[i];
        bool chain = i > 0 && op.dep_back[0] == 1 && op.dep_back[1] == 0 && b->ops[i - 1].stream == op.stream &&
                     b->ops[i - 1].node == op.node && /* overlapped templates interleave nodes */
                     refs[i - 1] == 1 && idx[i - 1] == out - 1 &&
                     op.duration_ps <= UINT64_MAX / 2 - b->ops[out - 1].duration_ps; /* no wrap */
        if (chain) {
            b->ops[out - 1].duration_ps += op.duration_ps;
            b->ops[out - 1].launches = op.launches > UINT32_MAX - b->ops[out - 1].launches
                                           ? UINT32_MAX
                                           : b->ops[out - 1].launches + op.launches;
            idx[i] = out - 1;
            continue;
        }
        for (int j = 0; j < 2; j++)
            if (op.dep_back[j])
                op.dep_back[j] = out - idx[i - op.dep_back[j]];
        b->ops[out] = op;
        idx[i] = out++;
    }
    b->n = out;
    if (map)
        memcpy(map, idx, (size_t)n * sizeof *idx);
}

/* Contract in workload.h. */
int wl_fuse_chains(wl_opbuf *b, int32_t *map, const int32_t *pins, int32_t n_pins)
{
    uint8_t *refs = malloc((size_t)b->n + 1);
    int32_t *idx = malloc(((size_t)b->n + 1) * sizeof *idx);
    if (refs && idx)
        fuse_chains_in(b, map, pins, n_pins, refs, idx);
    free(refs);
    free(idx);
    return refs && idx ? SIM_OK : SIM_ENOMEM;
}

static void split_backward(wl_opbuf *b, wl_opbuf *w);

/* A layer's pass of kind `which` (F, B, W), built once per layer type.  A
 * split backward is split here, before the layer's chains are fused (the
 * names of the weight-gradient GEMMs are gone after). */
static const wl_opbuf *cached_layer(const ctx *x0, int kind, sched_kind which)
{
    layer_cache *lc = x0->cache;
    const bool split = sched_name_splits(x0->s->par.pipeline_schedule);
    const int bwd = which != SCHED_F;
    wl_opbuf *p = &lc->pass[kind][bwd ? SCHED_B : SCHED_F], *w = &lc->pass[kind][SCHED_W];
    if (!lc->built[kind][which]) {
        int mlp = kind % 3, mixer = kind / 6;
        ctx y = *x0;
        if ((kind / 3) % 2) {
            /* A sliding window: each query sees about W keys, not s/2. */
            y.attn_fwd_flops *= model_attention_context(x0->m, true) / model_attention_context(x0->m, false);
            y.attn_keys = (double)x0->m->window_size;
            y.attn.window = y.attn_keys < y.attn.seq ? y.attn_keys : 0.0; /* no wider than the sequence */
        }
        if (bwd)
            layer_bwd(&y, p, mixer, mlp);
        else
            layer_fwd(&y, p, mixer, mlp);
        host_issue(x0, p);
        if (x0->nodes)
            wl_tag_layer(p, 0, bwd, x0->delay_wgrad);
        if (bwd && split)
            split_backward(p, w);
        /* Fused once here; the layer's last op stays last, so bucket
         * boundaries (at layer ends) are kept. */
        if (!x0->in->sim.keep_ops && !p->oom && wl_fuse_chains(p, NULL, NULL, 0) != SIM_OK)
            p->oom = 1;
        if (bwd && split && !x0->in->sim.keep_ops && !w->oom && wl_fuse_chains(w, NULL, NULL, 0) != SIM_OK)
            w->oom = 1;
        lc->built[kind][bwd ? SCHED_B : SCHED_F] = true;
        lc->built[kind][SCHED_W] = bwd && split;
    }
    return &lc->pass[kind][which];
}

/* Megatron's DDP bucket size in parameters: ddp.bucket_size, else
 * max(40M, 1M x data-parallel size); one bucket per chunk where Megatron
 * disables bucketing (pipeline ranks > 0, chunks after the first) or when
 * gradient reduction is not overlapped; one under Megatron-FSDP's ZeRO-2/3,
 * which reduce the units' gradients in the passes and leave the bucket the
 * rest. */
static double bucket_params(const ctx *x, int64_t stage, int64_t chunk)
{
    const strategy_t *s = x->s;
    if (!x->in->ddp.overlap_grad_reduce || stage > 0 || chunk > 0 || s->zero >= DP_SHARD_OPTIM_GRADS)
        return INFINITY;
    if (x->in->ddp.bucket_size > 0)
        return (double)x->in->ddp.bucket_size;
    double dp = (double)(s->dp * s->cp);
    return fmax(40e6, 1e6 * dp);
}

int wl_duration_err(sim_err *err, double seconds, const char *what)
{
    return sim_err_set(err, SIM_EINVAL,
                       "%s would take %.3g s, outside [0, %.3g s]: the inputs are beyond what parsim can simulate "
                       "(simulated time is 64-bit picoseconds)",
                       what, seconds, LIMIT_DURATION_S);
}

/* A finished pass template: out of memory, an op outside the duration
 * range, or ops that add up past it (the pass alone could then overflow
 * simulated time). */
static int pass_check(const wl_opbuf *p, const char *kind, int64_t stage, int64_t chunk, sim_err *err)
{
    char what[160];
    if (p->oom)
        return SIM_ENOMEM;
    if (p->too_long_name) {
        snprintf(what, sizeof what, "kernel or transfer '%s' of the %s pass of stage %lld chunk %lld",
                 p->too_long_name, kind, (long long)stage, (long long)chunk);
        return wl_duration_err(err, p->too_long_s, what);
    }
    /* The exact sum in picoseconds first: at most half the limit, the sum
     * in seconds (rounded op by op) fits too; only above it is that sum
     * taken, as the message names it. */
    sim_time_ps ps = 0;
    bool wrapped = false;
    for (int32_t i = 0; i < p->n && !wrapped; i++)
        wrapped = __builtin_add_overflow(ps, p->ops[i].duration_ps, &ps);
    if (!wrapped && time_as_s(ps) <= 0.5 * LIMIT_DURATION_S)
        return SIM_OK;
    double total = 0;
    for (int32_t i = 0; i < p->n; i++)
        total += time_as_s(p->ops[i].duration_ps);
    if (!time_s_fits(total)) {
        snprintf(what, sizeof what, "the %s pass of stage %lld chunk %lld (its kernels and transfers together)",
                 kind, (long long)stage, (long long)chunk);
        return wl_duration_err(err, total, what);
    }
    return SIM_OK;
}

/* The DP times of a chunk's buckets.  Their size comes from
 * ddp.bucket_size (or Megatron's default), their speed from the DP group's
 * fabric: the message names both. */
static int buckets_check(const wl_bucket *bk, int32_t n, int64_t stage, int64_t chunk, sim_err *err)
{
    for (int32_t k = 0; k < n; k++) {
        bool reduce_ok = time_s_fits(bk[k].reduce_s);
        if (reduce_ok && time_s_fits(bk[k].gather_s))
            continue;
        char what[256];
        snprintf(what, sizeof what,
                 "the DP %s of bucket %d of stage %lld chunk %lld (sized by ddp.bucket_size, over the DP group's "
                 "cluster.nvlink / cluster.scaleout bandwidths)",
                 !reduce_ok ? "gradient reduction" : "parameter all-gather", (int)k, (long long)stage,
                 (long long)chunk);
        return wl_duration_err(err, !reduce_ok ? bk[k].reduce_s : bk[k].gather_s, what);
    }
    return SIM_OK;
}

/* Is this backward op a weight-gradient GEMM (the W of a split backward)? */
bool wl_is_wgrad(const wl_op *op)
{
    static const char suffix[] = "_wgrad";
    size_t n = strlen(op->name), k = sizeof suffix - 1;
    return op->stream == STREAM_COMPUTE && n >= k && strcmp(op->name + n - k, suffix) == 0;
}

/* Splits a backward op list for the schedules that run B and W apart
 * (zero bubble): B keeps every op, the weight-gradient GEMMs as
 * zero-length ops in their places, so that every dependency and each
 * stream's order stay as they are (the collective that ran beside a wgrad
 * GEMM now runs beside nothing); W gets those GEMMs one after another on
 * the compute stream, in backward order.  The host's issue of the W GEMMs
 * stays with B's host ops. */
static void split_backward(wl_opbuf *b, wl_opbuf *w)
{
    if (b->oom) {
        w->oom = 1;
        return;
    }
    for (int32_t i = 0; i < b->n && !w->oom; i++) {
        if (!wl_is_wgrad(&b->ops[i]))
            continue;
        wl_op op = b->ops[i];
        int32_t at = then(w, op.name, STREAM_COMPUTE, 0.0);
        if (w->oom)
            return;
        op.dep_back[0] = at > 0 ? 1 : 0;
        op.dep_back[1] = 0;
        w->ops[at] = op;
        b->ops[i].duration_ps = 0;
    }
}

/* The W pass's op that a bucket's gradients are final after: its last so
 * far (a zero-length one when no weight gradient came before, so that W
 * has an op to end the microbatch's activations and release the bucket). */
static int32_t w_ready_op(wl_opbuf *w)
{
    if (w->n == 0)
        then(w, "no_wgrad", STREAM_COMPUTE, 0.0);
    return w->n - 1;
}

/* Fuses the chunk's passes, keeping the ops the buckets point at (in the
 * backward, or in W when w is not NULL) as ends of ops (and moving the
 * bucket indices to the fused ops). */
static int fuse_chunk(wl_opbuf *f, wl_opbuf *b, wl_opbuf *w, wl_bucket *buckets, int32_t n_buckets)
{
    int32_t n_map = f->n > b->n ? f->n : b->n;
    if (w && w->n > n_map)
        n_map = w->n;
    /* One allocation for the three fusions: map, the fusion's idx and
     * refs (n_map + 1 each), pins. */
    const size_t m = (size_t)n_map + 1;
    int32_t *map = malloc(2 * m * sizeof *map + ((size_t)n_buckets + 1) * sizeof *map + m);
    if (!map)
        return SIM_ENOMEM;
    int32_t *idx = map + m, *pins = idx + m;
    uint8_t *refs = (uint8_t *)(pins + n_buckets + 1);
    for (int32_t k = 0; k < n_buckets; k++)
        pins[k] = buckets[k].fwd_op - 1;
    fuse_chains_in(f, map, pins, n_buckets, refs, idx);
    for (int32_t k = 0; k < n_buckets; k++)
        buckets[k].fwd_op = map[buckets[k].fwd_op];
    if (w)
        fuse_chains_in(b, NULL, NULL, 0, refs, idx);
    for (int32_t k = 0; k < n_buckets; k++)
        pins[k] = buckets[k].ready_op;
    fuse_chains_in(w ? w : b, map, pins, n_buckets, refs, idx);
    for (int32_t k = 0; k < n_buckets; k++)
        buckets[k].ready_op = map[buckets[k].ready_op];
    free(map);
    return SIM_OK;
}

/* Ops outside the layers (embedding, output layer and loss), issued by
 * the host as one module. */
static void issue_into(const ctx *x, wl_opbuf *dst, wl_opbuf *wdst, void (*build)(const ctx *, wl_opbuf *))
{
    wl_opbuf t = {0}, tw = {0};
    build(x, &t);
    host_issue(x, &t);
    if (wdst) {
        split_backward(&t, &tw);
        append(wdst, &tw);
    }
    append(dst, &t);
    free(t.ops);
    free(tw.ops);
}

/* The embedding, an FSDP unit where it is one. */
static void issue_unit(const ctx *x, wl_opbuf *dst, wl_opbuf *wdst, wl_fsdp *fs,
                       void (*build)(const ctx *, wl_opbuf *))
{
    if (fs->emb)
        wl_fsdp_unit_begin(dst, fs);
    issue_into(x, dst, wdst, build);
    if (fs->emb)
        wl_fsdp_unit_end(dst, wdst, fs);
}

static int build_chunk(const ctx *x, int64_t stage, int64_t chunk, wl_chunk *out, sim_err *err)
{
    const strategy_t *s = x->s;
    wl_opbuf f = {0}, b = {0}, w = {0};
    const bool split = sched_name_splits(s->par.pipeline_schedule);
    int64_t first, count;
    strategy_chunk_layers(s, stage, chunk, &first, &count);
    bool first_virtual = strategy_vstage(s, stage, chunk) == 0;
    bool last_virtual = strategy_vstage(s, stage, chunk) == s->pp * s->v - 1;
    /* The ideal pipeline runs identical work everywhere: layers only, all
     * of the first layer's type. */
    bool ideal = x->ideal;
    /* Buckets fill in backward order; at most one per layer.
     * layer_start[i]: forward op where layer first + i begins. */
    wl_bucket *buckets = calloc((size_t)count + 1, sizeof *buckets);
    int32_t *layer_start = malloc(((size_t)count + 1) * sizeof *layer_start);
    wl_fsdp fs;
    int rc = wl_fsdp_init(x, stage, chunk, &fs);
    if (rc == SIM_OK && !(buckets && layer_start))
        rc = SIM_ENOMEM;
    if (rc != SIM_OK)
        goto done;
    int32_t n_buckets = 0;
    double limit = bucket_params(x, stage, chunk);
    double chunk_dense, chunk_expert, acc_dense = 0, acc_expert = 0, seen_dense = 0, seen_expert = 0;
    memory_chunk_trained_params(x->in, s, stage, chunk, &chunk_dense, &chunk_expert);

    /* Per-pass host work (the schedule's step, data, loss), when set. */
    if (x->c->compute.pass_overhead_s > 0 && !ideal) {
        then(&f, "host", STREAM_COMPUTE, x->c->compute.pass_overhead_s);
        then(&b, "host", STREAM_COMPUTE, x->c->compute.pass_overhead_s);
    }
    wl_offload off;
    wl_offload_init(&off, first);
    wl_fsdp_pass_begin(x, &f, &fs, false);
    if (first_virtual && !ideal)
        issue_unit(x, &f, NULL, &fs, embedding_fwd);
    reserve_layers(x, &f, first, count, SCHED_F);
    for (int64_t l = first; l < first + count; l++) {
        wl_fsdp_unit_begin(&f, &fs);
        layer_start[l - first] = f.n;
        append(&f, cached_layer(x, layer_kind(x, l), SCHED_F));
        wl_mark_layer(&f, layer_start[l - first], (l - first) % 2 == 1);
        wl_offload_fwd_end(x, &f, &off, l);
        wl_fsdp_unit_end(&f, NULL, &fs);
        /* A layer waits for its parameters at its first kernel, not at
         * the host ops that issue it. */
        while (!f.oom && layer_start[l - first] < f.n - 1 && f.ops[layer_start[l - first]].stream == STREAM_HOST)
            layer_start[l - first]++;
    }
    wl_offload_fwd_end(x, &f, &off, -1);
    if (last_virtual && !ideal)
        issue_into(x, &f, NULL, output_fwd);
    /* A hybrid model's MTP depths follow on the last stage, each with its
     * own logits and loss. */
    int64_t mtp = last_virtual && !ideal && x->m->hybrid ? x->m->mtp_num_layers : 0;
    for (int64_t d = 0; d < mtp; d++) {
        issue_into(x, &f, NULL, mtp_enter_fwd);
        for (int32_t i = 0; i < x->m->mtp_layers_per_depth; i++)
            append(&f, cached_layer(x, mtp_layer_kind(x, i), SCHED_F));
        issue_into(x, &f, NULL, output_fwd);
    }

    for (int64_t d = 0; d < mtp; d++) {
        issue_into(x, &b, split ? &w : NULL, output_bwd);
        for (int32_t i = x->m->mtp_layers_per_depth - 1; i >= 0; i--) {
            append(&b, cached_layer(x, mtp_layer_kind(x, i), SCHED_B));
            if (split)
                append(&w, cached_layer(x, mtp_layer_kind(x, i), SCHED_W));
        }
        issue_into(x, &b, split ? &w : NULL, mtp_enter_bwd);
    }
    if (last_virtual && !ideal)
        issue_into(x, &b, split ? &w : NULL, output_bwd);
    wl_fsdp_pass_begin(x, &b, &fs, true);
    reserve_layers(x, &b, first, count, SCHED_B);
    if (split)
        reserve_layers(x, &w, first, count, SCHED_W);
    for (int64_t l = first + count - 1; l >= first; l--) {
        wl_offload_bwd_begin(x, &b, &off, l);
        wl_fsdp_unit_begin(&b, &fs);
        int32_t at = b.n;
        append(&b, cached_layer(x, layer_kind(x, l), SCHED_B));
        wl_mark_layer(&b, at, (first + count - 1 - l) % 2 == 1);
        if (split)
            append(&w, cached_layer(x, layer_kind(x, l), SCHED_W));
        wl_fsdp_unit_end(&b, split ? &w : NULL, &fs);
        double d, e;
        memory_layer_trained_params(x->in, s, l, &d, &e);
        acc_dense += d;
        acc_expert += e;
        if (acc_dense + acc_expert >= limit && l > first) {
            buckets[n_buckets].ready_op = split ? w_ready_op(&w) : b.n - 1;
            buckets[n_buckets].fwd_op = layer_start[l - first];
            wl_bucket_cost(x, acc_dense, acc_expert, NULL, &buckets[n_buckets++]);
            seen_dense += acc_dense;
            seen_expert += acc_expert;
            acc_dense = acc_expert = 0;
        }
    }
    if (first_virtual && !ideal)
        issue_unit(x, &b, split ? &w : NULL, &fs, embedding_bwd);
    wl_fsdp_pass_end(split ? &w : &b, &fs);
    /* The last bucket takes the rest: its layers, embeddings, norms. */
    buckets[n_buckets].ready_op = split ? w_ready_op(&w) : b.n - 1;
    buckets[n_buckets].fwd_op = 0;
    while (!f.oom && buckets[n_buckets].fwd_op < f.n - 1 && f.ops[buckets[n_buckets].fwd_op].stream == STREAM_HOST)
        buckets[n_buckets].fwd_op++; /* the first kernel, not the host ops issuing it */
    wl_bucket_cost(x, chunk_dense - seen_dense, chunk_expert - seen_expert, s->zero >= DP_SHARD_OPTIM_GRADS ? &fs.units : NULL,
                   &buckets[n_buckets++]);

    if ((rc = pass_check(&f, "forward", stage, chunk, err)) != SIM_OK ||
        (rc = pass_check(&b, "backward", stage, chunk, err)) != SIM_OK ||
        (split && (rc = pass_check(&w, "weight-gradient", stage, chunk, err)) != SIM_OK) ||
        (rc = buckets_check(buckets, n_buckets, stage, chunk, err)) != SIM_OK)
        goto done;
    if (!x->in->sim.keep_ops && (rc = fuse_chunk(&f, &b, split ? &w : NULL, buckets, n_buckets)) != SIM_OK)
        goto done;
    double act = memory_chunk_activation_bytes(x->in, s, ideal ? 0 : stage, ideal ? 0 : chunk);
    double transient = ideal ? 0.0 : memory_chunk_backward_transient_bytes(x->in, s, stage, chunk);
    if (!(act >= 0 && act <= LIMIT_ACT_BYTES && transient >= 0 && transient <= LIMIT_ACT_BYTES)) {
        rc = sim_err_set(err, SIM_EINVAL,
                         "the activations of one microbatch on stage %lld chunk %lld (%.3g bytes, %.3g more in "
                         "the backward) are beyond what parsim counts (%.3g bytes)",
                         (long long)stage, (long long)chunk, act, transient, LIMIT_ACT_BYTES);
        goto done;
    }
    out->fwd = (wl_pass){f.ops, f.n, f.flops};
    out->bwd = (wl_pass){b.ops, b.n, b.flops};
    out->wgt = (wl_pass){w.ops, w.n, w.flops};
    out->buckets = buckets;
    out->n_buckets = n_buckets;
    f.ops = b.ops = w.ops = NULL;
    buckets = NULL;
    out->act_bytes = (int64_t)act;
    out->bwd_transient_bytes = (int64_t)transient;
done:
    wl_fsdp_free(&fs);
    free(layer_start);
    free(f.ops);
    free(b.ops);
    free(w.ops);
    free(buckets);
    return rc;
}

/* Chunks that hold the same run of layer types, with no embedding or
 * output layer and no bucketing, have the same ops: the twin's are shared
 * instead of rebuilt.  span[q]: the layers of chunk q = stage x v + chunk
 * and whether it is such a plain chunk (set once per workload: finding a
 * chunk's virtual stage sets up the schedule's plan). */
typedef struct chunk_span {
    int64_t first, count;
    bool plain;
} chunk_span;

static chunk_span *chunk_spans(const ctx *x)
{
    const strategy_t *s = x->s;
    int64_t n = s->pp * s->v;
    chunk_span *span = malloc((size_t)n * sizeof *span);
    if (!span)
        return NULL;
    sched_plan plan;
    strategy_plan(s, &plan);
    for (int64_t q = 0; q < n; q++) {
        int64_t vs = sched_vstage(&plan, q / s->v, q % s->v);
        span[q].first = s->vstage_start[vs];
        span[q].count = s->vstage_start[vs + 1] - s->vstage_start[vs];
        span[q].plain = vs != 0 && vs != n - 1 && isinf(bucket_params(x, q / s->v, q % s->v));
    }
    return span;
}

/* Returns an already built chunk (before (r, c) in build order) identical
 * to chunk (stage, chunk), or NULL. */
static const wl_chunk *twin_chunk(const ctx *x, const workload_t *w, const chunk_span *span, int64_t stage,
                                  int64_t chunk, int64_t r, int64_t c)
{
    const chunk_span *me = &span[stage * x->s->v + chunk];
    if (!me->plain || x->ideal)
        return NULL;
    for (int64_t q = 0; q < r * x->s->v + c; q++) {
        if (!span[q].plain || span[q].count != me->count)
            continue;
        bool same = true;
        for (int64_t i = 0; i < me->count && same; i++)
            same = layer_kind(x, me->first + i) == layer_kind(x, span[q].first + i);
        if (same)
            return &w->stages[q / x->s->v].chunks[q % x->s->v];
    }
    return NULL;
}

/* A twin shares its twin's ops and buckets (nothing reads a chunk's ops
 * but to copy or sweep them). */
static void share_chunk(const wl_chunk *from, wl_chunk *to)
{
    *to = *from;
    to->twin = true;
}

/* Adam on the local shard: read grad, master, m, v; write master, m, v
 * (fp32) and the bf16 weight. */
static double optimizer_s(const ctx *x, int64_t stage)
{
    if (x->ideal)
        return 0.0;
    stage_static_mem sm;
    memory_static(x->in, x->s, stage, &sm);
    return mem(x, sm.shard_params * (4.0 + 12.0 + 12.0 + 2.0));
}

/* The per-stage times beside the chunks: pipeline p2p, tied-embedding
 * all-reduce, optimizer step. */
static int stage_check(const wl_stage *st, int64_t stage, sim_err *err)
{
    const struct {
        double s;
        const char *what;
    } d[] = {
        {st->p2p_s, "the pipeline send of one microbatch's activations"},
        {st->embedding_grad_s, "the tied-embedding gradient all-reduce"},
        {st->optimizer_s, "the optimizer step"},
    };
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        if (!time_s_fits(d[i].s)) {
            char what[160];
            snprintf(what, sizeof what, "%s of stage %lld", d[i].what, (long long)stage);
            return wl_duration_err(err, d[i].s, what);
        }
    return SIM_OK;
}

static void cache_free(layer_cache *cache)
{
    for (int i = 0; i < SCHED_KINDS * LAYER_KINDS; i++)
        free(cache->pass[i / SCHED_KINDS][i % SCHED_KINDS].ops);
}

int workload_build(workload_t **out, const run_inputs *in, const strategy_t *s, sim_err *err)
{
    *out = NULL;
    layer_cache cache;
    memset(&cache, 0, sizeof cache);
    chunk_span *span = NULL;
    int rc = SIM_ENOMEM;
    workload_t *w = calloc(1, sizeof *w);
    if (!w)
        goto fail;
    w->pp = s->pp;
    w->v = s->v;
    w->stages = calloc((size_t)s->pp, sizeof *w->stages);
    if (!w->stages)
        goto fail;
    ctx x;
    ctx_init(&x, in, s);
    x.cache = &cache;
    x.nodes = s->par.overlap_moe_ep_comm;
    x.delay_wgrad = s->par.delay_wgrad_compute;
    if (!(span = chunk_spans(&x)))
        goto fail;
    /* One activation (forward) or its gradient (backward) per microbatch
     * crosses each stage boundary: (s/cp [/t with SP]) x b x h in bf16. */
    double p2p_bytes = x.T_sp * x.h * 2.0;
    double p2p_s = x.ideal ? 0.0 : net_p2p_s(x.c, s->groups[GROUP_PP].stride, p2p_bytes);

    for (int64_t r = 0; r < s->pp; r++) {
        wl_stage *st = &w->stages[r];
        st->chunks = calloc((size_t)s->v, sizeof *st->chunks);
        if (!st->chunks) {
            rc = SIM_ENOMEM;
            goto fail;
        }
        st->p2p_s = s->pp > 1 ? p2p_s : 0.0;
        for (int64_t c = 0; c < s->v; c++) {
            int64_t rr = x.ideal ? 0 : r, cc = x.ideal ? 0 : c;
            const wl_chunk *twin = twin_chunk(&x, w, span, rr, cc, r, c);
            if (twin)
                share_chunk(twin, &st->chunks[c]);
            else
                rc = build_chunk(&x, rr, cc, &st->chunks[c], err);
            if (rc != SIM_OK)
                goto fail;
        }
        st->optimizer_s = optimizer_s(&x, r);
        /* The word embedding held on the first stage and on the rank of the
         * output layer (the last virtual stage: pp - 1, or rank 0 itself
         * when the schedule folds the chunks in a V) keeps in step there:
         * a tied output layer, or a hybrid model's MTP. */
        sched_plan plan;
        int64_t out_rank, out_chunk;
        strategy_plan(s, &plan);
        sched_locate(&plan, s->pp * s->v - 1, &out_rank, &out_chunk);
        if ((in->model.share_embeddings_and_output_weights || model_mtp_embeds(&in->model)) && out_rank != 0 &&
            (r == 0 || r == out_rank) && !x.ideal && !x.frozen) {
            /* first and last stage of each pipeline: bases 0 .. world/pp - 1 */
            group_placements pair;
            int64_t per_stage = s->groups[GROUP_PP].stride;
            net_group_placements_of(x.c, 2, out_rank * per_stage, per_stage, s->world, 1, &pair);
            double params = x.h * (double)model_padded_vocab(x.m, s->tp) / x.t;
            double grad_bytes = in->ddp.grad_reduce_in_fp32 ? 4.0 : 2.0;
            st->embedding_grad_s = net_collective_worst_s(x.c, &pair, COLL_ALL_REDUCE, params * grad_bytes);
        }
        if ((rc = stage_check(st, r, err)) != SIM_OK)
            goto fail;
    }
    cache_free(&cache);
    free(span);
    *out = w;
    return SIM_OK;
fail:
    cache_free(&cache);
    free(span);
    workload_destroy(w);
    if (rc == SIM_ENOMEM)
        return sim_err_set(err, SIM_ENOMEM, "out of memory building the workload");
    return rc;
}

bool wl_pass_equal(const wl_pass *a, const wl_pass *b)
{
    if (a->n_ops != b->n_ops)
        return false;
    if (a->ops == b->ops)
        return true;
    for (int32_t i = 0; i < a->n_ops; i++) {
        const wl_op *p = &a->ops[i], *q = &b->ops[i];
        if (p->name != q->name || p->duration_ps != q->duration_ps || p->stream != q->stream || p->node != q->node ||
            p->dep_back[0] != q->dep_back[0] || p->dep_back[1] != q->dep_back[1] || p->launches != q->launches)
            return false;
    }
    return true;
}

void workload_destroy(workload_t *w)
{
    if (!w)
        return;
    if (w->stages) {
        for (int64_t r = 0; r < w->pp; r++) {
            wl_stage *st = &w->stages[r];
            if (st->chunks)
                for (int64_t c = 0; c < w->v; c++) {
                    if (st->chunks[c].twin)
                        continue;
                    free(st->chunks[c].fwd.ops);
                    free(st->chunks[c].bwd.ops);
                    free(st->chunks[c].wgt.ops);
                    free(st->chunks[c].buckets);
                }
            free(st->chunks);
        }
        free(w->stages);
    }
    free(w);
}