/* Sizes at and past the ends of int64 and of simulated time: checked
 * products in strategy and model, checked time conversion, search and the
 * fabric at huge worlds.  Every bad input is SIM_EINVAL (exit 2) with a
 * message naming the key or option; nothing overflows (the sanitizer
 * build aborts on signed overflow) and nothing walks the ranks.  Group
 * placement in closed form is checked against a walk over the members. */
#define _DEFAULT_SOURCE /* popen */
#include <criterion/criterion.h>

#include "cli_run.h"
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "config.h"
#include "bounds.h"
#include "model.h"
#include "net.h"
#include "search.h"
#include "strategy.h"
#include "units.h"

/* ---- group placement: closed form against the walk -------------------- */

/* The span as a walk over the members (what the closed form replaces). */
static void walk_span(const cluster_spec *c, int64_t size, int64_t stride, group_span *out)
{
    memset(out, 0, sizeof *out);
    int64_t node = -1, dom = -1, su = -1, su0 = 0, run_node = 0, run_dom = 0, run_su = 0;
    double sq_dom = 0.0, sq_su = 0.0;
    int64_t hops = 0, spine_hops = 0;
    for (int64_t i = 0; i < size; i++) {
        int64_t rank = i * stride;
        int64_t nd = cluster_node_of(c, rank), dm = cluster_domain_of(c, rank), u = cluster_su_of(c, rank);
        if (i == 0)
            su0 = u;
        if (nd != node) {
            out->nodes++;
            node = nd;
            run_node = 0;
        }
        if (++run_node > out->ranks_per_node)
            out->ranks_per_node = run_node;
        if (dm != dom) {
            if (i > 0) {
                hops++;
                spine_hops += u != su;
                sq_dom += (double)run_dom * (double)run_dom;
            }
            out->domains++;
            dom = dm;
            run_dom = 0;
        }
        run_dom++;
        if (u != su) {
            if (i > 0)
                sq_su += (double)run_su * (double)run_su;
            out->sus++;
            su = u;
            run_su = 0;
        }
        run_su++;
    }
    sq_dom += (double)run_dom * (double)run_dom;
    sq_su += (double)run_su * (double)run_su;
    if (out->domains > 1) {
        hops++;
        spine_hops += su != su0;
    }
    out->spine_hop_fraction = hops > 0 ? (double)spine_hops / (double)hops : 0.0;
    double n2 = (double)size * (double)size, other_dom = n2 - sq_dom, other_su = n2 - sq_su;
    double f = other_dom > 0 ? other_su / other_dom : 0.0;
    out->spine_peer_fraction = f > 1.0 ? 1.0 : f;
}

Test(hostile_sizes, group_span_closed_form_equals_the_walk)
{
    /* Nested tiers (DGX, NVL72) and tiers that do not nest (a domain
     * straddling two units), every stride from 0 to past a unit. */
    static const int64_t shapes[][3] = { /* gpus_per_node, domain, su_nodes */
        {8, 8, 32}, {4, 72, 144}, {4, 72, 32}, {8, 12, 5}, {6, 9, 7}, {8, 8, 0}, {1, 3, 2},
        {4, 8, 3}, {16, 8, 1}, {5, 7, 3},
    };
    static const int64_t sizes[] = {1, 2, 3, 5, 8, 16, 37, 64, 100, 257};
    int checked = 0;
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        cluster_spec c;
        cluster_defaults(&c);
        c.gpus_per_node = shapes[k][0];
        c.nvlink_domain_gpus = shapes[k][1];
        c.scaleout.su_nodes = shapes[k][2];
        c.num_gpus = 1 << 20;
        for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++)
            for (int64_t stride = 0; stride <= 300; stride += stride < 20 ? 1 : 13) {
                group_span a, b;
                net_group_span(&c, sizes[z], stride, &a);
                walk_span(&c, sizes[z], stride, &b);
                char at[128];
                snprintf(at, sizeof at, "gpn %" PRId64 " domain %" PRId64 " su %" PRId64 " size %" PRId64
                         " stride %" PRId64, shapes[k][0], shapes[k][1], shapes[k][2], sizes[z], stride);
#define SAME(f) cr_assert_eq(a.f, b.f, "%s: %s: %" PRId64 " vs walk %" PRId64, #f, at, (int64_t)a.f, (int64_t)b.f)
                SAME(nodes);
                SAME(ranks_per_node);
                SAME(domains);
                SAME(sus);
#undef SAME
                cr_assert_eq(a.in_nvlink_domain, b.domains <= 1, "%s", at);
                cr_assert_float_eq(a.spine_hop_fraction, b.spine_hop_fraction, 1e-12, "hop fraction: %s: %g vs walk %g",
                                   at, a.spine_hop_fraction, b.spine_hop_fraction);
                cr_assert_float_eq(a.spine_peer_fraction, b.spine_peer_fraction, 1e-12,
                                   "peer fraction: %s: %g vs walk %g", at, a.spine_peer_fraction,
                                   b.spine_peer_fraction);
                checked++;
            }
    }
    cr_assert_gt(checked, 1000);
}

Test(hostile_sizes, group_span_at_int64_extremes)
{
    /* A group of 2^31 and one whose extent passes int64: counts, no walk,
     * no overflow. */
    cluster_spec c;
    cluster_defaults(&c);
    c.gpus_per_node = 8;
    c.nvlink_domain_gpus = 8;
    c.scaleout.su_nodes = 32;
    c.num_gpus = INT64_C(1) << 31;
    group_span g;
    net_group_span(&c, c.num_gpus, 1, &g);
    cr_assert_eq(g.nodes, c.num_gpus / 8);
    cr_assert_eq(g.domains, c.num_gpus / 8);
    cr_assert_eq(g.sus, c.num_gpus / 256);
    cr_assert_eq(g.ranks_per_node, 8);
    cr_assert_float_eq(g.spine_hop_fraction, 1.0 / 32.0, 1e-12);
    net_group_span(&c, INT64_MAX / 2, 16, &g);
    cr_assert_gt(g.nodes, 0);
    cr_assert_leq(g.nodes, INT64_MAX / 2);
    c.gpus_per_node = INT64_MAX;
    c.scaleout.su_nodes = INT64_MAX;
    net_group_span(&c, 1 << 20, 3, &g);
    cr_assert_eq(g.nodes, 1);
    cr_assert_eq(g.sus, 1);
    cr_assert_eq(g.ranks_per_node, 1 << 20);
}

/* ---- checked products in strategy and model ----------------------------- */

/* Resolved inputs for a space-separated list of overrides, read as the
 * command line reads its arguments. */
static run_inputs resolve(const char *settings, bool cluster_only)
{
    sim_err err;
    sim_err_clear(&err);
    cfg_t *c = cfg_create(PARSIM_SOURCE_DIR);
    cr_assert_not_null(c);
    bool have_file = false;
    const char *p = settings;
    while (*p) {
        size_t n = strcspn(p, " ");
        char arg[256];
        snprintf(arg, sizeof arg, "%.*s", (int)n, p);
        cr_assert_eq(cli_config_arg(c, arg, &have_file, &err), SIM_OK, "%s: %s", arg, err.msg);
        p += n + (p[n] == ' ');
    }
    run_inputs in;
    int rc = cluster_only ? cfg_resolve_cluster(c, &in, &err) : cfg_resolve(c, &in, &err);
    cr_assert_eq(rc, SIM_OK, "%s: %s", settings, err.msg);
    cfg_destroy(c);
    return in;
}

static run_inputs inputs(const char *settings)
{
    return resolve(settings, false);
}

#define BASE "model.name=llama3-8b cluster.topology=dgx-h100 cluster.num_gpus=16 train.global_batch_size=32"

/* strategy_resolve on in must fail with SIM_EINVAL naming key, the
 * message containing `has`. */
static void expect_rejected(run_inputs *in, const char *key, const char *has)
{
    strategy_t *s = malloc(sizeof *s);
    cr_assert_not_null(s);
    sim_err err;
    sim_err_clear(&err);
    int rc = strategy_resolve(s, &in->model, &in->cluster, &in->par, &in->train, &in->ddp, &err);
    free(s);
    cr_assert_eq(rc, SIM_EINVAL, "expected %s to be rejected, got %d (%s)", key, rc, err.msg);
    cr_assert_str_eq(err.key, key, "key %s, message: %s", err.key, err.msg);
    cr_assert(strstr(err.msg, has), "message '%s' should say '%s'", err.msg, has);
}

Test(hostile_sizes, parallel_sizes_multiplying_past_int64)
{
    /* TP 2^62 divides 2^62 heads; x CP 4 passes int64. */
    run_inputs in = inputs(BASE);
    in.model.num_attention_heads = INT64_C(1) << 62;
    in.model.num_query_groups = 0;
    in.model.make_vocab_size_divisible_by = 1;
    in.par.tp = INT64_C(1) << 62;
    in.par.cp = 4;
    expect_rejected(&in, "cluster.num_gpus", "multiply past any world size");

    /* 2 x CP passes int64 */
    in = inputs(BASE);
    in.par.cp = INT64_MAX / 2 + 1;
    expect_rejected(&in, "model.context_parallel_size", "multiple of 2 * context_parallel_size");

    /* PP x VP passes int64 */
    in = inputs(BASE);
    in.par.pp = INT64_C(1) << 40;
    in.par.vp = INT64_C(1) << 40;
    expect_rejected(&in, "model.pipeline_model_parallel_size", "virtual stages");

    /* first-stage layers near INT64_MAX: num_layers - first - last */
    in = inputs(BASE " model.pipeline_model_parallel_size=2");
    in.par.num_layers_in_first_pipeline_stage = INT64_MAX;
    in.par.num_layers_in_last_pipeline_stage = INT64_MAX;
    expect_rejected(&in, "model.num_layers_in_first_pipeline_stage", "exceed num_layers");
    in.par.num_layers_in_first_pipeline_stage = INT64_MIN;
    expect_rejected(&in, "model.num_layers_in_first_pipeline_stage", "must be >= 0");

    /* microbatches x virtual stages x pipeline stages pass int64: M = 2^59 */
    in = inputs(BASE " model.pipeline_model_parallel_size=2 model.virtual_pipeline_model_parallel_size=16");
    in.train.global_batch_size = INT64_C(1) << 62;
    expect_rejected(&in, "train.global_batch_size", "virtual stages");

    /* the layer split of a pinned PP x VP past int64 */
    parallel_spec split;
    cr_assert_not(strategy_split_layers(&in.model, INT64_C(1) << 62, 8, &split));
    cr_assert_not(strategy_split_layers(&in.model, INT64_MAX, INT64_MAX, &split));
    cr_assert(strategy_split_layers(&in.model, 4, 8, &split));

    /* micro batch x DP passes int64 */
    in = inputs(BASE);
    in.train.micro_batch_size = INT64_MAX / 4;
    expect_rejected(&in, "train.global_batch_size", "not divisible");
}

Test(hostile_sizes, vocabulary_padding_past_int64)
{
    /* 2^62 x TP 2 wrapped to 0 and divided by it. */
    run_inputs in = inputs(BASE " model.tensor_model_parallel_size=2");
    in.model.make_vocab_size_divisible_by = INT64_C(4611686018427387904);
    int64_t v = 0;
    cr_assert_not(model_padded_vocab_checked(&in.model, 2, &v));
    cr_assert(model_padded_vocab_checked(&in.model, 1, &v));
    cr_assert_eq(v, INT64_C(4611686018427387904));
    expect_rejected(&in, "model.make_vocab_size_divisible_by", "passes 2^63");
    /* the padded size itself passes int64: ceil(V / d) x d */
    in.model.make_vocab_size_divisible_by = INT64_C(1) << 62;
    in.model.vocab_size = INT64_MAX - 1;
    cr_assert_not(model_padded_vocab_checked(&in.model, 1, &v));
}

Test(hostile_sizes, cli_vocabulary_padding_is_bad_input)
{
    result r;
    run(&r, "run " BASE " model.tensor_model_parallel_size=2 "
            "model.make_vocab_size_divisible_by=4611686018427387904");
    cr_assert_eq(r.status, 2, "status %d: %s", r.status, r.out);
    cr_assert(strstr(r.out, "model.make_vocab_size_divisible_by"), "%s", r.out);
}

/* ---- checked time conversion ----------------------------------------------- */

Test(hostile_sizes, time_conversion_refuses_what_64_bit_picoseconds_cannot_hold)
{
    sim_time_ps t = 7;
    cr_assert_not(time_from_s_checked(NAN, &t));
    cr_assert_not(time_from_s_checked(-1e-12, &t));
    cr_assert_not(time_from_s_checked(LIMIT_DURATION_S * 1.0000001, &t));
    cr_assert_not(time_from_s_checked(1e300, &t));
    cr_assert_not(time_from_s_checked(INFINITY, &t));
    cr_assert_eq(t, 7, "a refused conversion leaves the output alone");
    /* past int64 picoseconds (9.2e6 s) and up to the limit: exact */
    cr_assert(time_from_s_checked(1e7, &t));
    cr_assert_eq(t, UINT64_C(10000000000000000000));
    cr_assert(time_from_s_checked(LIMIT_DURATION_S, &t));
    cr_assert_eq(t, UINT64_C(18000000000000000000));
    cr_assert(time_from_s_checked(2.5e-12, &t));
    cr_assert_eq(t, 3, "round half away from zero");
}

/* ---- search ------------------------------------------------------------------ */

Test(hostile_sizes, search_rejects_a_pinned_dimension_that_breaks_a_rule)
{
    run_inputs in = inputs("model.name=llama3-70b cluster.topology=dgx-h100 cluster.num_gpus=64 "
                           "model.seq_length=8192 train.global_batch_size=128");
    static const struct {
        search_dim dim;
        int64_t value;
        const char *has;
    } cases[] = {
        {SEARCH_DIM_TP, 3, "num_attention_heads (64) must be a multiple"},
        {SEARCH_DIM_CP, 3, "multiple of 2 * context_parallel_size"},
        {SEARCH_DIM_EP, 2, "needs a MoE model"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        run_inputs b = in;
        if (cases[k].dim == SEARCH_DIM_TP)
            b.par.tp = cases[k].value;
        else if (cases[k].dim == SEARCH_DIM_CP)
            b.par.cp = cases[k].value;
        else
            b.par.ep = cases[k].value;
        search_opts o;
        search_opts_default(&o);
        o.pinned = 1u << cases[k].dim;
        search_result *res = calloc(1, sizeof *res);
        cr_assert_not_null(res);
        sim_err err;
        sim_err_clear(&err);
        int rc = search_run(&b, &o, res, &err);
        search_result_free(res);
        free(res);
        cr_assert_eq(rc, SIM_EINVAL, "%s: rc %d", search_dim_key(cases[k].dim), rc);
        cr_assert_str_eq(err.key, search_dim_key(cases[k].dim));
        cr_assert(strstr(err.msg, cases[k].has), "%s", err.msg);
    }
}

Test(hostile_sizes, cli_search_pinned_tp_and_cp_are_bad_input)
{
    static const char *const cases[][2] = {
        {"model.tensor_model_parallel_size=3", "model.tensor_model_parallel_size: num_attention_heads (64)"},
        {"model.context_parallel_size=3", "model.context_parallel_size: seq_length (8192)"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char args[512];
        snprintf(args, sizeof args,
                 "search model.name=llama3-70b cluster.topology=dgx-h100 cluster.num_gpus=64 "
                 "model.seq_length=8192 train.global_batch_size=128 --top 3 %s", cases[k][0]);
        result r;
        run(&r, args);
        cr_assert_eq(r.status, 2, "%s: status %d: %s", cases[k][0], r.status, r.out);
        cr_assert(strstr(r.out, cases[k][1]), "%s", r.out);
    }
}

Test(hostile_sizes, search_at_the_largest_world_ends)
{
    /* INT64_MAX GPUs: the CP and world doublings stop before passing
     * int64 and no modulo by a wrapped zero; nothing is legal. */
    run_inputs in = inputs("model.name=llama3-70b cluster.topology=dgx-h100 cluster.num_gpus=64 "
                           "model.seq_length=8192 train.global_batch_size=128");
    search_opts o;
    search_opts_default(&o);
    search_result *res = calloc(1, sizeof *res);
    cr_assert_not_null(res);
    sim_err err;
    sim_err_clear(&err);
    o.gpus_min = o.gpus_max = INT64_MAX;
    cr_assert_eq(search_run(&in, &o, res, &err), SIM_OK, "%s", err.msg);
    cr_assert_eq(res->n_feasible, 0);
    cr_assert_gt(res->counts.illegal, 0);
    search_result_free(res);
    memset(res, 0, sizeof *res);
    /* a range up to INT64_MAX: powers of two of the node size, at most 32 */
    o.gpus_min = 8;
    o.gpus_max = INT64_MAX;
    o.exhaustive = false;
    in.model.num_layers = 2; /* keep the space small */
    cr_assert_eq(search_run(&in, &o, res, &err), SIM_OK, "%s", err.msg);
    cr_assert_eq(res->n_worlds, 32);
    cr_assert_eq(res->worlds[31], INT64_C(8) << 31);
    search_result_free(res);
    free(res);

    result r;
    run(&r, "search model.name=llama3-70b cluster.topology=dgx-h100 model.seq_length=8192 "
            "train.global_batch_size=128 --top 3 --gpus 9223372036854775807");
    cr_assert(r.status == 1 || r.status == 2, "status %d: %s", r.status, r.out);
    cr_assert(strstr(r.out, "parsim"), "%s", r.out);
}

/* ---- the fabric at scale ----------------------------------------------------- */

Test(hostile_sizes, net_at_the_gpu_limit_prints_its_table)
{
    result r;
    char args[256];
    snprintf(args, sizeof args, "net all_reduce cluster.topology=dgx-h100 cluster.num_gpus=%lld --max-bytes 1M",
             (long long)LIMIT_GPUS);
    run(&r, args);
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    cr_assert(strstr(r.out, "262144"), "%s", r.out);
}

Test(hostile_sizes, a_collective_too_long_to_simulate_names_its_tier_and_key)
{
    static const struct {
        const char *settings;
        int64_t size, stride;
        const char *key, *has;
    } cases[] = {
        /* beyond the key's range: set on the spec itself below */
        {"cluster.topology=dgx-h100 cluster.num_gpus=1024",
         1024, 1, "cluster.scaleout.spine_oversubscription", "all_reduce of 1.07374e+09 bytes over 1024 GPUs"},
        {"cluster.topology=dgx-h100 cluster.num_gpus=1024 cluster.scaleout.nic_bw_gbytes_per_s=1e-300",
         1024, 1, "cluster.scaleout.nic_bw_gbytes_per_s", "NIC bandwidth per GPU"},
        {"cluster.topology=dgx-h100 cluster.num_gpus=8 cluster.nvlink.bw_gbytes_per_s=1e-300 "
         "cluster.nvlink.nvls_bw_gbytes_per_s=0",
         8, 1, "cluster.nvlink.bw_gbytes_per_s", "in one NVLink domain"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        run_inputs in = resolve(cases[k].settings, true);
        if (k == 0)
            in.cluster.scaleout.spine_oversubscription = 1e300;
        group_span g;
        net_group_span(&in.cluster, cases[k].size, cases[k].stride, &g);
        double t = net_collective_s(&in.cluster, &g, COLL_ALL_REDUCE, 1073741824.0);
        sim_err err;
        sim_err_clear(&err);
        cr_assert_eq(net_check_duration(&in.cluster, &g, COLL_ALL_REDUCE, 1073741824.0, t, &err), SIM_EINVAL,
                     "%s: %g s", cases[k].settings, t);
        cr_assert_str_eq(err.key, cases[k].key, "%s", err.msg);
        cr_assert(strstr(err.msg, cases[k].has), "%s", err.msg);
        cr_assert(strstr(err.msg, "(limit 1.8e+07 s)"), "%s", err.msg);
    }
    /* a normal collective passes */
    run_inputs in = resolve("cluster.topology=dgx-h100 cluster.num_gpus=1024", true);
    group_span g;
    net_group_span(&in.cluster, 1024, 1, &g);
    sim_err err;
    cr_assert_eq(net_check_duration(&in.cluster, &g, COLL_ALL_REDUCE, 1e9,
                                    net_collective_s(&in.cluster, &g, COLL_ALL_REDUCE, 1e9), &err), SIM_OK);
    cr_assert_eq(net_check_duration(&in.cluster, &g, COLL_ALL_REDUCE, 1e9, NAN, &err), SIM_EINVAL);
}

/* parsim net on a fabric too slow for simulated time: exit 2 naming the
 * key, and no half table on stdout. */
Test(hostile_sizes, cli_net_too_slow_prints_no_table)
{
    result r;
    run(&r, "net all_reduce cluster.topology=dgx-h100 cluster.num_gpus=1024 "
            "cluster.scaleout.nic_bw_gbytes_per_s=1e-300");
    cr_expect_eq(r.status, 2, "%s", r.out);
    cr_expect_null(strstr(r.out, "# parsim net"), "part of a table was printed: %s", r.out);
    cr_expect(strstr(r.out, "parsim: cluster.scaleout.nic_bw_gbytes_per_s: all_reduce of 8 bytes over 1024 GPUs") &&
                  strstr(r.out, "(limit 1.8e+07 s)") && strchr(r.out, '\n') == r.out + strlen(r.out) - 1,
              "%s", r.out);
}
