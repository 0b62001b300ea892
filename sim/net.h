/* net: how long a collective takes on the modeled fabric.
 *
 * A group (group_span from strategy) runs inside one NVLink domain or
 * crosses into the scale-out network.  First model: alpha-beta per tier
 * with NCCL-test definitions (ring all-reduce moves 2(n-1)/n of the buffer
 * per rank, all-gather and reduce-scatter (n-1)/n, all-to-all (n-1)/n,
 * p2p the message).  Across nodes the members on one node drive their own
 * NICs in parallel (hierarchical form), so the inter-node bandwidth of the
 * group is ranks_per_node x NIC bandwidth, capped by the NVLink tier.
 * Units: bytes, seconds.
 */
#ifndef PARSIM_NET_H
#define PARSIM_NET_H

#include <stdbool.h>

#include "cluster.h"
#include "strategy.h"

typedef enum {
    COLL_ALL_REDUCE = 0, COLL_ALL_GATHER, COLL_REDUCE_SCATTER, COLL_ALL_TO_ALL,
    COLL_BROADCAST, COLL_P2P, COLL_KINDS
} coll_kind;

/* bytes is the size nccl-tests reports: the full buffer for all-reduce and
 * broadcast, the gathered output for all-gather, the input for
 * reduce-scatter, the per-rank send buffer for all-to-all, the message for
 * p2p.  A group of size 1 costs nothing. */
double net_collective_s(const cluster_spec *c, const group_span *g, coll_kind k, double bytes);

/* Point-to-point send between two ranks `stride` apart. */
double net_p2p_s(const cluster_spec *c, int64_t stride, double bytes);

const char *coll_kind_name(coll_kind k);

/* Where the group of `size` ranks, `stride` apart, that holds rank 0 sits:
 * nodes, NVLink domains and members per node.  Groups of Megatron's rank
 * order are congruent, so this describes every group of the kind. */
void net_group_span(const cluster_spec *c, int64_t size, int64_t stride, group_span *out);

#endif
