/* parsim search: which layout to run (see search.h).
 *
 *   parsim search [CONFIG.cfg] [KEY=VALUE ...] [--top N] [--jobs N] [--out FILE.csv]
 *                 [--rank time|tokens|cost] [--token-budget N] [--gpus N | --gpus MIN:MAX]
 *                 [--pareto] [--exhaustive]
 *
 * The config gives the model, the cluster, the sequence length and the
 * global batch; its parallel layout is ignored, except that a searched key
 * given as KEY=VALUE on the command line fixes that dimension.  Unless the
 * config sets them, ddp.overlap_grad_reduce and ddp.overlap_param_gather
 * are on, as in Megatron Bridge's recipes.  The report on stdout is
 * deterministic (the same bytes whatever --jobs); the timing line goes to
 * stderr.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "config.h"
#include "progress.h"
#include "search.h"

typedef struct search_ctx {
    const run_inputs *in;
    const search_opts *o;
    const search_result *r;
} search_ctx;

static void report_writer(FILE *out, void *ctx)
{
    const search_ctx *c = ctx;
    search_print(out, c->in, c->o, c->r);
}

static void csv_writer(FILE *out, void *ctx)
{
    const search_ctx *c = ctx;
    search_write_csv(out, c->in, c->o, c->r);
}

static void on_progress(void *ctx, int64_t done, int64_t total)
{
    progress_t *p = ctx;
    p->total = (long)total;
    progress_update(p, (long)done);
}

static bool parse_i64(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < 1)
        return false;
    *out = v;
    return true;
}

/* A positive count with an optional k, M, B/G or T suffix ("2T", "1e12"). */
static bool parse_amount(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !(v > 0))
        return false;
    double mul = 1;
    if (*end) {
        switch (*end) {
        case 'k': case 'K': mul = 1e3; break;
        case 'm': case 'M': mul = 1e6; break;
        case 'b': case 'B': case 'g': case 'G': mul = 1e9; break;
        case 't': case 'T': mul = 1e12; break;
        default: return false;
        }
        if (end[1])
            return false;
    }
    *out = v * mul;
    return true;
}

/* The searched dimension a KEY=VALUE argument fixes, or -1. */
static int pinned_dim(const char *arg)
{
    const char *eq = strchr(arg, '=');
    char key[128];
    size_t n = (size_t)(eq - arg);
    while (n > 0 && isspace((unsigned char)arg[n - 1]))
        n--;
    if (n >= sizeof key)
        return -1;
    memcpy(key, arg, n);
    key[n] = '\0';
    return search_dim_of_key(key);
}

int cmd_search(int argc, char **argv)
{
    search_opts o;
    search_opts_default(&o);
    const char *out_path = NULL;
    bool rank_cost = false;
    sim_err err;
    sim_err_clear(&err);
    cfg_t *cfg = cfg_create(NULL);
    if (!cfg) {
        fputs("parsim: out of memory\n", stderr);
        return EXIT_FAILURE;
    }
    int rc = EXIT_SUCCESS;
    bool have_file = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        bool takes_value = !strcmp(a, "--top") || !strcmp(a, "--jobs") || !strcmp(a, "--out") ||
                           !strcmp(a, "--rank") || !strcmp(a, "--token-budget") || !strcmp(a, "--gpus");
        if (takes_value && i + 1 >= argc) {
            rc = cli_usage_error("%s needs a value", a);
            goto out;
        }
        if (!strcmp(a, "--top")) {
            long long v = 0;
            if ((rc = cli_int_arg(a, argv[++i], 1, 1000000, &v)))
                goto out;
            o.top = (int)v;
        } else if (!strcmp(a, "--jobs")) {
            if ((rc = cli_jobs_arg(a, argv[++i], &o.jobs)))
                goto out;
        } else if (!strcmp(a, "--out")) {
            out_path = argv[++i];
        } else if (!strcmp(a, "--rank")) {
            const char *v = argv[++i];
            if (!strcmp(v, "time"))
                o.rank = SEARCH_RANK_TIME;
            else if (!strcmp(v, "tokens"))
                o.rank = SEARCH_RANK_TOKENS;
            else if (!strcmp(v, "cost")) {
                o.rank = SEARCH_RANK_COST;
                rank_cost = true;
            } else {
                rc = cli_usage_error("--rank: unknown ranking '%s' (time, tokens or cost)", v);
                goto out;
            }
        } else if (!strcmp(a, "--token-budget")) {
            if (!parse_amount(argv[++i], &o.token_budget)) {
                rc = cli_usage_error("--token-budget: expected a positive number of tokens (e.g. 1e12 or 1T), "
                                     "got '%s'", argv[i]);
                goto out;
            }
        } else if (!strcmp(a, "--gpus")) {
            const char *v = argv[++i];
            const char *colon = strchr(v, ':');
            bool ok;
            if (colon) {
                char lo[32];
                size_t n = (size_t)(colon - v);
                ok = n < sizeof lo;
                if (ok) {
                    memcpy(lo, v, n);
                    lo[n] = '\0';
                    ok = parse_i64(lo, &o.gpus_min) && parse_i64(colon + 1, &o.gpus_max) &&
                         o.gpus_min <= o.gpus_max;
                }
            } else {
                ok = parse_i64(v, &o.gpus_min);
                o.gpus_max = o.gpus_min;
            }
            if (!ok) {
                rc = cli_usage_error("--gpus: expected N or MIN:MAX with 1 <= MIN <= MAX, got '%s'", v);
                goto out;
            }
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs("usage: parsim search [CONFIG.cfg] [KEY=VALUE ...] [--top N] [--jobs N] [--out FILE.csv]\n"
                  "                     [--rank time|tokens|cost] [--token-budget N] [--gpus N|MIN:MAX]\n"
                  "                     [--pareto] [--exhaustive]\n"
                  "Ranks every legal TP/PP/VP/CP/EP/ETP/SP/MBS/recompute/cp_comm/distributed-optimizer\n"
                  "layout that fits in memory, beside the rules of thumb.  A searched key given as\n"
                  "KEY=VALUE fixes that dimension.  --gpus MIN:MAX searches the power-of-two multiples\n"
                  "of the node size in the range; --exhaustive simulates every layout that fits (no\n"
                  "time bound); --out writes every simulated layout as CSV.\n",
                  stdout);
            goto out;
        } else if (!strcmp(a, "--pareto")) {
            o.pareto = true;
        } else if (!strcmp(a, "--exhaustive")) {
            o.exhaustive = true;
        } else if (a[0] == '-' && a[1] == '-') {
            rc = cli_usage_error("unknown option '%s'", a);
            goto out;
        } else {
            if (cli_config_arg(cfg, a, &have_file, &err) != SIM_OK) {
                rc = cli_fail(&err);
                goto out;
            }
            if (strchr(a, '=')) {
                int d = pinned_dim(a);
                if (d >= 0)
                    o.pinned |= 1u << d;
            }
        }
    }
    if (rank_cost && !(o.token_budget > 0)) {
        rc = cli_usage_error("--rank cost needs --token-budget N (tokens to train on)");
        goto out;
    }
    if (o.gpus_min > 0) {
        /* The GPU counts come from --gpus; cluster.num_gpus only has to be
         * a valid count for the config to resolve. */
        char kv[64];
        snprintf(kv, sizeof kv, "cluster.num_gpus=%" PRId64, o.gpus_min);
        if (cfg_set_override(cfg, kv, &err) != SIM_OK) {
            rc = cli_fail(&err);
            goto out;
        }
    }

    run_inputs in;
    if (cfg_resolve(cfg, &in, &err) != SIM_OK) {
        rc = cli_fail(&err);
        goto out;
    }
    if (!cfg_origin(cfg, "ddp.overlap_grad_reduce", NULL, NULL))
        in.ddp.overlap_grad_reduce = true;
    if (!cfg_origin(cfg, "ddp.overlap_param_gather", NULL, NULL))
        in.ddp.overlap_param_gather = in.ddp.overlap_grad_reduce;

#ifdef __GLIBC__
    /* Every simulation allocates and frees arrays of tens of MB.  Above
     * glibc's mmap threshold each would be a fresh mapping whose pages
     * fault in again (a fifth of the search time); served from the heap
     * and kept there, they are reused by the next simulation. */
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
    progress_t prog;
    progress_start(&prog, 0, 0, "search");
    o.on_progress = on_progress;
    o.progress_ctx = &prog;
    search_result res;
    int src = search_run(&in, &o, &res, &err);
    progress_end(&prog);
    if (src != SIM_OK) {
        rc = cli_fail(&err);
        goto out;
    }

    search_ctx sc = {&in, &o, &res};
    if (cli_print_whole(report_writer, &sc, &err) != SIM_OK)
        rc = cli_fail(&err);
    search_print_timing(stderr, &o, &res);
    if (rc == EXIT_SUCCESS && out_path && cli_write_file(out_path, csv_writer, &sc, &err) != SIM_OK)
        rc = cli_fail(&err);
    if (rc == EXIT_SUCCESS && res.n_feasible == 0) {
        fputs("parsim: no layout fits in memory\n", stderr);
        rc = EXIT_FAILURE;
    }
    search_result_free(&res);
out:
    cfg_destroy(cfg);
    return rc;
}
