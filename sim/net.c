#include "net.h"

#include <math.h>

const char *coll_kind_name(coll_kind k)
{
    static const char *const names[COLL_KINDS] = {
        "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "p2p",
    };
    return (k >= 0 && k < COLL_KINDS) ? names[k] : "?";
}

/* The group is split into D scale-up domains of r members each (groups are
 * congruent under Megatron's rank order).  Inside a domain the collective
 * runs over NVLink; across domains each member drives its own NIC, as in
 * NCCL's hierarchical and multi-channel ring forms, so the two tiers work
 * in a pipeline and the slower one sets the time. */
double net_collective_s(const cluster_spec *c, const group_span *g, coll_kind k, double bytes)
{
    double n = (double)g->size;
    if (g->size <= 1 || bytes <= 0)
        return 0.0;
    double domains = g->domains > 0 ? (double)g->domains : 1.0;
    double r = n / domains;
    const tier_spec *nv = &c->nvlink, *net = &c->scaleout;
    double intra = 0, inter = 0, lat = 0;

    switch (k) {
    case COLL_ALL_REDUCE:
        intra = 2.0 * (r - 1) / r * bytes / nv->bw_bytes_per_s;
        inter = 2.0 * (domains - 1) / domains * (bytes / r) / net->bw_bytes_per_s;
        lat = 2.0 * (r - 1) * nv->latency_s + 2.0 * (domains - 1) * net->latency_s;
        break;
    case COLL_ALL_GATHER:
    case COLL_REDUCE_SCATTER:
        intra = (r - 1) / r * bytes / nv->bw_bytes_per_s;
        inter = (domains - 1) / domains * (bytes / r) / net->bw_bytes_per_s;
        lat = (r - 1) * nv->latency_s + (domains - 1) * net->latency_s;
        break;
    case COLL_ALL_TO_ALL:
        /* Of the per-rank send buffer, (r-1)/n stays in the domain and
         * (n-r)/n leaves it through the rank's own NIC. */
        intra = (r - 1) / n * bytes / nv->bw_bytes_per_s;
        inter = (n - r) / n * bytes / net->bw_bytes_per_s;
        lat = domains > 1 ? net->latency_s : nv->latency_s;
        break;
    case COLL_BROADCAST:
        intra = bytes / nv->bw_bytes_per_s;
        inter = domains > 1 ? bytes / net->bw_bytes_per_s : 0.0;
        lat = (r - 1) * nv->latency_s + (domains - 1) * net->latency_s;
        break;
    case COLL_P2P:
    case COLL_KINDS:
        intra = domains > 1 ? 0.0 : bytes / nv->bw_bytes_per_s;
        inter = domains > 1 ? bytes / net->bw_bytes_per_s : 0.0;
        lat = domains > 1 ? net->latency_s : nv->latency_s;
        break;
    }
    return fmax(intra, inter) + lat;
}

double net_p2p_s(const cluster_spec *c, int64_t stride, double bytes)
{
    if (bytes <= 0)
        return 0.0;
    /* Rank 0 and rank `stride` share a domain iff stride < domain size. */
    bool same = stride < c->nvlink_domain_gpus;
    const tier_spec *t = same ? &c->nvlink : &c->scaleout;
    return t->latency_s + bytes / t->bw_bytes_per_s;
}

void net_group_span(const cluster_spec *c, int64_t size, int64_t stride, group_span *out)
{
    out->size = size;
    out->stride = stride;
    int64_t nodes = 0, domains = 0, last_node = -1, last_domain = -1;
    int64_t per_node = 0, max_per_node = 0;
    /* Members are increasing ranks, so each node/domain change is new. */
    for (int64_t i = 0; i < size; i++) {
        int64_t rank = i * stride;
        int64_t node = cluster_node_of(c, rank), dom = cluster_domain_of(c, rank);
        if (node != last_node) {
            nodes++;
            last_node = node;
            per_node = 0;
        }
        per_node++;
        if (per_node > max_per_node)
            max_per_node = per_node;
        if (dom != last_domain) {
            domains++;
            last_domain = dom;
        }
    }
    out->nodes = nodes;
    out->ranks_per_node = max_per_node;
    out->domains = domains;
    out->in_nvlink_domain = domains <= 1;
}
