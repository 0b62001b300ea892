/* Where every group of a kind sits, not only the one holding rank 0:
 * net_group_span_at and net_group_placements against a walk over the ranks
 * of small worlds, the slowest placement pacing a step (DeepSeek-V3's EP 64
 * on 256 GB200s in 72-GPU NVLink domains: three of four EP groups cross a
 * domain boundary), a congruent layout left as it was, and the placements
 * in the --layout view. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_run.h"
#include "config.h"
#include "net.h"
#include "step.h"
#include "strategy.h"
#include "sim_run.h"

/* --- brute force ---------------------------------------------------------- */

/* The span of the group {b, b+s, .., b+(n-1)s} by visiting its members. */
static void walk_span(int64_t gpn, int64_t dg, int64_t w, int64_t n, int64_t s, int64_t b,
                      group_span *out)
{
    memset(out, 0, sizeof *out);
    int64_t runs[3] = { 0, 0, 0 }, cur[3] = { 0, 0, 0 }, longest_node = 0;
    double sq[3] = { 0, 0, 0 };
    const int64_t m[3] = { gpn, dg, w };
    int64_t both = 0, prev_blk[3] = { -1, -1, -1 };
    for (int64_t t = 0; t < n; t++) {
        int64_t r = b + t * s;
        bool changed[3];
        for (int k = 0; k < 3; k++) {
            int64_t blk = r / m[k];
            changed[k] = blk != prev_blk[k];
            if (changed[k]) {
                sq[k] += (double)cur[k] * (double)cur[k];
                if (k == 0 && cur[0] > longest_node)
                    longest_node = cur[0];
                runs[k]++;
                cur[k] = 0;
                prev_blk[k] = blk;
            }
            cur[k]++;
        }
        if (t > 0 && changed[1] && changed[2])
            both++;
    }
    for (int k = 0; k < 3; k++)
        sq[k] += (double)cur[k] * (double)cur[k];
    if (cur[0] > longest_node)
        longest_node = cur[0];
    out->size = n;
    out->stride = s;
    out->base = b;
    out->nodes = runs[0];
    out->ranks_per_node = longest_node;
    out->domains = runs[1];
    out->sus = runs[2];
    out->in_nvlink_domain = runs[1] <= 1;
    if (runs[1] > 1)
        out->spine_hop_fraction = (double)(both + (runs[2] > 1)) / (double)runs[1];
    double n2 = (double)n * (double)n, od = n2 - sq[1], osu = n2 - sq[2];
    double f = od > 0 ? osu / od : 0.0;
    out->spine_peer_fraction = f > 1.0 ? 1.0 : f;
}

static bool same_span(const group_span *a, const group_span *b)
{
    return a->nodes == b->nodes && a->ranks_per_node == b->ranks_per_node &&
           a->domains == b->domains && a->sus == b->sus &&
           a->in_nvlink_domain == b->in_nvlink_domain &&
           a->spine_hop_fraction == b->spine_hop_fraction &&
           a->spine_peer_fraction == b->spine_peer_fraction;
}

static void span_str(const group_span *g, char *buf, size_t len)
{
    snprintf(buf, len, "base %lld nodes %lld rpn %lld domains %lld sus %lld hop %.17g peer %.17g",
             (long long)g->base, (long long)g->nodes, (long long)g->ranks_per_node,
             (long long)g->domains, (long long)g->sus, g->spine_hop_fraction,
             g->spine_peer_fraction);
}

enum { MAX_DISTINCT = 4096 };

/* Random block sizes and group dimensions; every group of the kind walked
 * and compared with the closed form, and the distinct placements with
 * their counts compared with net_group_placements. */
Test(placement, closed_form_matches_walk)
{
    srand(20261201);
    static group_span distinct[MAX_DISTINCT];
    static int64_t count[MAX_DISTINCT];
    int cases = 0, several = 0, envelopes = 0;
    for (int it = 0; it < 400; it++) {
        cluster_spec c;
        memset(&c, 0, sizeof c);
        c.gpus_per_node = 1 + rand() % 8;
        c.nvlink_domain_gpus = rand() % 2 ? c.gpus_per_node * (1 + rand() % 18) : 1 + rand() % 80;
        c.scaleout.su_nodes = rand() % 3 ? rand() % 12 : 0;
        int64_t n = 1 + rand() % 24, s = 1 + rand() % 20, G = 1 + rand() % 8;
        int64_t W = n * s * G;
        c.num_gpus = W;
        int64_t w = c.scaleout.su_nodes > 0 ? c.scaleout.su_nodes * c.gpus_per_node : INT64_MAX;

        /* Megatron's order: rank r's group of this kind shares r % s and
         * r / (n*s); its lowest member is the base. */
        int nd = 0;
        for (int64_t r = 0; r < W; r++) {
            int64_t b = r % s + (r / (n * s)) * (n * s);
            if (b != r)
                continue;
            group_span want, got;
            walk_span(c.gpus_per_node, c.nvlink_domain_gpus, w, n, s, b, &want);
            net_group_span_at(&c, n, s, b, &got);
            char ws[256], gs[256];
            span_str(&want, ws, sizeof ws);
            span_str(&got, gs, sizeof gs);
            cr_assert(same_span(&want, &got) && got.base == b,
                      "gpn %lld dg %lld su %lld n %lld s %lld: walk %s, closed form %s",
                      (long long)c.gpus_per_node, (long long)c.nvlink_domain_gpus,
                      (long long)c.scaleout.su_nodes, (long long)n, (long long)s, ws, gs);
            int k = 0;
            while (k < nd && !same_span(&distinct[k], &want))
                k++;
            if (k == nd) {
                cr_assert_lt(nd, MAX_DISTINCT);
                distinct[nd] = want;
                count[nd++] = 0;
            }
            count[k]++;
        }
        group_placements p;
        net_group_placements(&c, W, n, s, &p);
        cr_assert_eq(p.total, s * G);
        int64_t sum = 0;
        for (int i = 0; i < p.n; i++)
            sum += p.groups[i];
        cr_assert_eq(sum, s * G);
        if (nd <= STRATEGY_MAX_PLACEMENTS) {
            cr_assert_not(p.envelope);
            cr_assert_eq(p.n, nd, "n %lld s %lld G %lld: %d placements, walk %d", (long long)n,
                         (long long)s, (long long)G, p.n, nd);
            for (int i = 0; i < p.n; i++) {
                int k = 0;
                while (k < nd && !same_span(&distinct[k], &p.span[i]))
                    k++;
                cr_assert_lt(k, nd, "a placement no group has");
                cr_assert_eq(p.groups[i], count[k]);
                cr_assert_eq(p.span[i].base, distinct[k].base, "lowest base of the placement");
            }
        } else {
            /* The envelope is no faster than any placement it stands for. */
            cr_assert(p.envelope);
            cr_assert_eq(p.n, STRATEGY_MAX_PLACEMENTS);
            const group_span *e = &p.span[p.n - 1];
            for (int k = 0; k < nd; k++) {
                bool listed = false;
                for (int i = 0; i < p.n - 1; i++)
                    listed = listed || same_span(&p.span[i], &distinct[k]);
                if (listed)
                    continue;
                cr_assert_geq(e->domains, distinct[k].domains);
                cr_assert_geq(e->nodes, distinct[k].nodes);
                cr_assert_geq(e->sus, distinct[k].sus);
                cr_assert_geq(e->spine_hop_fraction, distinct[k].spine_hop_fraction);
                cr_assert_geq(e->spine_peer_fraction, distinct[k].spine_peer_fraction);
            }
            envelopes++;
        }
        /* The slowest has the most domains. */
        for (int i = 0; i < p.n; i++)
            cr_assert_geq(p.span[p.worst].domains, p.span[i].domains);
        several += p.n > 1;
        cases++;
    }
    cr_assert_eq(cases, 400);
    cr_assert_gt(several, 50, "too few cases with groups placed differently: %d", several);
    cr_assert_gt(envelopes, 0, "no case with more placements than the table holds");
}

/* A world of 262,144 GPUs in 72-GPU domains: the placements of TP and DP
 * groups come from one period of bases, and count every group. */
Test(placement, large_world_counts_every_group)
{
    cluster_spec c;
    memset(&c, 0, sizeof c);
    c.gpus_per_node = 4;
    c.nvlink_domain_gpus = 72;
    c.scaleout.su_nodes = 144;
    c.num_gpus = 262144;
    group_placements p;
    net_group_placements(&c, c.num_gpus, 64, 1, &p); /* EP 64 */
    cr_assert_eq(p.total, 4096);
    int64_t sum = 0, crossing = 0;
    for (int i = 0; i < p.n; i++) {
        sum += p.groups[i];
        if (p.span[i].domains > 1)
            crossing += p.groups[i];
    }
    cr_assert_eq(sum, 4096);
    /* Base 64j stays in one domain iff 64j mod 72 <= 8: j = 0 or 8 mod 9
     * (64*8 = 512 = 7*72 + 8). */
    int64_t inside = 0;
    for (int64_t j = 0; j < 4096; j++)
        inside += (64 * j) % 72 + 63 < 72;
    cr_assert_eq(4096 - crossing, inside);
    net_group_placements(&c, c.num_gpus, 512, 8, &p); /* DP 512 of TP 8 */
    cr_assert_eq(p.total, 8 * 64);
}

/* --- whole steps ---------------------------------------------------------- */


#define DSV3_ARGS                                                                                  \
    "model.name=deepseek-v3", "cluster.topology=gb200-nvl72", "cluster.num_gpus=256",             \
        "train.global_batch_size=1024", "train.micro_batch_size=1",                                \
        "model.pipeline_model_parallel_size=4", "model.expert_model_parallel_size=64",             \
        "model.virtual_pipeline_model_parallel_size=4", "model.expert_tensor_parallel_size=1",     \
        "mixed_precision=mxfp8", "ddp.use_distributed_optimizer=true",                             \
        "model.moe_token_dispatcher_type=alltoall", "cluster.nvlink_domain_job_gpus=0",           \
        "model.pipeline_model_parallel_layout=Et*2|t*4|t*4|t*4|t*4|t*4|t*4|t*4|t*4|t*4|t*4|t*4|"   \
        "t*4|t*4|t*4|t*3L"

Test(placement, deepseek_v3_on_256_gb200_paced_by_crossing_ep_groups)
{
    sim a, fit;
    const char *const kv[] = { DSV3_ARGS, NULL };
    sim_run(&a, kv);
    const group_placements *ep = &a.s.places[GROUP_EP];
    cr_assert_eq(ep->total, 4);
    cr_assert_eq(ep->n, 2);
    /* EP groups from ranks 0, 64, 128, 192 against domains of 72 filled
     * whole (cluster.nvlink_domain_job_gpus=0): only the first stays inside one. */
    cr_assert_eq(ep->span[0].base, 0);
    cr_assert_eq(ep->span[0].domains, 1);
    cr_assert_eq(ep->groups[0], 1);
    cr_assert_eq(ep->span[1].base, 64);
    cr_assert_eq(ep->span[1].domains, 2);
    cr_assert_eq(ep->groups[1], 3);
    cr_assert_eq(ep->worst, 1);
    cr_assert_not(a.s.groups[GROUP_EP].in_nvlink_domain);
    char buf[2048];
    cr_assert_gt(strategy_layout_warnings(&a.s, buf, sizeof buf), 0);
    cr_assert(strstr(buf, "warning: 3 of 4 EP groups cross an NVLink domain boundary; the step "
                          "is paced by those"), "%s", buf);

    /* The same GPUs in domains that hold every EP group. */
    const char *const kv_fit[] = { DSV3_ARGS, "cluster.nvlink_domain_gpus=256", NULL };
    sim_run(&fit, kv_fit);
    cr_assert_eq(fit.s.places[GROUP_EP].n, 1);
    cr_assert(fit.s.groups[GROUP_EP].in_nvlink_domain);
    double t = step_result_get(a.st)->step_time_s, t_fit = step_result_get(fit.st)->step_time_s;
    cr_assert_gt(t, 1.05 * t_fit, "crossing EP groups %.4f s, all inside %.4f s", t, t_fit);
    sim_free(&a);
    sim_free(&fit);
}

/* GPT-3 175B on 1024 H100s (8-GPU nodes and domains, 32-node units):
 * every group of a kind sits alike, and the placement is the rank-0
 * group's. */
Test(placement, congruent_groups_keep_the_rank0_span)
{
    sim a;
    const char *const kv[] = { "model.name=gpt3-175b", "cluster.topology=dgx-h100",
                               "cluster.num_gpus=1024", "model.tensor_model_parallel_size=8",
                               "model.pipeline_model_parallel_size=8",
                               "train.global_batch_size=256", "train.micro_batch_size=1", NULL };
    sim_run(&a, kv);
    const int64_t size[GROUP_COUNT] = { [GROUP_TP] = 8, [GROUP_CP] = 1, [GROUP_DP] = 16,
                                        [GROUP_DP_CP] = 16, [GROUP_PP] = 8, [GROUP_EP] = 1,
                                        [GROUP_ETP] = 8, [GROUP_EDP] = 16 };
    const int64_t stride[GROUP_COUNT] = { [GROUP_TP] = 1, [GROUP_CP] = 8, [GROUP_DP] = 8,
                                          [GROUP_DP_CP] = 8, [GROUP_PP] = 128, [GROUP_EP] = 8,
                                          [GROUP_ETP] = 1, [GROUP_EDP] = 8 };
    for (int k = 0; k < GROUP_COUNT; k++) {
        const group_placements *p = &a.s.places[k];
        cr_assert_eq(p->n, 1, "%s: %d placements", group_kind_name((group_kind)k), p->n);
        group_span g0;
        net_group_span(&a.in.cluster, size[k], stride[k], &g0);
        cr_assert(same_span(&a.s.groups[k], &g0), "%s", group_kind_name((group_kind)k));
        cr_assert_eq(a.s.groups[k].base, 0);
        cr_assert_eq(p->groups[0], 1024 / size[k]);
    }
    char buf[1024];
    cr_assert_eq(strategy_layout_warnings(&a.s, buf, sizeof buf), 0, "%s", buf);
    sim_free(&a);
}

/* --- the layout view ------------------------------------------------------ */

Test(placement, layout_lists_every_placement)
{
    result r;
    run(&r, "run model.name=deepseek-v3 cluster.topology=gb200-nvl72 cluster.num_gpus=256 cluster.nvlink_domain_job_gpus=0 "
            "train.global_batch_size=1024 model.pipeline_model_parallel_size=4 "
            "model.expert_model_parallel_size=64 model.virtual_pipeline_model_parallel_size=4 "
            "'model.pipeline_model_parallel_layout=Et*2|t*4|t*4|t*4|t*4|t*4|t*4|t*4|t*4|t*4|"
            "t*4|t*4|t*4|t*4|t*4|t*3L' --layout");
    cr_assert_eq(r.status, 0, "%s", r.out);
    const char *pl = strstr(r.out, "placements (groups of a kind");
    cr_assert_not_null(pl, "%s", r.out);
    const char *ep = strstr(pl, "\nEP ");
    cr_assert_not_null(ep, "%s", pl);
    /* EP: 1 of 4 from rank 0 in one domain, 3 of 4 from rank 64 in two */
    long g0, t0, b0, n0, d0, g1, t1, b1, n1, d1;
    cr_assert_eq(sscanf(ep, "\nEP %ld of %ld %ld %ld %ld", &g0, &t0, &b0, &n0, &d0), 5, "%s", ep);
    const char *next = strchr(ep + 1, '\n');
    cr_assert_not_null(next);
    cr_assert_eq(sscanf(next, " %ld of %ld %ld %ld %ld", &g1, &t1, &b1, &n1, &d1), 5, "%s", next);
    cr_assert(g0 == 1 && t0 == 4 && b0 == 0 && n0 == 16 && d0 == 1, "%s", ep);
    cr_assert(g1 == 3 && t1 == 4 && b1 == 64 && n1 == 16 && d1 == 2, "%s", next);
    cr_assert(strstr(next, "(slowest)"), "%s", next);
    cr_assert(strstr(r.out, "warning: 3 of 4 EP groups cross an NVLink domain boundary; the step "
                            "is paced by those"), "%s", r.out);
}

/* Ranks that fill 64 GPUs of each 72-GPU NVL72 domain (16 of its 18
 * trays): every EP-64 group of the 256-GPU job is one domain, and a fill
 * that is not whole nodes or exceeds the domain is exit 2 naming the key. */
Test(placement, job_fill_of_a_domain_sets_where_groups_sit)
{
    result r;
    const char *base = "run model.name=deepseek-v3 cluster.topology=gb200-nvl72 cluster.num_gpus=256 "
                       "train.global_batch_size=1024 model.pipeline_model_parallel_size=4 "
                       "model.expert_model_parallel_size=64 model.virtual_pipeline_model_parallel_size=4 "
                       "'model.pipeline_model_parallel_layout=Et*2|t*4|t*4|t*4|t*4|t*4|t*4|t*4|t*4|t*4|"
                       "t*4|t*4|t*4|t*4|t*4|t*3L' --layout";
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s cluster.nvlink_domain_job_gpus=64", base);
    run(&r, cmd);
    cr_assert_eq(r.status, 0, "%s", r.out);
    const char *ep = strstr(strstr(r.out, "placements (groups of a kind"), "\nEP ");
    cr_assert_not_null(ep, "%s", r.out);
    long g0, t0, b0, n0, d0;
    cr_assert_eq(sscanf(ep, "\nEP %ld of %ld %ld %ld %ld", &g0, &t0, &b0, &n0, &d0), 5, "%s", ep);
    cr_assert(g0 == 4 && t0 == 4 && d0 == 1, "%s", ep);
    cr_assert_null(strstr(r.out, "EP groups cross"), "%s", r.out);
    snprintf(cmd, sizeof cmd, "%s cluster.nvlink_domain_job_gpus=66", base);
    run(&r, cmd);
    cr_assert_eq(r.status, 2, "%s", r.out);
    cr_assert(strstr(r.out, "cluster.nvlink_domain_job_gpus") && strstr(r.out, "whole nodes"), "%s", r.out);
    snprintf(cmd, sizeof cmd, "%s cluster.nvlink_domain_job_gpus=76", base);
    run(&r, cmd);
    cr_assert_eq(r.status, 2, "%s", r.out);
}
