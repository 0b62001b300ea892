#include "cluster.h"

#include <string.h>

void cluster_defaults(cluster_spec *c)
{
    /* Every cost parameter comes from a topology file with its source; the
     * config table marks them required, so nothing is defaulted here. */
    memset(c, 0, sizeof *c);
    c->scaleout_kind = FABRIC_INFINIBAND;
}

int64_t cluster_node_of(const cluster_spec *c, int64_t rank)
{
    return rank / (c->gpus_per_node > 0 ? c->gpus_per_node : 1);
}

int64_t cluster_domain_of(const cluster_spec *c, int64_t rank)
{
    return rank / (c->nvlink_domain_gpus > 0 ? c->nvlink_domain_gpus : 1);
}

const char *fabric_kind_name(fabric_kind k)
{
    switch (k) {
    case FABRIC_INFINIBAND: return "infiniband";
    case FABRIC_ROCE: return "roce";
    case FABRIC_ETHERNET: return "ethernet";
    }
    return "?";
}
