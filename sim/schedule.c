/* schedule: Megatron Core's pipeline orders (contract in schedule.h;
 * reference/megatron-formulas.md §3.2-3.3).
 *
 * All three of Megatron's functions share one skeleton, written here once
 * over "virtual microbatches" k = 0 .. M*v-1 (for v == 1 virtual id k is
 * microbatch k on chunk 0):
 *     warmup    forward of k for k < w
 *     steady    for k < M*v - w: forward of k + w, then backward of k
 *     cooldown  backward of the rest
 * with w from sched_warmup.  p == 1 (forward_backward_no_pipelining) is the
 * case w == 0: F0 B0 F1 B1 ...  The forward of virtual id k runs the
 * (microbatch, chunk) of get_schedule_table; its backward runs the same
 * microbatch on chunk v-1-chunk, as get_model_chunk_id(k, forward=False)
 * does.
 */
#include "schedule.h"

#include <assert.h>

static const sched_kind_desc kinds[SCHED_KINDS] = {
    [SCHED_F] = {"F", "send_fwd", +1, -1, false},
    [SCHED_B] = {"B", "send_bwd", -1, SCHED_F, false},
    [SCHED_W] = {"W", NULL, 0, SCHED_B, true},
};

const sched_kind_desc *sched_kind_of(sched_kind k)
{
    assert(k >= 0 && k < SCHED_KINDS);
    return &kinds[k];
}

bool sched_plan_has(const sched_plan *pl, sched_kind k)
{
    return !sched_kind_of(k)->split_only || pl->split;
}

int sched_plan_kinds(const sched_plan *pl)
{
    int n = 0;
    for (int k = 0; k < SCHED_KINDS; k++)
        n += sched_plan_has(pl, (sched_kind)k);
    return n;
}

sched_kind sched_plan_free_kind(const sched_plan *pl)
{
    return pl->split ? SCHED_W : SCHED_B;
}

sched_kind sched_plan_grad_kind(const sched_plan *pl)
{
    return pl->split ? SCHED_W : SCHED_B;
}

int64_t sched_vstage(const sched_plan *pl, int64_t rank, int64_t chunk)
{
    assert(rank >= 0 && rank < pl->p && chunk >= 0 && chunk < pl->v);
    if (pl->place == SCHED_PLACE_V)
        return chunk == 0 ? rank : 2 * pl->p - 1 - rank;
    return chunk * pl->p + rank;
}

void sched_locate(const sched_plan *pl, int64_t vstage, int64_t *rank, int64_t *chunk)
{
    assert(vstage >= 0 && vstage < pl->p * pl->v);
    if (pl->place == SCHED_PLACE_V) {
        *chunk = vstage < pl->p ? 0 : 1;
        *rank = vstage < pl->p ? vstage : 2 * pl->p - 1 - vstage;
        return;
    }
    *chunk = vstage / pl->p;
    *rank = vstage % pl->p;
}

sched_item sched_one(sched_kind kind, int32_t microbatch, int32_t chunk)
{
    return (sched_item){.pass = {{(uint8_t)kind, microbatch, chunk}}, .n_passes = 1};
}

sched_item sched_pair(sched_pass a, sched_pass b)
{
    return (sched_item){.pass = {a, b}, .n_passes = 2};
}

int64_t sched_len(int64_t M, int64_t v)
{
    const sched_plan megatron = {.p = 1, .v = v, .M = M, .N = 1, .place = SCHED_PLACE_LOOP, .split = false};
    return sched_plan_kinds(&megatron) * M * v;
}

int64_t sched_warmup(int64_t p, int64_t v, int64_t M, int64_t N, int64_t rank)
{
    int64_t total = M * v, w;
    if (p <= 1)
        return 0;   /* no pipelining: the F0 B0 F1 B1 order has no warmup */
    if (v <= 1)
        w = p - rank - 1;
    else
        w = (p - rank - 1) * 2 + (v - 1) * N;
    return w < total ? w : total;
}

void sched_virtual(int64_t v, int64_t M, int64_t N, int64_t k,
                   int32_t *microbatch, int32_t *chunk)
{
    assert(v >= 1 && M >= 1 && k >= 0 && k < M * v);
    if (v == 1) {
        *microbatch = (int32_t)k;
        *chunk = 0;
        return;
    }
    assert(N >= 1);
    /* get_schedule_table: groups of N microbatches; every group but the
     * last is N wide and is run chunk by chunk; the last group holds the
     * remaining M - (G-1)*N microbatches. */
    int64_t groups = (M + N - 1) / N;
    int64_t full = (groups - 1) * N * v;   /* virtual ids in the full groups */
    if (k < full) {
        int64_t g = k / (N * v), off = k % (N * v);
        *chunk = (int32_t)(off / N);
        *microbatch = (int32_t)(g * N + off % N);
    } else {
        int64_t width = M - (groups - 1) * N, off = k - full;
        *chunk = (int32_t)(off / width);
        *microbatch = (int32_t)((groups - 1) * N + off % width);
    }
}

int sched_build(int64_t p, int64_t v, int64_t M, int64_t N, int64_t rank,
                sched_item *out, sim_err *err)
{
    if (p < 1)
        return sim_err_set(err, SIM_EINVAL, "pipeline-parallel size must be >= 1, got %lld",
                           (long long)p);
    if (v < 1)
        return sim_err_set(err, SIM_EINVAL,
                           "virtual pipeline size (model chunks per rank) must be >= 1, got %lld",
                           (long long)v);
    if (M < 1)
        return sim_err_set(err, SIM_EINVAL, "number of microbatches must be >= 1, got %lld",
                           (long long)M);
    if (rank < 0 || rank >= p)
        return sim_err_set(err, SIM_EINVAL, "pipeline rank %lld is outside [0, %lld)",
                           (long long)rank, (long long)p);
    if (M > INT32_MAX || v > INT32_MAX || M * v > INT32_MAX)
        return sim_err_set(err, SIM_EINVAL, "schedule too long: %lld microbatches x %lld chunks",
                           (long long)M, (long long)v);
    if (v > 1) {
        if (p == 1)
            return sim_err_set(err, SIM_EINVAL,
                               "pipeline-model-parallel size should be greater than 1 with "
                               "interleaved schedule (virtual pipeline size %lld)",
                               (long long)v);
        if (N < p || N > M)
            return sim_err_set(err, SIM_EINVAL,
                               "The number of contiguous micro-batches in a virtual pipeline "
                               "stage should range in [PP=%lld , M=%lld], got %lld",
                               (long long)p, (long long)M, (long long)N);
        int64_t rem = M % N;
        if (rem > 0 && rem < p)
            return sim_err_set(err, SIM_EINVAL,
                               "The remainder of M (%lld) divided by N (%lld) should be 0, or "
                               "larger than or equal to the pipeline-parallel size (%lld)",
                               (long long)M, (long long)N, (long long)p);
    }

    int64_t total = M * v, w = sched_warmup(p, v, M, N, rank), n = 0;
    int32_t mb, ch;
    for (int64_t k = 0; k < w; k++) {
        sched_virtual(v, M, N, k, &mb, &ch);
        out[n++] = sched_one(SCHED_F, mb, ch);
    }
    for (int64_t k = 0; k < total - w; k++) {
        sched_virtual(v, M, N, k + w, &mb, &ch);
        out[n++] = sched_one(SCHED_F, mb, ch);
        sched_virtual(v, M, N, k, &mb, &ch);
        out[n++] = sched_one(SCHED_B, mb, (int32_t)(v - 1 - ch));
    }
    for (int64_t k = total - w; k < total; k++) {
        sched_virtual(v, M, N, k, &mb, &ch);
        out[n++] = sched_one(SCHED_B, mb, (int32_t)(v - 1 - ch));
    }
    assert(n == sched_len(M, v));
    return SIM_OK;
}
