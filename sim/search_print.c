/* search_print: the search's results for people and for tools (contract
 * in search_print.h).  Both forms read only the search_result: nothing
 * here simulates, and the text holds no wall-clock figure (only
 * search_print_timing does), so it is the same for any --jobs. */
#include "search_print.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "handover.h"
#include "model.h"
#include "streams.h"
#include "units.h"

static const char *recompute_name(recompute_kind k)
{
    return k == RECOMPUTE_FULL ? "full" : k == RECOMPUTE_SELECTIVE ? "selective" : "none";
}

static void cp_comm_str(const search_cand *c, char *buf, size_t len)
{
    const parallel_spec *p = &c->par;
    if (p->cp <= 1) {
        snprintf(buf, len, "-");
        return;
    }
    switch (p->cp_comm_type) {
    case CP_COMM_P2P: snprintf(buf, len, "p2p"); break;
    case CP_COMM_ALL_GATHER: snprintf(buf, len, "all_gather"); break;
    case CP_COMM_A2A: snprintf(buf, len, "a2a"); break;
    case CP_COMM_A2A_P2P:
        if (p->n_hierarchical_cp_sizes == 2)
            snprintf(buf, len, "a2a+p2p:%" PRId64 "x%" PRId64, p->hierarchical_cp_sizes[0],
                     p->hierarchical_cp_sizes[1]);
        else
            snprintf(buf, len, "a2a+p2p");
        break;
    }
}

/* The layer split of a candidate: "even", "emb+loss" (embedding and loss
 * counted as layers), "7/../6" (layers on the first / last stage). */
static void split_str(const search_cand *c, char *buf, size_t len)
{
    const parallel_spec *p = &c->par;
    if (p->num_layers_in_first_pipeline_stage || p->num_layers_in_last_pipeline_stage)
        snprintf(buf, len, "%" PRId64 "/../%" PRId64, p->num_layers_in_first_pipeline_stage,
                 p->num_layers_in_last_pipeline_stage);
    else if (p->account_for_embedding_in_pipeline_split || p->account_for_loss_in_pipeline_split)
        snprintf(buf, len, "%s%s%s", p->account_for_embedding_in_pipeline_split ? "emb" : "",
                 p->account_for_embedding_in_pipeline_split && p->account_for_loss_in_pipeline_split ? "+" : "",
                 p->account_for_loss_in_pipeline_split ? "loss" : "");
    else
        snprintf(buf, len, "even");
}

static int64_t vp_of(const search_cand *c)
{
    return c->par.vp > 1 ? c->par.vp : 1;
}

static int64_t etp_of(const search_cand *c)
{
    return c->par.etp ? c->par.etp : c->par.tp;
}

/* The distributed-optimizer column: on, off, or Megatron-FSDP's ZeRO stage. */
static const char *dopt_name(const search_cand *c)
{
    static const char *const fsdp[] = {"fsdp0", "fsdp1", "fsdp2", "fsdp3"};
    if (c->ddp.use_megatron_fsdp && c->ddp.sharding >= 0 && c->ddp.sharding <= DP_SHARD_OPTIM_GRADS_PARAMS)
        return fsdp[c->ddp.sharding];
    return c->ddp.use_distributed_optimizer ? "on" : "off";
}

static double gpu_hours(const run_inputs *b, const search_opts *o, const search_cand *c)
{
    double tokens_per_step = (double)b->train.global_batch_size * (double)b->model.seq_length;
    return o->token_budget / tokens_per_step * c->step_time_s * (double)c->world / 3600.0;
}

/* The table's columns of exposed time: its communication streams, EP's
 * only for MoE models. */
static bool exposed_column(stream_kind k, bool moe)
{
    return streams_is_comm(k) && (moe || k != STREAM_EP);
}

/* The table names the schedule when it is not Megatron's everywhere. */
static bool schedule_column(const run_inputs *b, const search_opts *o)
{
    return o->schedules || b->par.pipeline_schedule != SCHED_MEGATRON;
}

/* ... and the EP overlap when it is searched or asked for. */
static bool ep_overlap_column(const run_inputs *b, const search_opts *o)
{
    return o->ep_overlap || b->par.overlap_moe_ep_comm;
}

static void table_header(FILE *out, const run_inputs *b, const search_opts *o, bool moe)
{
    fprintf(out, "%-8s %5s %3s %3s %-8s %3s %3s", "rank", "GPUs", "TP", "PP", "split", "VP", "CP");
    if (moe)
        fprintf(out, " %4s %3s", "EP", "ETP");
    fprintf(out, " %3s %3s %-9s %-14s %4s %9s %9s %5s %8s %8s %7s", "SP", "MBS", "recompute", "cp_comm",
            "dopt", "step s", "tok/s/GPU", "MFU%", "peak GiB", "free GiB", "bubble%");
    if (schedule_column(b, o))
        fprintf(out, " %-11s", "schedule");
    if (ep_overlap_column(b, o))
        fprintf(out, " %-4s", "epov");
    if (o->token_budget > 0)
        fprintf(out, " %10s", "GPU-hours");
    fputs("  exposed s:", out);
    for (int k = 0; k < STREAM_KINDS; k++)
        if (exposed_column((stream_kind)k, moe))
            fprintf(out, " %6s", stream_kind_name((stream_kind)k));
    fputc('\n', out);
}

static void table_row(FILE *out, const char *label, const run_inputs *b, const search_opts *o,
                      const search_result *r, const search_cand *c, bool moe)
{
    char cpc[32], split[32];
    cp_comm_str(c, cpc, sizeof cpc);
    split_str(c, split, sizeof split);
    fprintf(out, "%-8s %5" PRId64 " %3" PRId64 " %3" PRId64 " %-8s %3" PRId64 " %3" PRId64, label, c->world,
            c->par.tp, c->par.pp, split, vp_of(c), c->par.cp);
    if (moe)
        fprintf(out, " %4" PRId64 " %3" PRId64, c->par.ep, etp_of(c));
    fprintf(out, " %3s %3" PRId64 " %-9s %-14s %4s %9.3f %9.1f %5.1f %8.2f %8.2f %7.1f",
            c->par.sequence_parallel ? "on" : "off", c->train.micro_batch_size,
            recompute_name(c->par.recompute_granularity), cpc, dopt_name(c),
            c->step_time_s, c->tokens_per_s_per_gpu, 100.0 * c->mfu, c->peak_bytes / GIB,
            (r->capacity_bytes - c->peak_bytes) / GIB, 100.0 * c->bubble_fraction);
    if (schedule_column(b, o))
        fprintf(out, " %-11s", sched_name_str(c->par.pipeline_schedule));
    if (ep_overlap_column(b, o))
        fprintf(out, " %-4s", c->par.overlap_moe_ep_comm ? "on" : "off");
    if (o->token_budget > 0)
        fprintf(out, " %10.0f", gpu_hours(b, o, c));
    fputs("            ", out);
    for (int k = 0; k < STREAM_KINDS; k++)
        if (exposed_column((stream_kind)k, moe))
            fprintf(out, " %6.3f", c->exposed_s[k]);
    fputc('\n', out);
}

/* "TP 4 -> 8, VP 5 -> 1": the settings in which b differs from a. */
static void diff_str(const search_cand *a, const search_cand *b, bool moe, char *buf, size_t len)
{
    size_t w = 0;
    buf[0] = '\0';
#define DIFF_INT(name, x, y)                                                                          \
    if ((x) != (y) && w < len)                                                                        \
    w += (size_t)snprintf(buf + w, len - w, "%s%s %" PRId64 " -> %" PRId64, w ? ", " : "", name, (int64_t)(x), \
                          (int64_t)(y))
#define DIFF_STR(name, x, y)                                                                          \
    if (strcmp((x), (y)) && w < len)                                                                  \
    w += (size_t)snprintf(buf + w, len - w, "%s%s %s -> %s", w ? ", " : "", name, (x), (y))
    DIFF_INT("GPUs", a->world, b->world);
    DIFF_INT("TP", a->par.tp, b->par.tp);
    DIFF_INT("PP", a->par.pp, b->par.pp);
    char sa[32], sb[32];
    split_str(a, sa, sizeof sa);
    split_str(b, sb, sizeof sb);
    DIFF_STR("layer split", sa, sb);
    DIFF_INT("VP", vp_of(a), vp_of(b));
    DIFF_INT("CP", a->par.cp, b->par.cp);
    if (moe) {
        DIFF_INT("EP", a->par.ep, b->par.ep);
        DIFF_INT("ETP", etp_of(a), etp_of(b));
    }
    DIFF_STR("SP", a->par.sequence_parallel ? "on" : "off", b->par.sequence_parallel ? "on" : "off");
    DIFF_INT("MBS", a->train.micro_batch_size, b->train.micro_batch_size);
    DIFF_STR("recompute", recompute_name(a->par.recompute_granularity),
             recompute_name(b->par.recompute_granularity));
    char ca[32], cb[32];
    cp_comm_str(a, ca, sizeof ca);
    cp_comm_str(b, cb, sizeof cb);
    DIFF_STR("cp_comm", ca, cb);
    DIFF_STR("distributed optimizer", dopt_name(a), dopt_name(b));
    DIFF_STR("schedule", sched_name_str(a->par.pipeline_schedule), sched_name_str(b->par.pipeline_schedule));
    DIFF_STR("EP overlap", a->par.overlap_moe_ep_comm ? "on" : "off", b->par.overlap_moe_ep_comm ? "on" : "off");
#undef DIFF_INT
#undef DIFF_STR
    if (!w)
        snprintf(buf, len, "nothing searched");
}

typedef struct component {
    const char *what;  /* "in the pipeline bubble", ... */
    double a, b;
} component;

static int cmp_component(const void *x, const void *y)
{
    const component *p = x, *q = y;
    double dp = fabs(p->b - p->a), dq = fabs(q->b - q->a);
    return dp > dq ? -1 : dp < dq;
}

/* The reasons a beats b, largest measured differences first. */
static void reasons(FILE *out, const char *na, const search_cand *a, const char *nb, const search_cand *b,
                    double cap, bool moe)
{
    char diff[512];
    diff_str(a, b, moe, diff, sizeof diff);
    double dt = b->step_time_s - a->step_time_s;
    fprintf(out, "%s differs from %s in: %s\n", nb, na, diff);
    if (dt <= 0) {
        fprintf(out, "  both simulate %.3f s per step; %s ranks first on fewer GPUs, then less memory, "
                     "then search order\n", a->step_time_s, na);
    } else {
        fprintf(out, "  %s is %.3f s (%.1f%%) faster per step: %.3f s vs %.3f s\n", na, dt,
                100.0 * dt / b->step_time_s, a->step_time_s, b->step_time_s);
    }
    component comp[] = {
        {"in the pipeline bubble", a->bubble_s, b->bubble_s},
        {"of exposed TP communication", a->exposed_s[STREAM_TP], b->exposed_s[STREAM_TP]},
        {"of exposed CP communication", a->exposed_s[STREAM_CP], b->exposed_s[STREAM_CP]},
        {"of exposed EP communication", a->exposed_s[STREAM_EP], b->exposed_s[STREAM_EP]},
        {"of exposed DP communication", a->exposed_s[STREAM_DP], b->exposed_s[STREAM_DP]},
        {"of exposed PP communication", a->exposed_s[STREAM_PP], b->exposed_s[STREAM_PP]},
        {"of compute on the busiest stage", a->compute_s, b->compute_s},
    };
    const size_t n = sizeof comp / sizeof comp[0];
    qsort(comp, n, sizeof comp[0], cmp_component);
    int shown = 0;
    for (size_t i = 0; i < n && shown < 4; i++) {
        double d = comp[i].b - comp[i].a;
        if (fabs(d) < 5e-4)
            break;
        fprintf(out, "  - %s%.3f s %s %s (%.3f s vs %.3f s)", d > 0 ? "" : "but ", fabs(d),
                d > 0 ? "less" : "more", comp[i].what, comp[i].a, comp[i].b);
        if (!strcmp(comp[i].what, "of compute on the busiest stage") &&
            a->par.recompute_granularity != b->par.recompute_granularity)
            fprintf(out, ": recompute %s vs %s", recompute_name(a->par.recompute_granularity),
                    recompute_name(b->par.recompute_granularity));
        fputc('\n', out);
        shown++;
    }
    if (!shown)
        fputs("  - no component differs by 0.5 ms or more\n", out);
    fprintf(out, "  - memory: %s peaks at %.1f GiB (%.1f GiB free), %s at %.1f GiB (%.1f GiB free)\n", na,
            a->peak_bytes / GIB, (cap - a->peak_bytes) / GIB, nb, b->peak_bytes / GIB,
            (cap - b->peak_bytes) / GIB);
}

static void print_counts(FILE *out, const search_result *r)
{
    const search_counts *c = &r->counts;
    fprintf(out, "searched %" PRId64 " layouts: %" PRId64 " illegal, %" PRId64 " equivalent to another, %" PRId64
                 " pruned by memory before simulation (lower bound above %.1f GiB), %" PRId64
                 " skipped by the time bound, %" PRId64 " simulated (%" PRId64 " fit, %" PRId64 " over HBM",
            c->enumerated, c->illegal, c->duplicate, c->pruned_memory, r->capacity_bytes / GIB, c->skipped_bound,
            c->simulated, c->feasible, c->over_memory);
    if (c->failed)
        fprintf(out, ", %" PRId64 " failed", c->failed);
    fputs(")\n", out);
}

static void layout_str(const search_cand *c, bool moe, char *buf, size_t len)
{
    char cpc[32], split[32];
    cp_comm_str(c, cpc, sizeof cpc);
    split_str(c, split, sizeof split);
    size_t w = (size_t)snprintf(buf, len, "TP %" PRId64 " PP %" PRId64 "%s%s%s VP %" PRId64 " CP %" PRId64,
                                c->par.tp, c->par.pp, strcmp(split, "even") ? " (" : "",
                                strcmp(split, "even") ? split : "", strcmp(split, "even") ? ")" : "", vp_of(c),
                                c->par.cp);
    if (moe && w < len)
        w += (size_t)snprintf(buf + w, len - w, " EP %" PRId64 " ETP %" PRId64, c->par.ep, etp_of(c));
    if (w < len)
        snprintf(buf + w, len - w, " SP %s MBS %" PRId64 " recompute %s%s%s dist-opt %s",
                 c->par.sequence_parallel ? "on" : "off", c->train.micro_batch_size,
                 recompute_name(c->par.recompute_granularity), c->par.cp > 1 ? " cp_comm " : "",
                 c->par.cp > 1 ? cpc : "", dopt_name(c));
}

/* What reruns a candidate: parsim run CONFIG <these words>. */
static void rerun_words(FILE *out, const run_inputs *b, const search_cand *c)
{
    run_inputs in = *b;
    in.cluster.num_gpus = c->world;
    in.par = c->par;
    in.train = c->train;
    in.ddp = c->ddp;
    handover_overrides(out, &in, HANDOVER_PARSIM);
}

void search_print(FILE *out, const run_inputs *b, const search_opts *o, const search_result *r)
{
    const model_spec *m = &b->model;
    const bool moe = model_is_moe(m);
    double total, active;
    heur_model_params(m, &total, &active);
    fprintf(out, "parsim search: %s (%.1fB parameters", m->name[0] ? m->name : "model", total / 1e9);
    if (moe)
        fprintf(out, ", %.1fB active", active / 1e9);
    fprintf(out, ") on ");
    for (int i = 0; i < r->n_worlds; i++)
        fprintf(out, "%s%" PRId64, i ? ", " : "", r->worlds[i]);
    fprintf(out, " x %s (%s), seq %" PRId64 ", global batch %" PRId64 ", %s\n", b->cluster.gpu.name,
            b->cluster.name[0] ? b->cluster.name : "cluster", m->seq_length, b->train.global_batch_size,
            precision_name(b->par.precision));
    fprintf(out, "  ranked by %s; HBM %.1f GiB per GPU; ddp overlap_grad_reduce %s, overlap_param_gather %s "
                 "(with the distributed optimizer)",
            o->rank == SEARCH_RANK_TIME     ? "step time"
            : o->rank == SEARCH_RANK_TOKENS ? "tokens/s per GPU"
                                            : "GPU-hours for the token budget",
            r->capacity_bytes / GIB, b->ddp.overlap_grad_reduce ? "on" : "off",
            b->ddp.overlap_param_gather ? "on" : "off");
    if (o->token_budget > 0)
        fprintf(out, "; token budget %.4g", o->token_budget);
    fputc('\n', out);
    if (o->pinned) {
        fputs("  fixed by the command line:", out);
        for (int d = 0; d < SEARCH_DIMS; d++)
            if (search_pinned(o, (search_dim)d))
                fprintf(out, " %s", search_dim_key((search_dim)d));
        fputc('\n', out);
    }
    fputc('\n', out);

    if (r->n_feasible == 0) {
        fputs("no layout fits: ", out);
        if (r->closest.status == SEARCH_ILLEGAL)
            fprintf(out, "none is legal (%s)\n", r->first_illegal);
        else {
            char lay[256];
            layout_str(&r->closest, moe, lay, sizeof lay);
            if (r->closest.peak_lb_bytes > r->capacity_bytes)
                fprintf(out, "the smallest memory lower bound is %.1f GiB > %.1f GiB HBM, on %" PRId64
                             " GPUs with %s\n",
                        r->closest.peak_lb_bytes / GIB, r->capacity_bytes / GIB, r->closest.world, lay);
            else
                fprintf(out, "every layout whose memory lower bound fits peaks above %.1f GiB HBM when "
                             "simulated; the smallest bound is %.1f GiB, on %" PRId64 " GPUs with %s\n",
                        r->capacity_bytes / GIB, r->closest.peak_lb_bytes / GIB, r->closest.world, lay);
        }
        print_counts(out, r);
        return;
    }

    size_t top = r->n_feasible < (size_t)o->top ? r->n_feasible : (size_t)o->top;
    table_header(out, b, o, moe);
    for (size_t i = 0; i < top; i++) {
        char label[24];
        snprintf(label, sizeof label, "%zu", i + 1);
        table_row(out, label, b, o, r, &r->cands[i], moe);
    }
    if (r->have_baseline)
        table_row(out, "rules", b, o, r, &r->baseline_run, moe);
    fputs("\n#1 reruns as: parsim run CONFIG ", out);
    rerun_words(out, b, &r->cands[0]);
    fputs("\n\n", out);

    if (r->n_feasible >= 2) {
        fputs("why #1 beats #2:\n", out);
        reasons(out, "#1", &r->cands[0], "#2", &r->cands[1], r->capacity_bytes, moe);
        fputc('\n', out);
    }

    fprintf(out, "rules of thumb (Megatron Bridge parallelism guide) on %" PRId64 " GPUs:\n", r->baseline.world);
    for (int i = 0; i < r->baseline.n_notes; i++)
        fprintf(out, "  - %s\n", r->baseline.notes[i]);
    if (r->have_baseline) {
        const search_cand *bl = &r->baseline_run, *best = &r->cands[0];
        char lay[256];
        layout_str(bl, moe, lay, sizeof lay);
        fprintf(out, "  => %s: %.3f s per step, %.1f tokens/s per GPU, peak %.1f GiB", lay, bl->step_time_s,
                bl->tokens_per_s_per_gpu, bl->peak_bytes / GIB);
        if (bl->status == SEARCH_OVER_MEMORY)
            fprintf(out, " -- does NOT fit in %.1f GiB\n", r->capacity_bytes / GIB);
        else
            fputs(" (fits)\n", out);
        double d = bl->step_time_s - best->step_time_s;
        if (best->world == bl->world && fabs(d) < 1e-12)
            fprintf(out, "  the best found simulates the same step time as the rules of thumb (%.3f s)\n",
                    best->step_time_s);
        else if (d > 0)
            fprintf(out, "  the best found is %.1f%% faster than the rules of thumb (%.3f s vs %.3f s per step, "
                         "%.2fx the throughput)\n",
                    100.0 * d / bl->step_time_s, best->step_time_s, bl->step_time_s,
                    bl->step_time_s / best->step_time_s);
        else
            fprintf(out, "  the best found is %.1f%% slower than the rules of thumb (%.3f s vs %.3f s per step): "
                         "their layout lies outside the searched ranges or bound\n",
                    100.0 * -d / bl->step_time_s, best->step_time_s, bl->step_time_s);
        fputc('\n', out);
        fputs("why #1 beats the rules of thumb:\n", out);
        reasons(out, "#1", best, "the rules' layout", bl, r->capacity_bytes, moe);
    } else if (r->baseline.legal) {
        fputs("  (the rules' layout could not be simulated)\n", out);
    }
    fputc('\n', out);

    if (o->pareto) {
        fprintf(out, "Pareto front over (step time, GPUs, peak memory): %zu layouts\n", r->n_pareto);
        fprintf(out, "  %5s %9s %9s %8s  %s\n", "GPUs", "step s", "tok/s/GPU", "peak GiB", "layout");
        for (size_t i = 0; i < r->n_pareto; i++) {
            const search_cand *c = &r->cands[r->pareto[i]];
            char lay[256];
            layout_str(c, moe, lay, sizeof lay);
            fprintf(out, "  %5" PRId64 " %9.3f %9.1f %8.2f  %s\n", c->world, c->step_time_s, c->tokens_per_s_per_gpu,
                    c->peak_bytes / GIB, lay);
        }
        fputc('\n', out);
    }
    print_counts(out, r);
}

void search_print_timing(FILE *out, const search_opts *o, const search_result *r)
{
    double rate = r->sim_wall_s > 0 ? (double)r->counts.simulated / r->sim_wall_s : 0;
    fprintf(out, "parsim search: %" PRId64 " configurations simulated in %.2f s (%.0f per second, --jobs %d); "
                 "%" PRId64 " layouts checked, %.2f s in all\n",
            r->counts.simulated, r->sim_wall_s, rate, o->jobs, r->counts.enumerated, r->wall_s);
}

static void csv_row(FILE *out, const char *kind, size_t rank, const run_inputs *b, const search_opts *o,
                    const search_result *r, const search_cand *c)
{
    char cpc[32];
    cp_comm_str(c, cpc, sizeof cpc);
    if (rank)
        fprintf(out, "%s,%zu,", kind, rank);
    else
        fprintf(out, "%s,,", kind);
    fprintf(out, "%d,%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%d,%d,",
            c->status == SEARCH_FEASIBLE, c->world, c->par.tp, c->par.pp, c->par.num_layers_in_first_pipeline_stage,
            c->par.num_layers_in_last_pipeline_stage, c->par.account_for_embedding_in_pipeline_split,
            c->par.account_for_loss_in_pipeline_split);
    fprintf(out,
            "%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64
            ",%" PRId64 ",%d,%" PRId64 ",%" PRId64 ",%s,%s,%d,",
            vp_of(c), c->par.cp, c->par.ep,
            etp_of(c), c->dp, c->edp, c->par.sequence_parallel, c->train.micro_batch_size, c->num_microbatches,
            recompute_name(c->par.recompute_granularity), cpc, c->ddp.use_distributed_optimizer);
    fprintf(out, "%.9g,%.9g,%.9g,", c->step_time_s, c->tokens_per_s_per_gpu, c->mfu);
    if (o->token_budget > 0)
        fprintf(out, "%.9g,", gpu_hours(b, o, c));
    else
        fputc(',', out);
    fprintf(out, "%.9g,%.9g,%.0f,%.0f,%.0f,%.9g,%.9g", c->bubble_fraction, c->bubble_s, c->peak_bytes,
            r->capacity_bytes - c->peak_bytes, c->peak_lb_bytes, c->time_lb_s, c->compute_s);
    for (int k = 0; k < STREAM_KINDS; k++)
        if (streams_is_comm((stream_kind)k))
            fprintf(out, ",%.9g", c->exposed_s[k]);
    fprintf(out, ",%.9g,%s", c->exposed_total_s, sched_name_str(c->par.pipeline_schedule));
    if (o->fsdp) /* the column only a search over Megatron-FSDP has */
        fprintf(out, ",%s", dopt_name(c));
    if (ep_overlap_column(b, o))
        fprintf(out, ",%s", c->par.overlap_moe_ep_comm ? "true" : "false");
    /* a quoted cell: the words hold commas ([2,2]), never a double quote */
    fputs(",\"", out);
    rerun_words(out, b, c);
    fputs("\"\n", out);
}

void search_write_csv(FILE *out, const run_inputs *b, const search_opts *o, const search_result *r)
{
    fputs("kind,rank,fits,gpus,tp,pp,num_layers_in_first_pipeline_stage,num_layers_in_last_pipeline_stage,"
          "account_for_embedding_in_pipeline_split,account_for_loss_in_pipeline_split,"
          "vp,cp,ep,etp,dp,edp,sequence_parallel,micro_batch_size,num_microbatches,"
          "recompute_granularity,cp_comm_type,use_distributed_optimizer,step_time_s,tokens_per_s_per_gpu,mfu,"
          "gpu_hours,bubble_fraction,bubble_s,peak_bytes,headroom_bytes,peak_lower_bound_bytes,"
          "time_lower_bound_s,compute_s",
          out);
    for (int k = 0; k < STREAM_KINDS; k++)
        if (streams_is_comm((stream_kind)k))
            fprintf(out, ",exposed_%s_s", streams_desc((stream_kind)k)->key);
    fputs(",exposed_total_s,pipeline_schedule", out);
    if (o->fsdp)
        fputs(",dp_sharding", out);
    if (ep_overlap_column(b, o))
        fputs(",overlap_moe_expert_parallel_comm", out);
    fputs(",overrides\n", out);
    for (size_t i = 0; i < r->n_cands; i++)
        csv_row(out, "search", i < r->n_feasible ? i + 1 : 0, b, o, r, &r->cands[i]);
    if (r->have_baseline)
        csv_row(out, "baseline", 0, b, o, r, &r->baseline_run);
}
