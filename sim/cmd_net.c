/* parsim net: what nccl-tests would print for the modeled fabric.
 *
 *   parsim net COLLECTIVE [CONFIG.cfg] [KEY=VALUE ...] [--min-bytes N]
 *              [--max-bytes N] [--factor F] [--algo A] [--proto P] [--type T]
 *
 * The group is the whole world (cluster.num_gpus ranks, node by node), as
 * in an nccl-tests run with one process per GPU.  Rows follow nccl-tests'
 * columns and definitions (doc/PERFORMANCE.md): size in bytes (for
 * all-gather the gathered output, for reduce-scatter the input, for
 * all-to-all the per-rank send buffer; rounded down to whole elements per
 * rank as nccl-tests does), count in elements, time in microseconds,
 * algbw = size / time and busbw = algbw x the collective's factor, in
 * GB/s (1e9 bytes/s); then the algorithm and protocol the model chose.
 * Only cluster.* and sim.* keys are needed.  Sizes are given in bytes with
 * binary multiples as nccl-tests' -b/-e (1M = 1,048,576 bytes), at most
 * 2^50; a run prints at most LIMIT_NET_ROWS sizes, checked before the first.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "bounds.h"
#include "numparse.h"
#include "net.h"
#include "opts.h"
#include "units.h"

typedef struct net_opts {
    double min_bytes, max_bytes, factor;
    const char *type;
    size_t type_bytes;
} net_opts;

/* nccl-tests' data types (-d) and their sizes. */
static bool type_size(const char *name, const char **canon, size_t *bytes)
{
    static const struct {
        const char *name, *canon;
        size_t bytes;
    } types[] = {
        { "int8", "int8", 1 },       { "uint8", "uint8", 1 },     { "int32", "int32", 4 },
        { "uint32", "uint32", 4 },   { "int64", "int64", 8 },     { "uint64", "uint64", 8 },
        { "half", "half", 2 },       { "fp16", "half", 2 },       { "float", "float", 4 },
        { "fp32", "float", 4 },      { "double", "double", 8 },   { "bfloat16", "bfloat16", 2 },
        { "bf16", "bfloat16", 2 },
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        if (strcmp(name, types[i].name) == 0) {
            *canon = types[i].canon;
            *bytes = types[i].bytes;
            return true;
        }
    }
    return false;
}

/* The sizes a run prints: min, min x factor, ... up to max (with a little
 * slack so that a max reached by repeated multiplication is printed). */
static bool size_in_sweep(const net_opts *o, double size)
{
    return size <= o->max_bytes * (1 + 1e-12);
}

/* How many sizes the run prints, counted up to LIMIT_NET_ROWS + 1. */
static long long size_rows(const net_opts *o)
{
    long long n = 0;
    for (double size = o->min_bytes; size_in_sweep(o, size) && n <= LIMIT_NET_ROWS; size *= o->factor)
        n++;
    return n;
}

#define NET_USAGE                                                                               \
    "parsim net COLLECTIVE [CONFIG.cfg] [KEY=VALUE ...] [--min-bytes N] [--max-bytes N] "        \
    "[--factor F] [--algo A] [--proto P] [--type T]; sizes in bytes, binary: 1M = 1,048,576 bytes"

enum { O_MIN_BYTES, O_MAX_BYTES, O_FACTOR, O_ALGO, O_PROTO, O_TYPE };
static const opts_def net_opts_table[] = {
    [O_MIN_BYTES] = {"--min-bytes", "a value"}, [O_MAX_BYTES] = {"--max-bytes", "a value"},
    [O_FACTOR] = {"--factor", "a value"},       [O_ALGO] = {"--algo", "a value"},
    [O_PROTO] = {"--proto", "a value"},         [O_TYPE] = {"--type", "a value"},
};

static void print_header(FILE *out, const run_inputs *in, const group_span *g, coll_kind k,
                         const net_opts *o)
{
    const cluster_spec *c = &in->cluster;
    fprintf(out, "# parsim net: %s on %" PRId64 " GPUs of %s (%" PRId64 " node%s, %" PRId64
                 " %s domain%s of up to %" PRId64 " GPUs)\n",
            coll_kind_name(k), g->size, c->name[0] ? c->name : "(custom topology)", g->nodes,
            g->nodes == 1 ? "" : "s", g->domains, scaleup_kind_name(c->scaleup.kind),
            g->domains == 1 ? "" : "s", c->nvlink_domain_gpus);
    fprintf(out, "#   %s: %.1f GB/s ring, %.1f all-to-all, %.1f NVLS per GPU; %s: %" PRId64
                 " x %.1f GB/s NICs per node of %" PRId64 " GPUs",
            scaleup_kind_name(c->scaleup.kind), c->scaleup.bw_bytes_per_s / GB,
            c->scaleup.a2a_bw_bytes_per_s / GB, c->scaleup.nvls_bw_bytes_per_s / GB,
            fabric_kind_name(c->scaleout.kind), c->scaleout.nics_per_node,
            c->scaleout.nic_bw_bytes_per_s / GB, c->gpus_per_node);
    if (g->sus > 1)
        fprintf(out, ", %" PRId64 " scalable units, spine %.2g:1", g->sus,
                c->scaleout.spine_oversubscription);
    fprintf(out, "\n#   algorithm %s, protocol %s%s; sizes %.0f to %.0f bytes, x%g; type %s\n",
            net_algo_name(c->force_algo), net_proto_name(c->force_proto),
            c->force_algo == NET_ALGO_AUTO || c->force_proto == NET_PROTO_AUTO
                ? " (auto = least predicted time, as NCCL's tuning)" : "",
            o->min_bytes, o->max_bytes, o->factor, o->type);
    fprintf(out, "#\n");
    fprintf(out, "# %10s  %12s  %8s  %6s  %6s  %10s  %7s  %7s  %-12s  %s\n", "size", "count",
            "type", "redop", "root", "time", "algbw", "busbw", "algo", "proto");
    fprintf(out, "# %10s  %12s  %8s  %6s  %6s  %10s  %7s  %7s\n", "(B)", "(elements)", "", "", "",
            "(us)", "(GB/s)", "(GB/s)");
}

/* What the table of one run of parsim net is made of. */
typedef struct net_table {
    const run_inputs *in;
    const group_span *g;
    coll_kind k;
    const net_opts *o;
} net_table;

/* The header and one row per size, as nccl-tests prints them; a size whose
 * time simulated time cannot hold is an error naming the tier and key (the
 * table is then not printed at all: cli_print_whole drops it). */
static int write_table(FILE *out, void *ctx, sim_err *err)
{
    const net_table *t = ctx;
    const cluster_spec *c = &t->in->cluster;
    const net_opts *o = t->o;
    coll_kind k = t->k;
    print_header(out, t->in, t->g, k, o);
    double n = (double)t->g->size, busbw_sum = 0.0;
    int rows = 0;
    bool per_rank = k == COLL_ALL_GATHER || k == COLL_REDUCE_SCATTER || k == COLL_ALL_TO_ALL;
    for (double size = o->min_bytes; size_in_sweep(o, size); size *= o->factor) {
        /* Whole elements, and for the per-rank collectives whole elements
         * per rank, as nccl-tests sizes its buffers. */
        double count = floor(size / (double)o->type_bytes);
        if (per_rank)
            count = floor(count / n) * n;
        double bytes = count * (double)o->type_bytes;
        if (count < 1)
            continue;
        net_choice ch;
        if (net_collective_choose(c, t->g, k, bytes, c->force_algo, c->force_proto, &ch) != 0)
            return sim_err_set(err, SIM_ESIM, "no algorithm for %s at %.0f bytes", coll_kind_name(k), bytes);
        int rc = net_check_duration(c, t->g, k, bytes, ch.time_s, err);
        if (rc)
            return rc;
        double algbw = bytes / ch.time_s / GB;
        double busbw = algbw * net_busbw_factor(k, t->g->size);
        bool reduces = k == COLL_ALL_REDUCE || k == COLL_REDUCE_SCATTER;
        fprintf(out, "  %10.0f  %12.0f  %8s  %6s  %6d  %10.2f  %7.2f  %7.2f  %-12s  %s\n", bytes, count,
                o->type, reduces ? "sum" : "none", k == COLL_BROADCAST ? 0 : -1, ch.time_s * 1e6,
                algbw, busbw, net_algo_name(ch.algo), net_proto_name(ch.proto));
        busbw_sum += busbw;
        rows++;
    }
    fprintf(out, "# Avg bus bandwidth    : %g\n", rows ? busbw_sum / rows : 0.0);
    return SIM_OK;
}

int cmd_net(int argc, char **argv)
{
    if (argc < 1 || argv[0][0] == '-')
        return cli_usage_error("net: name a collective: all_reduce, all_gather, reduce_scatter, "
                               "all_to_all, broadcast or p2p (" NET_USAGE ")");
    coll_kind k;
    if (!coll_kind_from_name(argv[0], &k))
        return cli_usage_error("net: unknown collective '%s' (expected all_reduce, all_gather, "
                               "reduce_scatter, all_to_all, broadcast or p2p)", argv[0]);

    net_opts o = { .min_bytes = 8, .max_bytes = 8.0 * 1024 * 1024 * 1024, .factor = 2,
                   .type = "float", .type_bytes = 4 };
    int rc = EXIT_BAD_INPUT;
    sim_err err;
    sim_err_clear(&err);
    cfg_t *cfg = cfg_create(NULL);
    if (!cfg) {
        fputs("parsim: out of memory\n", stderr);
        return EXIT_FAILURE;
    }
    bool have_file = false;
    opts_iter it = opts_start(argc, argv, 1, net_opts_table, sizeof net_opts_table / sizeof net_opts_table[0],
                              "net: ", " (" NET_USAGE ")");
    it.dash_options = 1;
    for (;;) {
        const char *v;
        char kv[160];
        int opt = opts_next(&it, &v);
        if (opt == OPTS_END)
            break;
        if (opt == OPTS_FAIL)
            goto out;
        const char *a = opt >= 0 ? net_opts_table[opt].name : v;
        if (opt == O_MIN_BYTES || opt == O_MAX_BYTES) {
            double bytes = 0;
            if (!num_parse_bytes(v, &bytes) || !(bytes >= 1 && bytes <= LIMIT_NET_BYTES)) {
                rc = cli_usage_error("net: %s needs a size in 1..%.0f bytes (2^50), binary: 1M = "
                                     "1,048,576 bytes (K, M, G, T, optional B), got '%s'", a,
                                     LIMIT_NET_BYTES, v);
                goto out;
            }
            *(opt == O_MIN_BYTES ? &o.min_bytes : &o.max_bytes) = bytes;
        } else if (opt == O_FACTOR) {
            double f = 0;
            if (!num_parse_double(v, &f) || !(f > 1 && f <= LIMIT_FACTOR)) {
                rc = cli_usage_error("net: --factor needs a number in (1, %g], got '%s'", LIMIT_FACTOR, v);
                goto out;
            }
            o.factor = f;
        } else if (opt == O_ALGO || opt == O_PROTO) {
            snprintf(kv, sizeof kv, "%s=%s", opt == O_ALGO ? "sim.nccl_algo" : "sim.nccl_proto", v);
            if (cfg_set_override(cfg, kv, &err) != SIM_OK) {
                rc = cli_fail(&err);
                goto out;
            }
        } else if (opt == O_TYPE) {
            if (!type_size(v, &o.type, &o.type_bytes)) {
                rc = cli_usage_error("net: --type: unknown type '%s' (expected int8, uint8, int32, "
                                     "uint32, int64, uint64, half, float, double or bfloat16)", v);
                goto out;
            }
        } else if (cli_config_arg(cfg, a, &have_file, &err) != SIM_OK) {
            rc = cli_fail(&err);
            goto out;
        }
    }
    if (o.min_bytes > o.max_bytes) {
        rc = cli_usage_error("net: --min-bytes (%.0f) is above --max-bytes (%.0f)", o.min_bytes,
                             o.max_bytes);
        goto out;
    }
    if (size_rows(&o) > LIMIT_NET_ROWS) {
        rc = cli_usage_error("net: --factor %.10g from --min-bytes %.0f to --max-bytes %.0f gives about %.0f "
                             "sizes, more than %lld (the most parsim net prints): raise --factor or "
                             "narrow the range", o.factor, o.min_bytes, o.max_bytes,
                             floor(log(o.max_bytes / o.min_bytes) / log(o.factor)) + 1, LIMIT_NET_ROWS);
        goto out;
    }

    run_inputs in;
    if (cfg_resolve_cluster(cfg, &in, &err) != SIM_OK) {
        rc = cli_fail(&err);
        goto out;
    }
    const cluster_spec *c = &in.cluster;
    if (c->num_gpus < 2) {
        cfg_err_key(cfg, &err, SIM_EINVAL, "cluster.num_gpus",
                    "a collective needs at least 2 GPUs (got %" PRId64 ")", c->num_gpus);
        rc = cli_fail(&err);
        goto out;
    }
    group_span g;
    net_group_span(c, c->num_gpus, 1, &g);
    const char *why = NULL;
    if (c->force_algo != NET_ALGO_AUTO && !net_algo_supported(c, &g, k, c->force_algo, &why)) {
        cfg_err_key(cfg, &err, SIM_EINVAL, "sim.nccl_algo", "%s cannot run %s on %" PRId64
                    " GPUs: %s", net_algo_name(c->force_algo), coll_kind_name(k), g.size, why);
        rc = cli_fail(&err);
        goto out;
    }

    /* A forced protocol the forced algorithm cannot run fails at any size:
     * say so before the first row. */
    if (net_collective_choose(c, &g, k, o.max_bytes, c->force_algo, c->force_proto, NULL) != 0) {
        cfg_err_key(cfg, &err, SIM_EINVAL, "sim.nccl_proto",
                    "protocol %s cannot run %s with algorithm %s (NVLS and NVLS tree run "
                    "Simple only; p2p runs LL or Simple; LL128 may be off: "
                    "cluster.nccl.ll128)", net_proto_name(c->force_proto), coll_kind_name(k),
                    net_algo_name(c->force_algo));
        rc = cli_fail(&err);
        goto out;
    }

    net_table t = { &in, &g, k, &o };
    rc = cli_print_whole(write_table, &t, &err) == SIM_OK ? EXIT_SUCCESS : cli_fail(&err);
out:
    cfg_destroy(cfg);
    return rc;
}
