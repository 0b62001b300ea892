#include "cluster.h"

#include <string.h>

void cluster_defaults(cluster_spec *c)
{
    /* Every cost parameter comes from a topology file with its source; the
     * config table marks them required, so nothing is defaulted here. */
    memset(c, 0, sizeof *c);
    c->scaleup.kind = SCALEUP_NVLINK;
    c->scaleout.kind = FABRIC_INFINIBAND;
    c->force_algo = NET_ALGO_AUTO;
    c->force_proto = NET_PROTO_AUTO;
}

int64_t cluster_node_of(const cluster_spec *c, int64_t rank)
{
    return rank / (c->gpus_per_node > 0 ? c->gpus_per_node : 1);
}

int64_t cluster_domain_of(const cluster_spec *c, int64_t rank)
{
    return rank / (c->nvlink_domain_gpus > 0 ? c->nvlink_domain_gpus : 1);
}

int64_t cluster_su_of(const cluster_spec *c, int64_t rank)
{
    if (c->scaleout.su_nodes <= 0)
        return 0;
    return cluster_node_of(c, rank) / c->scaleout.su_nodes;
}

double cluster_nic_bw_per_gpu(const cluster_spec *c)
{
    double gpus = c->gpus_per_node > 0 ? (double)c->gpus_per_node : 1.0;
    return (double)c->scaleout.nics_per_node * c->scaleout.nic_bw_bytes_per_s / gpus;
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

const char *scaleup_kind_name(scaleup_kind k)
{
    switch (k) {
    case SCALEUP_NVLINK: return "nvlink";
    case SCALEUP_PCIE: return "pcie";
    }
    return "?";
}

const char *net_algo_name(net_algo a)
{
    switch (a) {
    case NET_ALGO_AUTO: return "auto";
    case NET_ALGO_RING: return "ring";
    case NET_ALGO_TREE: return "tree";
    case NET_ALGO_NVLS: return "nvls";
    case NET_ALGO_NVLS_TREE: return "nvls_tree";
    case NET_ALGO_HIER: return "hierarchical";
    case NET_ALGO_P2P: return "p2p";
    case NET_ALGOS: break;
    }
    return "?";
}

bool net_algo_from_name(const char *name, net_algo *out)
{
    for (int a = NET_ALGO_AUTO; a < NET_ALGO_P2P; a++) {
        if (strcmp(name, net_algo_name((net_algo)a)) == 0) {
            *out = (net_algo)a;
            return true;
        }
    }
    if (strcmp(name, "nvlstree") == 0) { /* NCCL_ALGO's spelling */
        *out = NET_ALGO_NVLS_TREE;
        return true;
    }
    return false;
}

const char *net_proto_name(net_proto p)
{
    switch (p) {
    case NET_PROTO_AUTO: return "auto";
    case NET_PROTO_LL: return "ll";
    case NET_PROTO_LL128: return "ll128";
    case NET_PROTO_SIMPLE: return "simple";
    case NET_PROTOS: break;
    }
    return "?";
}

bool net_proto_from_name(const char *name, net_proto *out)
{
    for (int p = NET_PROTO_AUTO; p < NET_PROTOS; p++) {
        if (strcmp(name, net_proto_name((net_proto)p)) == 0) {
            *out = (net_proto)p;
            return true;
        }
    }
    return false;
}
