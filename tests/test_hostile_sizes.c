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

#include "config.h"
#include "limits.h"
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
