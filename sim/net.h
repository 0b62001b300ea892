/* net: how long a collective takes on the modeled fabric, the way NCCL
 * runs it.
 *
 * A collective of S bytes on a group of n ranks spread over D NVLink
 * domains (r = n/D ranks in each) is costed for each of NCCL's algorithms
 * that can run it — ring, tree, NVLS (NVLink SHARP, one domain), NVLS tree
 * (NVLS inside domains, a tree between them), and parsim's hierarchical
 * form — and each protocol (LL, LL128, Simple):
 *
 *     time = latency(algorithm, protocol, n, D) + bytes moved / bandwidth
 *
 * The latency is NCCL's own tuning model (src/graph/tuning.cc: a base
 * latency plus a hardware latency per algorithm step, per tier).  The
 * bandwidth term counts the bytes each GPU moves on its NVLink ports and
 * on its share of the node's NICs (cluster_nic_bw_per_gpu), at the tier's
 * measured bandwidth times its efficiency at this message size, times
 * NCCL's protocol factor (LL carries half payload, LL128 120 of 128 bytes).
 * Flat algorithms (ring, tree) stream every chunk through both tiers, so
 * the slower tier sets the rate; two-tier algorithms (hierarchical, NVLS
 * tree) overlap their phases only partly (scaleout.hier_serial_fraction).
 * Traffic that leaves a scalable unit is slowed by the spine's
 * oversubscription in proportion to the share of a leaf's traffic that
 * goes up (group_span.spine_*_fraction).  The (algorithm, protocol) pair of
 * least predicted time is chosen, as NCCL does, unless the cluster forces
 * one (sim.nccl_algo, sim.nccl_proto).  All-to-all and send/recv are
 * point-to-point: they choose only the protocol.
 *
 * bytes is the size nccl-tests reports: the full buffer for all-reduce and
 * broadcast, the gathered output for all-gather, the input for
 * reduce-scatter, the per-rank send buffer for all-to-all, the message for
 * p2p.  A group of size 1 costs nothing.  Units: bytes, seconds.
 *
 * Every function here is pure: no allocation, no state between calls, the
 * same answer for the same inputs, so it can be called for every op of a
 * workload.
 */
#ifndef PARSIM_NET_H
#define PARSIM_NET_H

#include <stdbool.h>

#include "cluster.h"
#include "err.h"

typedef enum {
    COLL_ALL_REDUCE = 0, COLL_ALL_GATHER, COLL_REDUCE_SCATTER, COLL_ALL_TO_ALL,
    COLL_BROADCAST, COLL_P2P, COLL_KINDS
} coll_kind;

/* What a collective costs with the algorithm and protocol used. */
typedef struct net_choice {
    net_algo algo;     /* NET_ALGO_P2P for all-to-all and p2p */
    net_proto proto;
    double time_s;     /* total */
    double latency_s;  /* of which the latency term */
} net_choice;

/* Time of the collective with the cluster's forced algorithm/protocol
 * where they can run it, else NCCL's choice. */
double net_collective_s(const cluster_spec *c, const group_span *g, coll_kind k, double bytes);

/* The collective with algo/proto (NET_*_AUTO = choose by least time).
 * Returns 0 and fills out, or -1 if no pair with the requested algo/proto
 * can run this collective on this group (out is then untouched). */
int net_collective_choose(const cluster_spec *c, const group_span *g, coll_kind k, double bytes,
                          net_algo algo, net_proto proto, net_choice *out);

/* Whether algo can run collective k on group g; if not and why is not
 * NULL, *why says what is missing. */
bool net_algo_supported(const cluster_spec *c, const group_span *g, coll_kind k, net_algo algo,
                        const char **why);

/* Point-to-point send between two ranks `stride` apart (all GPUs sending at
 * once, as in a pipeline stage boundary). */
double net_p2p_s(const cluster_spec *c, int64_t stride, double bytes);

/* Same with the protocol chosen (proto AUTO) or forced; -1 if the protocol
 * cannot run p2p (LL128). */
int net_p2p_choose(const cluster_spec *c, int64_t stride, double bytes, net_proto proto,
                   net_choice *out);

/* nccl-tests' busbw / algbw for a collective on n ranks (PERFORMANCE.md):
 * all-reduce 2(n-1)/n, all-gather, reduce-scatter and all-to-all (n-1)/n,
 * broadcast and p2p 1. */
double net_busbw_factor(coll_kind k, int64_t n);

const char *coll_kind_name(coll_kind k);
bool coll_kind_from_name(const char *name, coll_kind *out);

/* SIM_OK if `seconds`, the time of collective k of `bytes` on group g,
 * is a duration simulated time holds (time_from_s_checked), else
 * SIM_EINVAL naming the collective, its size, the tier it crosses and the
 * key that sets that tier's rate: "all_reduce of 1.07e+09 bytes over 64
 * GPUs on the scale-out fabric through a 1e+300:1 spine would take ... s
 * (limit 1.8e+07 s)". */
int net_check_duration(const cluster_spec *c, const group_span *g, coll_kind k, double bytes,
                       double seconds, sim_err *err);

/* Where the group of `size` ranks, `stride` apart, from rank `base` sits:
 * nodes, NVLink domains, scalable units, members per node and the share of
 * its traffic that crosses the spine.  Closed forms: the cost does not
 * grow with size or stride.  net_group_span is the group from rank 0. */
void net_group_span_at(const cluster_spec *c, int64_t size, int64_t stride, int64_t base,
                       group_span *out);
void net_group_span(const cluster_spec *c, int64_t size, int64_t stride, group_span *out);

/* Every distinct placement of the groups of `size` ranks, `stride` apart,
 * in a world of `world` ranks laid out in Megatron's order: the groups'
 * bases are i + j*size*stride, i < stride, j < world/(size*stride).  A
 * placement depends only on the base modulo L = lcm(node, domain, unit
 * sizes), so only the bases of one period are visited: the work is at most
 * min(world/size, stride mod L classes x L/gcd(size*stride, L)), not
 * growing with the number of groups once they repeat. */
void net_group_placements(const cluster_spec *c, int64_t world, int64_t size, int64_t stride,
                          group_placements *out);

/* The same for groups whose bases are i + j*repeat, i < first, j < count
 * (the groups of a kind are first*count of them). */
void net_group_placements_of(const cluster_spec *c, int64_t size, int64_t stride, int64_t first,
                             int64_t repeat, int64_t count, group_placements *out);

/* Time of collective k on the slowest of the placements: the kind's
 * collective step ends when its last group's does. */
double net_collective_worst_s(const cluster_spec *c, const group_placements *p, coll_kind k,
                              double bytes);

#endif
