/* wl_cache: a kept value comes back only for a pass equal in every field
 * of every op (so two templates that differ anywhere never share figures,
 * and layouts that differ in any searched dimension build templates that
 * differ), per slot; the cache stays within its budget over any number of
 * templates, dropping the least recently used; and the address memo never
 * outlives wl_cache_forget. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "sim_run.h"
#include "strategy.h"
#include "wl_cache.h"
#include "workload.h"

/* Two arrays: distinct objects with the same text. */
static const char NAME_A[] = "qkv", NAME_B[] = "qkv";

enum { N_OPS = 12 };

/* A pass of N_OPS ops, zeroed padding as workload makes them. */
static void make_pass(wl_op *ops, wl_pass *p, uint64_t seed)
{
    memset(ops, 0, N_OPS * sizeof *ops);
    for (int i = 0; i < N_OPS; i++)
        ops[i] = (wl_op){.name = NAME_A, .duration_ps = 1000 + seed * 37 + (uint64_t)i, .stream = (uint8_t)(i % 3),
                         .node = 0, .dep_back = {i > 0 ? 1 : 0, 0}, .launches = 1};
    *p = (wl_pass){ops, N_OPS, 1e9};
}

Test(wl_cache, every_op_field_is_part_of_the_key)
{
    wl_cache *c = wl_cache_create(1 << 20);
    cr_assert_not_null(c);
    wl_op ops[N_OPS], other[N_OPS];
    wl_pass p, q;
    make_pass(ops, &p, 1);
    const uint64_t v = 0x1234567890abcdefULL;
    wl_cache_put(c, &p, WL_CACHE_STEP, &v, sizeof v);
    /* Equal ops at another address: a hit, the same bytes. */
    make_pass(other, &q, 1);
    const uint64_t *got = wl_cache_get(c, &q, WL_CACHE_STEP, sizeof v);
    cr_assert_not_null(got);
    cr_assert_eq(*got, v);
    /* The other slot has nothing yet. */
    cr_assert_null(wl_cache_get(c, &q, WL_CACHE_BOUND, sizeof v));
    /* Any one field of any one op changed (first, middle and last op;
     * the hash samples ops): a miss. */
    for (int at = 0; at < N_OPS; at += N_OPS / 2 - 1)
        for (int field = 0; field < 8; field++) {
            wl_cache_forget(c); /* the buffer is changed in place */
            make_pass(other, &q, 1);
            wl_op *op = &other[at];
            switch (field) {
            case 0: op->name = op->name == NAME_A ? NAME_B : NAME_A; break; /* same text, another string */
            case 1: op->duration_ps++; break;
            case 2: op->stream ^= 1; break;
            case 3: op->node = WL_NODE_MLP; break;
            case 4: op->dep_back[0]++; break;
            case 5: op->dep_back[1] = 1; break;
            case 6: op->launches++; break;
            case 7: q.n_ops--; break;
            }
            cr_assert_null(wl_cache_get(c, &q, WL_CACHE_STEP, sizeof v), "op %d field %d", at, field);
        }
    /* flops are not read by what is cached: not part of the key. */
    wl_cache_forget(c);
    make_pass(other, &q, 1);
    q.flops = 2e9;
    cr_assert_not_null(wl_cache_get(c, &q, WL_CACHE_STEP, sizeof v));
    /* A value of another size is not this one. */
    cr_assert_null(wl_cache_get(c, &q, WL_CACHE_STEP, sizeof v - 1));
    wl_cache_destroy(c);
}

Test(wl_cache, stays_within_its_budget)
{
    const size_t budget = 256 << 10;
    wl_cache *c = wl_cache_create(budget);
    cr_assert_not_null(c);
    wl_op ops[N_OPS];
    wl_pass p;
    wl_cache_stats st;
    const int n = 1000000; /* templates, as many as a million-configuration search meets */
    for (int k = 0; k < n; k++) {
        wl_cache_forget(c); /* one buffer, refilled */
        make_pass(ops, &p, (uint64_t)k);
        const int64_t v = k;
        wl_cache_put(c, &p, WL_CACHE_BOUND, &v, sizeof v);
        wl_cache_stats_get(c, &st);
        cr_assert_leq(st.bytes, budget, "%zu bytes after %d templates", st.bytes, k + 1);
    }
    wl_cache_stats_get(c, &st);
    cr_assert_gt(st.entries, 10);
    cr_assert_eq(st.entries + st.evictions, (uint64_t)n);
    /* The newest are kept, the oldest dropped. */
    wl_cache_forget(c);
    make_pass(ops, &p, (uint64_t)(n - 1));
    const int64_t *got = wl_cache_get(c, &p, WL_CACHE_BOUND, sizeof(int64_t));
    cr_assert_not_null(got);
    cr_assert_eq(*got, n - 1);
    wl_cache_forget(c);
    make_pass(ops, &p, 0);
    cr_assert_null(wl_cache_get(c, &p, WL_CACHE_BOUND, sizeof(int64_t)));
    /* A template larger than the whole budget is not kept. */
    wl_cache *tiny = wl_cache_create(64);
    cr_assert_not_null(tiny);
    make_pass(ops, &p, 5);
    wl_cache_put(tiny, &p, WL_CACHE_STEP, &st, sizeof st.bytes);
    wl_cache_stats_get(tiny, &st);
    cr_assert_eq(st.entries, 0);
    cr_assert_null(wl_cache_get(tiny, &p, WL_CACHE_STEP, sizeof st.bytes));
    wl_cache_destroy(tiny);
    wl_cache_destroy(c);
}

Test(wl_cache, least_recently_used_goes_first)
{
    wl_op ops[N_OPS];
    wl_pass p;
    make_pass(ops, &p, 0);
    wl_cache *probe = wl_cache_create(1 << 20);
    cr_assert_not_null(probe);
    const int64_t v = 7;
    wl_cache_put(probe, &p, WL_CACHE_STEP, &v, sizeof v);
    wl_cache_stats st;
    wl_cache_stats_get(probe, &st);
    wl_cache_destroy(probe);
    /* Room for exactly three entries. */
    wl_cache *c = wl_cache_create(3 * st.bytes);
    cr_assert_not_null(c);
    for (uint64_t k = 0; k < 3; k++) {
        make_pass(ops, &p, k);
        wl_cache_put(c, &p, WL_CACHE_STEP, &v, sizeof v);
        wl_cache_forget(c);
    }
    make_pass(ops, &p, 0); /* used again: 1 is now the oldest */
    cr_assert_not_null(wl_cache_get(c, &p, WL_CACHE_STEP, sizeof v));
    wl_cache_forget(c);
    make_pass(ops, &p, 3);
    wl_cache_put(c, &p, WL_CACHE_STEP, &v, sizeof v);
    wl_cache_forget(c);
    const bool kept[4] = {true, false, true, true};
    for (uint64_t k = 0; k < 4; k++) {
        make_pass(ops, &p, k);
        cr_assert_eq(wl_cache_get(c, &p, WL_CACHE_STEP, sizeof v) != NULL, kept[k], "template %d", (int)k);
        wl_cache_forget(c);
    }
    wl_cache_destroy(c);
}

/* The memo finds a live pass by its address; once forgotten, an address
 * reused for other ops is judged by its ops. */
Test(wl_cache, forget_drops_addresses)
{
    wl_cache *c = wl_cache_create(1 << 20);
    cr_assert_not_null(c);
    wl_op ops[N_OPS];
    wl_pass p;
    make_pass(ops, &p, 1);
    const int64_t v = 11;
    wl_cache_put(c, &p, WL_CACHE_STEP, &v, sizeof v);
    cr_assert_not_null(wl_cache_get(c, &p, WL_CACHE_STEP, sizeof v));
    wl_cache_forget(c);
    make_pass(ops, &p, 2); /* the same buffer, other ops */
    cr_assert_null(wl_cache_get(c, &p, WL_CACHE_STEP, sizeof v));
    wl_cache_destroy(c);
}

/* Layouts that differ in one searched dimension that shapes the layers
 * (TP, CP, CP communication, SP, MBS, recompute) build different
 * templates: none of the other layout's passes is found for them. */
static void build(const char *args, workload_t **wl, strategy_t *s)
{
    run_inputs in;
    sim_resolve_args(args, &in, s);
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(workload_build(wl, &in, s, &err), SIM_OK, "%s: %s", args, err.msg);
}

static void put_all(wl_cache *c, const workload_t *wl)
{
    for (int64_t r = 0; r < wl->pp; r++)
        for (int64_t k = 0; k < wl->v; k++)
            for (int kind = 0; kind < SCHED_KINDS; kind++) {
                const int64_t v = r;
                wl_cache_put(c, wl_chunk_pass(&wl->stages[r].chunks[k], (sched_kind)kind), WL_CACHE_STEP, &v, sizeof v);
            }
}

/* Passes of kind `kind` found, of those with ops. */
static int found(wl_cache *c, const workload_t *wl, sched_kind kind)
{
    int n = 0;
    for (int64_t r = 0; r < wl->pp; r++)
        for (int64_t k = 0; k < wl->v; k++) {
            const wl_pass *p = wl_chunk_pass(&wl->stages[r].chunks[k], kind);
            cr_assert_gt(p->n_ops, 0);
            n += wl_cache_get(c, p, WL_CACHE_STEP, sizeof(int64_t)) != NULL;
        }
    return n;
}

static void drop(wl_cache *c, workload_t *wl)
{
    workload_destroy(wl);
    wl_cache_forget(c); /* its addresses may be reused */
}

#define BASE "model.name=llama3-8b cluster.topology=dgx-h100 cluster.num_gpus=64 model.seq_length=8192 " \
             "train.global_batch_size=64 model.pipeline_model_parallel_size=2 "
#define LAYOUT(tp, cp, comm, sp, mbs, rc) \
    BASE "model.tensor_model_parallel_size=" tp " model.context_parallel_size=" cp " model.cp_comm_type=" comm \
         " model.sequence_parallel=" sp " train.micro_batch_size=" mbs " model.recompute_granularity=" rc

Test(wl_cache, layouts_differing_in_a_layer_dimension_share_no_template, .timeout = 60)
{
    const struct {
        const char *args;
        bool same_forward; /* recomputing changes only the backward */
    } changed[] = {
        {LAYOUT("4", "2", "p2p", "true", "1", "none"), false},
        {LAYOUT("2", "4", "p2p", "true", "1", "none"), false},
        {LAYOUT("2", "2", "a2a", "true", "1", "none"), false},
        {LAYOUT("2", "2", "p2p", "false", "1", "none"), false},
        {LAYOUT("2", "2", "p2p", "true", "2", "none"), false},
        {LAYOUT("2", "2", "p2p", "true", "1", "full"), true},
    };
    workload_t *a;
    strategy_t sa;
    build(LAYOUT("2", "2", "p2p", "true", "1", "none"), &a, &sa);
    wl_cache *c = wl_cache_create(WL_CACHE_BYTES);
    cr_assert_not_null(c);
    put_all(c, a);
    const int n = (int)(a->pp * a->v);
    cr_assert_eq(found(c, a, SCHED_F) + found(c, a, SCHED_B), 2 * n); /* its own: all found */
    for (size_t i = 0; i < sizeof changed / sizeof *changed; i++) {
        workload_t *b;
        strategy_t sb;
        build(changed[i].args, &b, &sb);
        cr_assert_eq(found(c, b, SCHED_F), changed[i].same_forward ? n : 0, "%s", changed[i].args);
        cr_assert_eq(found(c, b, SCHED_B), 0, "%s", changed[i].args);
        drop(c, b);
    }
    /* Only the distributed optimizer differs: every template is the same
     * (DP buckets and the optimizer step are not in them). */
    workload_t *d;
    strategy_t sd;
    build("ddp.use_distributed_optimizer=false " LAYOUT("2", "2", "p2p", "true", "1", "none"), &d, &sd);
    cr_assert_eq(found(c, d, SCHED_F) + found(c, d, SCHED_B), 2 * n);
    drop(c, d);
    wl_cache_destroy(c);
    workload_destroy(a);
}
