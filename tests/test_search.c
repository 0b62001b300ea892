/* parsim search: listed results are legal and fit, the ranking is ordered,
 * the output does not depend on --jobs, the rules-of-thumb baseline is
 * there for a dense and an MoE model, neither pruning rule (memory bound,
 * time bound) ever drops what simulating everything would keep, and bad
 * input exits 2. */
#define _DEFAULT_SOURCE /* mkstemps */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "search.h"
#include "step.h"
#include "strategy.h"

/* Resolves overrides (NULL-terminated) into in. */
static void resolve(run_inputs *in, const char *const *kv)
{
    sim_err err;
    sim_err_clear(&err);
    cfg_t *cfg = cfg_create(PARSIM_SOURCE_DIR);
    cr_assert_not_null(cfg);
    for (; *kv; kv++)
        cr_assert_eq(cfg_set_override(cfg, *kv, &err), SIM_OK, "%s: %s", *kv, err.msg);
    char buf[1024];
    int rc = cfg_resolve(cfg, in, &err);
    sim_err_format(&err, buf, sizeof buf);
    cr_assert_eq(rc, SIM_OK, "%s", buf);
    in->ddp.overlap_grad_reduce = true;
    in->ddp.overlap_param_gather = true;
    cfg_destroy(cfg);
}

static void search(const run_inputs *in, const search_opts *o, search_result *r)
{
    sim_err err;
    sim_err_clear(&err);
    int rc = search_run(in, o, r, &err);
    cr_assert_eq(rc, SIM_OK, "%s", err.msg);
}

/* A small dense case whose exhaustive search takes well under a second. */
#define SMALL "model.name=llama3-8b", "cluster.topology=dgx-h100", "cluster.num_gpus=8", "model.seq_length=4096", \
              "train.global_batch_size=16", "model.num_layers=8"

static bool same_layout(const search_cand *a, const search_cand *b)
{
    return a->world == b->world && !memcmp(&a->par, &b->par, sizeof a->par) &&
           !memcmp(&a->train, &b->train, sizeof a->train) && !memcmp(&a->ddp, &b->ddp, sizeof a->ddp);
}

/* --- listed results are legal, fit, and simulate as listed --------------- */

Test(search, listed_results_are_legal_and_fit, .timeout = 120)
{
    const char *kv[] = {"model.name=llama3-70b", "cluster.topology=dgx-h100", "cluster.num_gpus=64",
                        "model.seq_length=8192", "train.global_batch_size=128", NULL};
    run_inputs in;
    resolve(&in, kv);
    search_opts o;
    search_opts_default(&o);
    o.top = 5;
    search_result r;
    search(&in, &o, &r);
    cr_assert(r.n_feasible >= 5);
    for (size_t i = 0; i < 5; i++) {
        const search_cand *c = &r.cands[i];
        run_inputs ci;
        strategy_t s;
        sim_err err;
        sim_err_clear(&err);
        cr_assert_eq(search_cand_inputs(&in, c, &ci, &s, &err), SIM_OK, "#%zu: %s", i + 1, err.msg);
        cr_assert_eq(c->status, SEARCH_FEASIBLE);
        cr_assert(c->peak_bytes <= in.cluster.gpu.hbm_capacity_bytes, "#%zu peaks at %g", i + 1, c->peak_bytes);
        step_t *st = NULL;
        cr_assert_eq(step_run(&st, &ci, &s, &err), SIM_OK, "%s", err.msg);
        const step_result *sr = step_result_get(st);
        cr_assert_eq(sr->step_time_s, c->step_time_s, "#%zu: %g vs %g", i + 1, sr->step_time_s, c->step_time_s);
        cr_assert_eq(sr->peak_bytes, c->peak_bytes);
        step_destroy(st);
    }
    cr_assert(r.have_baseline, "no rules-of-thumb baseline");
    search_result_free(&r);
}

/* --- ranking ----------------------------------------------------------------- */

static void check_order(const search_opts *o, const search_result *r)
{
    for (size_t i = 0; i < r->n_cands; i++) {
        cr_assert_eq(r->cands[i].status, i < r->n_feasible ? SEARCH_FEASIBLE : SEARCH_OVER_MEMORY);
        if (i > 0 && i < r->n_feasible)
            cr_assert(search_key(o, &r->cands[i - 1]) <= search_key(o, &r->cands[i]), "rank %zu before %zu", i,
                      i + 1);
    }
}

Test(search, ranked_by_time_and_by_tokens_per_gpu, .timeout = 120)
{
    const char *kv[] = {SMALL, NULL};
    run_inputs in;
    resolve(&in, kv);
    search_opts o;
    search_opts_default(&o);
    o.exhaustive = true;
    o.gpus_min = 8;
    o.gpus_max = 32; /* 8, 16, 32 */
    search_result r;
    search(&in, &o, &r);
    cr_assert_eq(r.n_worlds, 3);
    cr_assert(r.n_feasible > 10);
    check_order(&o, &r);
    /* By step time, more GPUs win; by tokens/s per GPU they need not. */
    cr_assert_eq(r.cands[0].world, 32);
    search_result_free(&r);

    o.rank = SEARCH_RANK_TOKENS;
    search(&in, &o, &r);
    check_order(&o, &r);
    for (size_t i = 1; i < r.n_feasible; i++)
        cr_assert(r.cands[i - 1].tokens_per_s_per_gpu >= r.cands[i].tokens_per_s_per_gpu * (1 - 1e-12));
    search_result_free(&r);
}

/* --- pruning never drops what simulation would keep --------------------------- */

static void check_pruning(const char *const *kv, double cap)
{
    run_inputs in;
    resolve(&in, kv);

    /* Everything, with memory no object: every candidate is simulated. */
    run_inputs roomy = in;
    roomy.cluster.gpu.hbm_capacity_bytes = 1e15;
    search_opts o;
    search_opts_default(&o);
    o.exhaustive = true;
    o.top = 5;
    search_result all;
    search(&roomy, &o, &all);
    cr_assert_eq(all.counts.pruned_memory, 0);
    cr_assert(all.n_cands > 100);
    for (size_t i = 0; i < all.n_cands; i++) {
        const search_cand *c = &all.cands[i];
        cr_assert(c->peak_lb_bytes <= c->peak_bytes, "memory bound %g above the simulated peak %g", c->peak_lb_bytes,
                  c->peak_bytes);
        cr_assert(c->time_lb_s <= c->step_time_s, "time bound %g above the simulated step %g", c->time_lb_s,
                  c->step_time_s);
    }

    /* With a small HBM: whatever fits when simulated must be found. */
    run_inputs tight = in;
    tight.cluster.gpu.hbm_capacity_bytes = cap;
    search_result pruned;
    search(&tight, &o, &pruned);
    cr_assert(pruned.counts.pruned_memory > 0, "the case does not exercise memory pruning");
    size_t fit = 0;
    for (size_t i = 0; i < all.n_cands; i++) {
        if (all.cands[i].peak_bytes > cap)
            continue;
        fit++;
        bool found = false;
        for (size_t j = 0; j < pruned.n_feasible && !found; j++)
            found = same_layout(&all.cands[i], &pruned.cands[j]);
        cr_assert(found, "a layout that fits (peak %g) was pruned", all.cands[i].peak_bytes);
    }
    cr_assert_eq(fit, pruned.n_feasible);

    /* The time bound: the bounded top 5 is the exhaustive top 5. */
    search_opts ob = o;
    ob.exhaustive = false;
    search_result bounded;
    search(&tight, &ob, &bounded);
    cr_assert(bounded.counts.skipped_bound > 0, "the case does not exercise the time bound");
    for (size_t i = 0; i < 5; i++)
        cr_assert(same_layout(&bounded.cands[i], &pruned.cands[i]), "rank %zu differs", i + 1);

    /* The Pareto front with the bound is the front of everything. */
    ob.pareto = true;
    o.pareto = true;
    search_result pb, px;
    search(&tight, &ob, &pb);
    search(&tight, &o, &px);
    cr_assert_eq(pb.n_pareto, px.n_pareto);
    for (size_t i = 0; i < pb.n_pareto; i++)
        cr_assert(same_layout(&pb.cands[pb.pareto[i]], &px.cands[px.pareto[i]]), "front point %zu differs", i);
    search_result_free(&pb);
    search_result_free(&px);
    search_result_free(&bounded);
    search_result_free(&pruned);
    search_result_free(&all);
}

Test(search, bounds_are_lower_bounds_and_pruning_is_safe, .timeout = 300)
{
    const char *dense[] = {SMALL, NULL};
    check_pruning(dense, 24e9);
    const char *moe[] = {"model.name=mixtral-8x7b", "cluster.topology=dgx-h100", "cluster.num_gpus=8",
                         "model.seq_length=4096", "train.global_batch_size=16", "model.num_layers=4", NULL};
    check_pruning(moe, 40e9);
    /* 7 layers: PP 2 and 4 only with uneven stages. */
    const char *uneven[] = {"model.name=llama3-8b", "cluster.topology=dgx-h100", "cluster.num_gpus=8",
                            "model.seq_length=4096", "train.global_batch_size=16", "model.num_layers=7", NULL};
    check_pruning(uneven, 20e9);
}

/* --- uneven pipeline stages ------------------------------------------------ */

Test(search, layer_splits_are_legal)
{
    const char *kv[] = {"model.name=deepseek-v3", "cluster.topology=dgx-h100", "cluster.num_gpus=256",
                        "train.global_batch_size=1024", NULL};
    run_inputs in;
    resolve(&in, kv);
    parallel_spec p = in.par;
    cr_assert(strategy_split_layers(&in.model, 1, 0, &p));
    cr_assert_eq(p.num_layers_in_first_pipeline_stage, 0);
    /* 61 layers on 8 stages: 8 on the middle six, 7 first, 6 last. */
    cr_assert(strategy_split_layers(&in.model, 8, 0, &p));
    cr_assert_eq(p.num_layers_in_first_pipeline_stage, 7);
    cr_assert_eq(p.num_layers_in_last_pipeline_stage, 6);
    cr_assert(!strategy_split_layers(&in.model, 8, 2, &p), "61 layers cannot interleave in twos");
    cr_assert(!strategy_split_layers(&in.model, 32, 0, &p), "61 layers have no split over 32 stages");
    for (int64_t pp = 2; pp <= 16; pp *= 2) {
        search_cand c;
        memset(&c, 0, sizeof c);
        c.world = 256;
        c.par = in.par;
        c.train = in.train;
        c.ddp = in.ddp;
        c.ddp.use_distributed_optimizer = true;
        c.par.pp = pp;
        c.par.ep = 8;
        c.par.etp = 1;
        cr_assert(strategy_split_layers(&in.model, pp, 0, &c.par), "PP %lld", (long long)pp);
        run_inputs ci;
        strategy_t s;
        sim_err err;
        sim_err_clear(&err);
        cr_assert_eq(search_cand_inputs(&in, &c, &ci, &s, &err), SIM_OK, "PP %lld: %s", (long long)pp, err.msg);
        int64_t first, count, total = 0;
        for (int64_t r = 0; r < pp; r++) {
            strategy_chunk_layers(&s, r, 0, &first, &count);
            total += count;
        }
        cr_assert_eq(total, 61);
    }
    /* An even split stays even; the embedding and loss count where that
     * evens it out (30 layers + 2 on 8 stages). */
    in.model.num_layers = 80;
    cr_assert(strategy_split_layers(&in.model, 16, 5, &p));
    cr_assert(!p.num_layers_in_first_pipeline_stage && !p.account_for_embedding_in_pipeline_split);
    in.model.num_layers = 30;
    cr_assert(strategy_split_layers(&in.model, 8, 0, &p));
    cr_assert(p.account_for_embedding_in_pipeline_split && p.account_for_loss_in_pipeline_split);
}

/* --- pinned dimensions ---------------------------------------------------- */

Test(search, pinned_dimension_keeps_the_given_value)
{
    const char *kv[] = {SMALL, "model.context_parallel_size=2", NULL};
    run_inputs in;
    resolve(&in, kv);
    search_opts o;
    search_opts_default(&o);
    o.pinned = 1u << SEARCH_DIM_CP;
    search_result r;
    search(&in, &o, &r);
    cr_assert(r.n_feasible > 0);
    for (size_t i = 0; i < r.n_cands; i++)
        cr_assert_eq(r.cands[i].par.cp, 2);
    search_result_free(&r);
    cr_assert_eq(search_dim_of_key("model.context_parallel_size"), SEARCH_DIM_CP);
    cr_assert_eq(search_dim_of_key("model.hidden_size"), -1);
}

/* --- the rules-of-thumb baseline --------------------------------------------- */

Test(search, baseline_for_dense_and_moe, .timeout = 120)
{
    const char *dense[] = {"model.name=llama3-70b", "cluster.topology=dgx-h100", "cluster.num_gpus=64",
                           "model.seq_length=8192", "train.global_batch_size=128", NULL};
    run_inputs in;
    resolve(&in, dense);
    heur_plan p;
    heur_baseline(&in, 64, &p);
    cr_assert(p.legal && p.fits);
    cr_assert_eq(p.par.tp, 8, "TP inside the NVLink domain for a 70B model");
    cr_assert_eq(p.par.cp, 2, "CP 2 from 8K tokens");
    cr_assert(p.par.sequence_parallel, "SP from 2K tokens");
    cr_assert(p.ddp.use_distributed_optimizer);
    cr_assert(p.n_notes > 0);

    const char *moe[] = {"model.name=mixtral-8x7b", "cluster.topology=dgx-h100", "cluster.num_gpus=64",
                         "model.seq_length=4096", "train.global_batch_size=256", NULL};
    resolve(&in, moe);
    heur_baseline(&in, 64, &p);
    cr_assert(p.legal && p.fits);
    cr_assert_eq(p.par.ep, 8, "EP inside the NVLink domain");
    cr_assert_eq(p.par.etp, 1);
    /* The search with its baseline, on fewer layers to keep the test short. */
    const char *moe8[] = {"model.name=mixtral-8x7b", "cluster.topology=dgx-h100", "cluster.num_gpus=64",
                          "model.seq_length=4096", "train.global_batch_size=256", "model.num_layers=8", NULL};
    resolve(&in, moe8);
    search_opts o;
    search_opts_default(&o);
    o.top = 3;
    search_result r;
    search(&in, &o, &r);
    cr_assert(r.n_feasible >= 3);
    cr_assert(r.have_baseline);
    cr_assert_eq(r.baseline_run.par.ep, 8);
    cr_assert(r.baseline_run.step_time_s >= r.cands[0].step_time_s,
              "the searched best is slower than the baseline it could have found");
    search_result_free(&r);

    /* 32K tokens: CP 4 with hierarchical a2a+p2p. */
    const char *longseq[] = {"model.name=llama3-70b", "cluster.topology=dgx-h100", "cluster.num_gpus=128",
                             "model.seq_length=32768", "train.global_batch_size=64", NULL};
    resolve(&in, longseq);
    heur_baseline(&in, 128, &p);
    cr_assert(p.legal);
    cr_assert_eq(p.par.cp, 4);
    cr_assert_eq(p.par.cp_comm_type, CP_COMM_A2A_P2P);
}

/* --- the command line ------------------------------------------------------------ */

typedef struct result {
    int status;
    char *out;   /* stdout only */
    size_t len;
} result;

static void run(result *r, const char *args)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' search %s 2>/dev/null", PARSIM_SOURCE_DIR, PARSIM_BINARY, args);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t cap = 1 << 16;
    r->out = malloc(cap);
    r->len = 0;
    size_t n;
    while ((n = fread(r->out + r->len, 1, cap - r->len - 1, p)) > 0) {
        r->len += n;
        if (r->len + 1 == cap)
            r->out = realloc(r->out, cap *= 2);
    }
    r->out[r->len] = '\0';
    int st = pclose(p);
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    cr_assert_eq(fread(b, 1, (size_t)n, f), (size_t)n);
    b[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    return b;
}

#define CLI_SMALL \
    "model.name=llama3-8b cluster.topology=dgx-h100 model.seq_length=4096 train.global_batch_size=16 model.num_layers=8 "

Test(search_cli, jobs_do_not_change_the_output, .timeout = 300)
{
    const char *cases[] = {
        CLI_SMALL "--gpus 8:32 --exhaustive --pareto --top 7",
        CLI_SMALL "cluster.num_gpus=16 --top 4 --rank tokens --token-budget 1T",
        "model.name=mixtral-8x7b cluster.topology=dgx-h100 cluster.num_gpus=16 model.seq_length=4096 "
        "train.global_batch_size=64 model.num_layers=8 --top 3",
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char p1[] = "/tmp/parsim_search_XXXXXX.csv", p2[] = "/tmp/parsim_search_XXXXXX.csv";
        int f1 = mkstemps(p1, 4), f2 = mkstemps(p2, 4);
        cr_assert(f1 >= 0 && f2 >= 0);
        close(f1);
        close(f2);
        char args[1024];
        result a, b;
        snprintf(args, sizeof args, "%s --jobs 1 --out %s", cases[k], p1);
        run(&a, args);
        snprintf(args, sizeof args, "%s --jobs 2 --out %s", cases[k], p2);
        run(&b, args);
        cr_assert_eq(a.status, 0, "%s: %s", cases[k], a.out);
        cr_assert_eq(b.status, 0, "%s: %s", cases[k], b.out);
        cr_assert(a.len == b.len && !memcmp(a.out, b.out, a.len), "%s: --jobs 2 printed something else", cases[k]);
        cr_assert(strstr(a.out, "rules of thumb") != NULL, "%s", a.out);
        size_t l1, l2;
        char *c1 = slurp(p1, &l1), *c2 = slurp(p2, &l2);
        cr_assert(l1 == l2 && !memcmp(c1, c2, l1), "%s: --jobs 2 wrote another CSV", cases[k]);
        cr_assert(strncmp(c1, "kind,rank,", 10) == 0);
        free(c1);
        free(c2);
        free(a.out);
        free(b.out);
        remove(p1);
        remove(p2);
    }
}

Test(search_cli, bad_input_exits_2, .timeout = 60)
{
    const char *bad[] = {
        CLI_SMALL "cluster.num_gpus=8 --top 0",
        CLI_SMALL "cluster.num_gpus=8 --jobs x",
        CLI_SMALL "cluster.num_gpus=8 --rank speed",
        CLI_SMALL "cluster.num_gpus=8 --rank cost",
        CLI_SMALL "--gpus 3:5",
        CLI_SMALL "--gpus 0",
        CLI_SMALL "--gpus 64:8",
        CLI_SMALL "cluster.num_gpus=8 --token-budget lots",
        CLI_SMALL "cluster.num_gpus=8 --frobnicate",
        CLI_SMALL "cluster.num_gpus=8 model.hiden_size=4096",
        CLI_SMALL "cluster.num_gpus=8 --top",
        "configs/no-such-file.cfg",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        result r;
        run(&r, bad[i]);
        cr_expect_eq(r.status, 2, "`%s` exited %d", bad[i], r.status);
        free(r.out);
    }
}

Test(search_cli, nothing_fits_exits_1)
{
    result r;
    run(&r, CLI_SMALL "cluster.num_gpus=8 cluster.gpu.hbm_gbytes=1");
    cr_assert_eq(r.status, 1, "%s", r.out);
    cr_assert(strstr(r.out, "no layout fits") != NULL, "%s", r.out);
    free(r.out);
}
