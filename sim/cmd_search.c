/* parsim search: which layout to run (see search.h).
 *
 *   parsim search [CONFIG.cfg] [KEY=VALUE ...] [--top N] [--jobs N] [--out FILE.csv]
 *                 [--rank time|tokens|cost] [--token-budget N] [--gpus N | --gpus MIN:MAX]
 *                 [--pareto] [--exhaustive] [--emit-overrides] [--emit-sbatch FILE] [--recipe NAME]
 *
 * The config gives the model, the cluster, the sequence length and the
 * global batch; its parallel layout is ignored, except that a searched key
 * given as KEY=VALUE on the command line fixes that dimension.  Unless the
 * config sets them, ddp.overlap_grad_reduce and ddp.overlap_param_gather
 * are on, as in Megatron Bridge's recipes.  The report on stdout is
 * deterministic (the same bytes whatever --jobs); the timing line goes to
 * stderr.  The hand-over of the best layout (handover.h): --emit-overrides
 * prints it, instead of the report, as one line of Megatron Bridge
 * overrides for run_recipe.py; --emit-sbatch FILE writes a Slurm script
 * that runs it (run_recipe.py --recipe NAME, from --recipe).
 */
#include <ctype.h>
#include <inttypes.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bridge_yaml.h"
#include "cli.h"
#include "config.h"
#include "bounds.h"
#include "handover.h"
#include "numparse.h"
#include "opts.h"
#include "progress.h"
#include "search_print.h"

/* --top: more rows than anyone reads, and a bounded ranking buffer. */
#define SEARCH_TOP_MAX 1000000

typedef struct search_ctx {
    const run_inputs *in;
    const search_opts *o;
    const search_result *r;
} search_ctx;

static int report_writer(FILE *out, void *ctx, sim_err *err)
{
    (void)err;
    const search_ctx *c = ctx;
    search_print(out, c->in, c->o, c->r);
    return SIM_OK;
}

static int csv_writer(FILE *out, void *ctx, sim_err *err)
{
    (void)err;
    const search_ctx *c = ctx;
    search_write_csv(out, c->in, c->o, c->r);
    return SIM_OK;
}

/* The best layout, resolved, and the recipe it runs with. */
typedef struct plan_ctx {
    run_inputs in;
    strategy_t s;
    const char *recipe;
} plan_ctx;

static int overrides_writer(FILE *out, void *ctx, sim_err *err)
{
    (void)err;
    plan_ctx *p = ctx;
    handover_overrides(out, &p->in, HANDOVER_BRIDGE);
    fputc('\n', out);
    return SIM_OK;
}

static int sbatch_writer(FILE *out, void *ctx, sim_err *err)
{
    plan_ctx *p = ctx;
    return handover_sbatch(out, &p->in, &p->s, p->recipe, err);
}

static void on_progress(void *ctx, int64_t done, int64_t total)
{
    progress_t *p = ctx;
    p->total = (long)total;
    progress_update(p, (long)done);
}

/* --gpus N or MIN:MAX, each in 1..LIMIT_GPUS, MIN <= MAX. */
static int gpus_arg(const char *v, int64_t *lo, int64_t *hi)
{
    const char *colon = strchr(v, ':');
    char first[32];
    size_t n = colon ? (size_t)(colon - v) : strlen(v);
    if (n >= sizeof first)
        return cli_usage_error("--gpus needs N or MIN:MAX, whole numbers in 1..%lld, got '%s'",
                               LIMIT_GPUS, v);
    memcpy(first, v, n);
    first[n] = '\0';
    long long a = 0, b = 0;
    int rc = cli_int_arg("--gpus", first, 1, LIMIT_GPUS, &a);
    if (!rc)
        rc = colon ? cli_int_arg("--gpus", colon + 1, 1, LIMIT_GPUS, &b) : (b = a, 0);
    if (rc)
        return rc;
    if (a > b)
        return cli_usage_error("--gpus MIN:MAX: MIN (%lld) is above MAX (%lld)", a, b);
    *lo = a;
    *hi = b;
    return 0;
}

/* --schedules NAME[,NAME...] | all: the pipeline schedules searched. */
static int schedules_arg(const char *v, unsigned *out)
{
    *out = 0;
    if (!strcmp(v, "all")) {
        *out = (1u << SCHED_NAMES) - 1;
        return 0;
    }
    for (const char *p = v;;) {
        size_t n = strcspn(p, ",");
        int found = -1;
        for (int k = 0; k < SCHED_NAMES; k++)
            if (strlen(sched_name_str((sched_name)k)) == n && !strncmp(p, sched_name_str((sched_name)k), n))
                found = k;
        if (found < 0) {
            /* Named as given, up to 40 bytes, anything but printable ASCII
             * as '?': the message stays one short line. */
            char name[41];
            size_t k = 0;
            for (; k < n && k < sizeof name - 1; k++)
                name[k] = p[k] >= 0x20 && p[k] < 0x7f ? p[k] : '?';
            name[k] = '\0';
            return cli_usage_error("--schedules: '%s%s' is not a pipeline schedule (megatron, 1f1b, interleaved, "
                                   "zb-h1, zb-v, dualpipev or all)", name, n > k ? "..." : "");
        }
        *out |= 1u << found;
        if (!p[n])
            return 0;
        p += n + 1;
    }
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
    const char *out_path = NULL, *sbatch_path = NULL, *recipe = NULL;
    bool rank_cost = false, emit_overrides = false;
    sim_err err;
    sim_err_clear(&err);
    cfg_t *cfg = cfg_create(NULL);
    if (!cfg) {
        fputs("parsim: out of memory\n", stderr);
        return EXIT_FAILURE;
    }
    int rc = EXIT_SUCCESS;
    bool have_file = false;
    enum {
        O_TOP, O_JOBS, O_OUT, O_RANK, O_TOKEN_BUDGET, O_GPUS, O_SCHEDULES, O_EMIT_SBATCH, O_RECIPE,
        O_EMIT_OVERRIDES, O_HELP, O_H, O_PARETO, O_EXHAUSTIVE, O_FSDP, O_EP_OVERLAP
    };
    static const opts_def defs[] = {
        [O_TOP] = {"--top", "a value"},
        [O_JOBS] = {"--jobs", "a value"},
        [O_OUT] = {"--out", "a value"},
        [O_RANK] = {"--rank", "a value"},
        [O_TOKEN_BUDGET] = {"--token-budget", "a value"},
        [O_GPUS] = {"--gpus", "a value"},
        [O_SCHEDULES] = {"--schedules", "a value"},
        [O_EMIT_SBATCH] = {"--emit-sbatch", "a value"},
        [O_RECIPE] = {"--recipe", "a value"},
        [O_EMIT_OVERRIDES] = {"--emit-overrides", NULL},
        [O_HELP] = {"--help", NULL},
        [O_H] = {"-h", NULL},
        [O_PARETO] = {"--pareto", NULL},
        [O_EXHAUSTIVE] = {"--exhaustive", NULL},
        [O_FSDP] = {"--fsdp", NULL},
        [O_EP_OVERLAP] = {"--ep-overlap", NULL},
    };
    opts_iter it = opts_start(argc, argv, 0, defs, sizeof defs / sizeof defs[0], NULL, NULL);
    const char *a;
    for (int opt; (opt = opts_next(&it, &a)) != OPTS_END;) {
        if (opt == OPTS_FAIL) {
            rc = EXIT_BAD_INPUT;
            goto out;
        }
        if (opt == O_TOP) {
            long long v = 0;
            if ((rc = cli_int_arg("--top", a, 1, SEARCH_TOP_MAX, &v)))
                goto out;
            o.top = (int)v;
        } else if (opt == O_JOBS) {
            if ((rc = cli_jobs_arg("--jobs", a, &o.jobs)))
                goto out;
        } else if (opt == O_OUT) {
            out_path = a;
        } else if (opt == O_EMIT_SBATCH) {
            sbatch_path = a;
        } else if (opt == O_EMIT_OVERRIDES) {
            emit_overrides = true;
        } else if (opt == O_RECIPE) {
            recipe = a;
            if (!handover_recipe_ok(recipe)) {
                rc = cli_usage_error("--recipe needs a recipe name (letters, digits, '_', '.', '-', at most 128), "
                                     "got '%s'", recipe);
                goto out;
            }
        } else if (opt == O_RANK) {
            const char *v = a;
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
        } else if (opt == O_TOKEN_BUDGET) {
            double t = 0;
            if (!num_parse_count(a, &t) || !(t >= 1 && t <= LIMIT_TOKENS)) {
                rc = cli_usage_error("--token-budget needs a number of tokens in 1..%g, decimal: 2T = 2e12 "
                                     "tokens (k, M, G or B, T), got '%s'", LIMIT_TOKENS, a);
                goto out;
            }
            o.token_budget = t;
        } else if (opt == O_GPUS) {
            if ((rc = gpus_arg(a, &o.gpus_min, &o.gpus_max)))
                goto out;
        } else if (opt == O_SCHEDULES) {
            if ((rc = schedules_arg(a, &o.schedules)))
                goto out;
        } else if (opt == O_HELP || opt == O_H) {
            printf("usage: parsim search [CONFIG.cfg] [KEY=VALUE ...] [--top N] [--jobs N] [--out FILE.csv]\n"
                  "                     [--rank time|tokens|cost] [--token-budget N] [--gpus N|MIN:MAX]\n"
                  "                     [--pareto] [--exhaustive] [--fsdp] [--ep-overlap] [--schedules NAME,...|all]\n"
                  "                     [--emit-overrides] [--emit-sbatch FILE] [--recipe NAME]\n"
                  "Ranks every legal TP/PP/VP/CP/EP/ETP/SP/MBS/recompute/cp_comm/distributed-optimizer\n"
                  "layout that fits in memory, beside the rules of thumb.  A searched key given as\n"
                  "KEY=VALUE fixes that dimension.  --gpus MIN:MAX searches the power-of-two multiples\n"
                  "of the node size in the range; --exhaustive simulates every layout that fits (no\n"
                  "time bound); --schedules searches those pipeline schedules (megatron, 1f1b,\n"
                  "interleaved, zb-h1, zb-v, dualpipev: each where it applies; default: the config's\n"
                  "sim.pipeline_schedule alone); --fsdp also tries Megatron-FSDP optim_grads and\n"
                  "optim_grads_params (dopt fsdp2 / fsdp3; the CSV gains a dp_sharding column);\n"
                  "--ep-overlap also tries model.overlap_moe_expert_parallel_comm (off and on\n"
                  "wherever Megatron allows it; an epov column);\n"
                  "--out writes every simulated layout as CSV.  --emit-overrides prints the best\n"
                  "layout as Megatron Bridge overrides (instead of the report); --emit-sbatch writes a\n"
                  "Slurm script running run_recipe.py --recipe NAME with them.  --token-budget counts\n"
                  "tokens, decimal: 2T = 2e12 tokens (k, M, G or B, T; at most %g); --top in 1..%d;\n"
                  "--jobs in 0..4096 (0 = every core); --gpus in\n"
                  "1..%lld.\n",
                  LIMIT_TOKENS, SEARCH_TOP_MAX, LIMIT_GPUS);
            goto out;
        } else if (opt == O_PARETO) {
            o.pareto = true;
        } else if (opt == O_EXHAUSTIVE) {
            o.exhaustive = true;
        } else if (opt == O_FSDP) {
            o.fsdp = true;
        } else if (opt == O_EP_OVERLAP) {
            o.ep_overlap = true;
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
    if (o.schedules && (o.pinned >> SEARCH_DIM_SCHEDULE) & 1u) {
        rc = cli_usage_error("--schedules searches sim.pipeline_schedule, which KEY=VALUE fixes: give one of them");
        goto out;
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

    bridge_notes_warn(cfg_bridge_notes(cfg), stderr);

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
    plan_ctx *plan = NULL;
    if ((emit_overrides || sbatch_path) && res.n_feasible > 0) {
        plan = malloc(sizeof *plan);
        if (!plan) {
            rc = cli_fail(&(sim_err){ .code = SIM_ENOMEM, .msg = "out of memory" });
        } else {
            plan->recipe = recipe;
            if (search_cand_inputs(&in, &res.cands[0], &plan->in, &plan->s, &err) != SIM_OK)
                rc = cli_fail(&err);
        }
    }
    if (rc == EXIT_SUCCESS && cli_print_whole(plan && emit_overrides ? overrides_writer : report_writer,
                                              plan && emit_overrides ? (void *)plan : (void *)&sc, &err) != SIM_OK)
        rc = cli_fail(&err);
    if (rc == EXIT_SUCCESS && plan && sbatch_path && cli_write_file(sbatch_path, sbatch_writer, plan, &err) != SIM_OK)
        rc = cli_fail(&err);
    free(plan);
    if (rc == EXIT_SUCCESS && out_path && cli_write_file(out_path, csv_writer, &sc, &err) != SIM_OK)
        rc = cli_fail(&err);
    if (rc == EXIT_SUCCESS)
        search_print_timing(stderr, &o, &res); /* a failure is the one line on stderr */
    if (rc == EXIT_SUCCESS && res.n_feasible == 0) {
        fputs("parsim: no layout fits in memory\n", stderr);
        rc = EXIT_FAILURE;
    }
    search_result_free(&res);
out:
    cfg_destroy(cfg);
    return rc;
}
