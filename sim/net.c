/* net: collectives on the fabric with NCCL's algorithms and protocols.
 *
 * Notation (one call): S bytes, n ranks, D NVLink domains, r = n/D ranks
 * per domain.  Bandwidths below are per GPU, one direction, already
 * multiplied by the tier's efficiency (scale-up at S, scale-out at S/n, or
 * S/D for all-to-all):
 *
 *   B_nv    scale-up ring bus bandwidth     B_a2a  scale-up all-to-all
 *   B_nvls  NVLink SHARP per-GPU rate       B_nic  the GPU's share of its node's NICs
 *
 * Volumes, per GPU (nccl-tests / NCCL definitions; see net.h):
 *
 *   ring      every link of the ring carries 2(n-1)/n S (all-reduce),
 *             (n-1)/n S (all-gather, reduce-scatter) or S (broadcast).  A
 *             domain's ring channels leave it through the NICs of its r
 *             members, so the ring's bus rate is min(B_nv, r B_nic).
 *   tree      NCCL's model: the bus rate as for ring, at half the
 *             algorithm bandwidth (each GPU sends S up and S down).
 *   NVLS      all-reduce: each GPU pushes S into the switch and its reduced
 *             shard S/n back out, S(1+1/n) at B_nvls; all-gather and
 *             reduce-scatter move (n-1)/n S at B_nvls (no gain over ring,
 *             NVIDIA/nccl #1506).
 *   NVLS tree NVLS inside each domain, then a tree between domains over
 *             each GPU's NIC for its shard S/r (a pair exchange for D = 2,
 *             up and down for D > 2).
 *   hier      reduce-scatter in the domain ((r-1)/r S on NVLink), ring
 *             all-reduce of the shard across domains (2(D-1)/D S/r on the
 *             NIC), all-gather in the domain; all-gather / reduce-scatter
 *             do one half.
 *   p2p       all-to-all: (r-1)/n S stays in the domain, (n-r)/n S leaves
 *             through the GPU's NIC at scaleout.a2a_efficiency.
 *
 * Two-tier forms (NVLS tree, hier) take max(a, b) + f min(a, b), f =
 * scaleout.hier_serial_fraction.  Spine: a leaf's uplinks carry
 * su_nodes/oversubscription NICs' worth; when a share x of its downlink
 * traffic goes up, the NIC rate drops by max(1, x * oversubscription).
 */
#include "net.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <gsl/gsl_interp.h>

#include "intmath.h"
#include "units.h"

/* ------------------------------------------------------------- names */

const char *coll_kind_name(coll_kind k)
{
    static const char *const names[COLL_KINDS] = {
        "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "p2p",
    };
    return (k >= 0 && k < COLL_KINDS) ? names[k] : "?";
}

bool coll_kind_from_name(const char *name, coll_kind *out)
{
    static const struct {
        const char *name;
        coll_kind k;
    } names[] = {
        { "all_reduce", COLL_ALL_REDUCE },    { "allreduce", COLL_ALL_REDUCE },
        { "all_gather", COLL_ALL_GATHER },    { "allgather", COLL_ALL_GATHER },
        { "reduce_scatter", COLL_REDUCE_SCATTER }, { "reducescatter", COLL_REDUCE_SCATTER },
        { "all_to_all", COLL_ALL_TO_ALL },    { "alltoall", COLL_ALL_TO_ALL },
        { "broadcast", COLL_BROADCAST },      { "p2p", COLL_P2P },
        { "sendrecv", COLL_P2P },
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(name, names[i].name) == 0) {
            *out = names[i].k;
            return true;
        }
    }
    return false;
}

double net_busbw_factor(coll_kind k, int64_t n)
{
    double dn = (double)n;
    if (n <= 1)
        return k == COLL_BROADCAST || k == COLL_P2P ? 1.0 : 0.0;
    switch (k) {
    case COLL_ALL_REDUCE: return 2.0 * (dn - 1) / dn;
    case COLL_ALL_GATHER:
    case COLL_REDUCE_SCATTER:
    case COLL_ALL_TO_ALL: return (dn - 1) / dn;
    case COLL_BROADCAST:
    case COLL_P2P:
    case COLL_KINDS: break;
    }
    return 1.0;
}

/* ------------------------------------------------------------ curves */

/* Efficiency at `bytes` per rank.  The curve is a handful of points, so
 * the segment is found with gsl_interp_bsearch and interpolated linearly
 * in log2(bytes), exactly as gsl_interp_linear would, without allocating
 * an interpolator per call. */
static double curve_at(const net_curve *cv, double bytes)
{
    if (cv->n == 0)
        return 1.0;
    double x = log2(bytes > 1.0 ? bytes : 1.0);
    const double *xs = cv->log2_bytes, *ys = cv->efficiency;
    size_t last = (size_t)cv->n - 1;
    if (x <= xs[0])
        return ys[0];
    if (x >= xs[last])
        return ys[last];
    size_t i = gsl_interp_bsearch(xs, x, 0, last);
    double t = (x - xs[i]) / (xs[i + 1] - xs[i]);
    return ys[i] + t * (ys[i + 1] - ys[i]);
}

/* --------------------------------------------------------- one call */

/* Everything about one call that does not depend on the algorithm. */
typedef struct call {
    const cluster_spec *c;
    coll_kind k;
    double S, n, D, r;
    double bw_nv, bw_a2a, bw_nvls, bw_nic; /* with efficiency at S/n */
    double spine_ring, spine_a2a;          /* NIC slowdown, >= 1 */
} call;

static double spine_factor(const cluster_spec *c, double up_share)
{
    double o = c->scaleout.spine_oversubscription;
    double x = up_share * (o > 1.0 ? o : 1.0);
    return x > 1.0 ? x : 1.0;
}

static void call_init(call *x, const cluster_spec *c, const group_span *g, coll_kind k,
                      double bytes)
{
    x->c = c;
    x->k = k;
    x->S = bytes;
    x->n = (double)g->size;
    x->D = g->domains > 0 ? (double)g->domains : 1.0;
    x->r = x->n / x->D;
    /* The scale-up curve is measured on one node and read at the call's
     * size (NCCL sizes its channels by the total); the scale-out curve
     * lines up across node counts by the bytes each rank adds (SimAI's
     * ratios at 2..128 nodes), so it is read per rank.  An all-to-all's
     * network messages are per remote domain: NCCL's PXN gathers what the
     * r ranks of a domain send to one GPU into one transfer, S/n x r. */
    double e_nv = curve_at(&c->scaleup.efficiency, bytes);
    double per_rank = k == COLL_ALL_TO_ALL ? bytes / x->D : bytes / x->n;
    double e_net = curve_at(&c->scaleout.efficiency, per_rank);
    x->bw_nv = c->scaleup.bw_bytes_per_s * e_nv;
    x->bw_a2a = c->scaleup.a2a_bw_bytes_per_s * e_nv;
    x->bw_nvls = c->scaleup.nvls_bw_bytes_per_s * e_nv;
    x->bw_nic = cluster_nic_bw_per_gpu(c) * e_net;
    x->spine_ring = spine_factor(c, g->spine_hop_fraction);
    x->spine_a2a = spine_factor(c, g->spine_peer_fraction);
}

static const nccl_latency *intra_hw(const cluster_spec *c)
{
    return c->scaleup.kind == SCALEUP_PCIE ? &c->nccl.pcie : &c->nccl.nvlink;
}

/* LL's bus bandwidth cap (NCCL llMaxBws: one domain, two, more). */
static double ll_cap(const call *x)
{
    int i = x->D <= 1 ? 0 : x->D <= 2 ? 1 : 2;
    return x->c->nccl.ll_max_bw_bytes_per_s[i];
}

static bool proto_ok(const cluster_spec *c, net_algo a, net_proto p)
{
    if (p == NET_PROTO_LL128 && (!c->nccl.ll128 || a == NET_ALGO_P2P))
        return false; /* NCCL's p2p runs LL or Simple */
    if ((a == NET_ALGO_NVLS || a == NET_ALGO_NVLS_TREE) && p != NET_PROTO_SIMPLE)
        return false;
    return true;
}

bool net_algo_supported(const cluster_spec *c, const group_span *g, coll_kind k, net_algo a,
                        const char **why)
{
    const char *no = NULL;
    bool ar = k == COLL_ALL_REDUCE, agrs = k == COLL_ALL_GATHER || k == COLL_REDUCE_SCATTER;
    bool multi = g->domains > 1;
    bool nvls = c->scaleup.nvls_bw_bytes_per_s > 0 && c->scaleup.kind == SCALEUP_NVLINK;
    bool p2p_kind = k == COLL_ALL_TO_ALL || k == COLL_P2P;
    switch (a) {
    case NET_ALGO_AUTO:
        break;
    case NET_ALGO_P2P:
        if (!p2p_kind)
            no = "p2p is the form of all_to_all and p2p only";
        break;
    case NET_ALGO_RING:
        if (p2p_kind)
            no = "all_to_all and p2p are point-to-point (no algorithm choice)";
        break;
    case NET_ALGO_TREE:
        if (!ar)
            no = "NCCL runs tree for all_reduce only";
        break;
    case NET_ALGO_NVLS:
        if (!ar && !agrs)
            no = "NVLS runs all_reduce, all_gather and reduce_scatter only";
        else if (!nvls)
            no = "this fabric has no NVLink SHARP (cluster.nvlink.nvls_bw_gbytes_per_s = 0, or "
                 "cluster.nvlink.kind = pcie)";
        else if (multi)
            no = "NVLS across NVLink domains needs IB SHARP (CollNet), which is not modeled; "
                 "use nvls_tree";
        break;
    case NET_ALGO_NVLS_TREE:
        if (!ar)
            no = "NVLS tree runs all_reduce only";
        else if (!nvls)
            no = "this fabric has no NVLink SHARP (cluster.nvlink.nvls_bw_gbytes_per_s = 0, or "
                 "cluster.nvlink.kind = pcie)";
        else if (!multi)
            no = "NVLS tree needs more than one NVLink domain (NCCL disables it on one node)";
        break;
    case NET_ALGO_HIER:
        if (!ar && !agrs)
            no = "the hierarchical form runs all_reduce, all_gather and reduce_scatter only";
        else if (!multi)
            no = "the hierarchical form needs more than one NVLink domain";
        break;
    case NET_ALGOS:
        no = "unknown algorithm";
        break;
    }
    if (why)
        *why = no;
    return no == NULL;
}

/* NCCL's latency for (algorithm, protocol) (tuning.cc, hardware.md §4.2).
 * "Nodes" there are NVLink domains here. */
static double latency_s(const call *x, net_algo a, net_proto p)
{
    const cluster_spec *c = x->c;
    const nccl_params *nc = &c->nccl;
    const nccl_latency *in = intra_hw(c), *net = &nc->net;
    double n = x->n, D = x->D, r = x->r;
    bool multi = D > 1;
    double overhead = 0.0;
    if (multi)
        overhead = nc->net_overhead_s *
                   (p == NET_PROTO_SIMPLE ? nc->net_overhead_simple_factor : 1.0);
    double intra = fmax(in->ring[p], overhead);
    /* With one rank per domain every step is exposed: NCCL uses the tree's
     * network latency then. */
    double inter = r <= 1.0 ? net->tree[p] : net->ring[p];
    double log2d = multi ? floor(log2(D)) : 0.0;

    switch (a) {
    case NET_ALGO_RING: {
        double steps, isteps;
        switch (x->k) {
        case COLL_ALL_REDUCE: steps = 2 * (n - 1); isteps = 2 * (D - 1); break;
        case COLL_BROADCAST: steps = n; isteps = D - 1; break;
        default: steps = n - 1; isteps = D - 1; break;
        }
        double lat = nc->base.ring[p] + (steps - isteps) * intra + isteps * inter;
        if (x->k == COLL_ALL_REDUCE && multi && p == NET_PROTO_SIMPLE)
            lat *= nc->ring_plateau_factor;
        return lat;
    }
    case NET_ALGO_HIER: {
        double m = x->k == COLL_ALL_REDUCE ? 2.0 : 1.0;
        return nc->base.ring[p] + m * (r - 1) * intra + m * (D - 1) * inter;
    }
    case NET_ALGO_TREE:
        return nc->base.tree[p] + 2 * ((r - 1) * in->tree[p] + log2d * net->tree[p]);
    case NET_ALGO_NVLS:
        return in->nvls + (multi ? net->nvls : 0.0);
    case NET_ALGO_NVLS_TREE:
        return in->nvls_tree + 2 * log2d * net->nvls_tree;
    case NET_ALGO_P2P:
        /* One send/receive step on the farthest tier (NCCL base + hardware
         * latency of a ring step, as SimAI's send-latency table). */
        return nc->base.ring[p] + (multi ? inter : in->ring[p]);
    case NET_ALGO_AUTO:
    case NET_ALGOS:
        break;
    }
    return INFINITY;
}

/* A bus rate through both tiers: NVLink, and the domain's NICs (r members
 * each with its share, slowed by the spine) once the group leaves it. */
static double bus_rate(const call *x, double pf, net_proto p)
{
    double bus = x->bw_nv * pf;
    if (x->D > 1)
        bus = fmin(bus, x->r * x->bw_nic * pf / x->spine_ring);
    if (p == NET_PROTO_LL)
        bus = fmin(bus, ll_cap(x));
    return bus;
}

static double capped(const call *x, double bw, net_proto p)
{
    return p == NET_PROTO_LL ? fmin(bw, ll_cap(x)) : bw;
}

static double two_tier(const cluster_spec *c, double a, double b)
{
    return fmax(a, b) + c->scaleout.hier_serial_fraction * fmin(a, b);
}

/* Bandwidth term of (algorithm, protocol), seconds. */
static double transfer_s(const call *x, net_algo a, net_proto p)
{
    const cluster_spec *c = x->c;
    const nccl_params *nc = &c->nccl;
    double S = x->S, n = x->n, D = x->D, r = x->r;
    bool ar = x->k == COLL_ALL_REDUCE;

    switch (a) {
    case NET_ALGO_RING: {
        double vol = ar ? 2 * (n - 1) / n * S : x->k == COLL_BROADCAST ? S : (n - 1) / n * S;
        return vol / bus_rate(x, nc->ring_bw_factor[p], p);
    }
    case NET_ALGO_TREE: {
        double pf = nc->tree_bw_factor[p];
        if (p == NET_PROTO_LL128 && D <= 1)
            pf = nc->tree_ll128_one_domain_factor;
        return 2 * S / bus_rate(x, pf, p);
    }
    case NET_ALGO_NVLS:
        return (ar ? S * (1 + 1 / n) : (n - 1) / n * S) / x->bw_nvls;
    case NET_ALGO_NVLS_TREE: {
        double intra = S * (1 + 1 / r) / x->bw_nvls;
        double inter = (D <= 2 ? 1.0 : 2.0) * S / r / (x->bw_nic / x->spine_ring);
        return two_tier(c, intra, inter);
    }
    case NET_ALGO_HIER: {
        double m = ar ? 2.0 : 1.0, pf = nc->ring_bw_factor[p];
        double intra = m * (r - 1) / r * S / capped(x, x->bw_nv * pf, p);
        double inter = m * (D - 1) / D * S / r / capped(x, x->bw_nic * pf / x->spine_ring, p);
        return two_tier(c, intra, inter);
    }
    case NET_ALGO_P2P: {
        double pf = nc->ring_bw_factor[p];
        double intra = (r - 1) / n * S / capped(x, x->bw_a2a * pf, p);
        double inter = 0.0;
        if (D > 1)
            inter = (n - r) / n * S /
                    capped(x, x->bw_nic * c->scaleout.a2a_efficiency * pf / x->spine_a2a, p);
        return fmax(intra, inter);
    }
    case NET_ALGO_AUTO:
    case NET_ALGOS:
        break;
    }
    return INFINITY;
}

int net_collective_choose(const cluster_spec *c, const group_span *g, coll_kind k, double bytes,
                          net_algo algo, net_proto proto, net_choice *out)
{
    if (g->size <= 1 || bytes <= 0) {
        if (out)
            *out = (net_choice){ .algo = algo == NET_ALGO_AUTO ? NET_ALGO_RING : algo,
                                 .proto = proto == NET_PROTO_AUTO ? NET_PROTO_SIMPLE : proto };
        return 0;
    }
    if (k == COLL_P2P) {
        /* A send between consecutive members: the group's tier. */
        int64_t stride = g->domains > 1 ? (c->nvlink_domain_gpus > g->stride ? c->nvlink_domain_gpus
                                                                             : g->stride)
                                        : g->stride;
        if (algo != NET_ALGO_AUTO && algo != NET_ALGO_P2P)
            return -1;
        return net_p2p_choose(c, stride, bytes, proto, out);
    }
    call x;
    call_init(&x, c, g, k, bytes);
    net_choice best = { .algo = NET_ALGO_AUTO, .proto = NET_PROTO_AUTO, .time_s = INFINITY };
    net_algo a0 = k == COLL_ALL_TO_ALL ? NET_ALGO_P2P : NET_ALGO_RING;
    net_algo a1 = k == COLL_ALL_TO_ALL ? NET_ALGO_P2P : NET_ALGO_HIER;
    for (int a = a0; a <= a1; a++) {
        /* NCCL's automatic choice never picks parsim's hierarchical form. */
        if (algo == NET_ALGO_AUTO ? a == NET_ALGO_HIER : a != algo)
            continue;
        if (!net_algo_supported(c, g, k, (net_algo)a, NULL))
            continue;
        for (int p = 0; p < NET_PROTOS; p++) {
            if ((proto != NET_PROTO_AUTO && p != proto) || !proto_ok(c, (net_algo)a, (net_proto)p))
                continue;
            double lat = latency_s(&x, (net_algo)a, (net_proto)p);
            double t = lat + transfer_s(&x, (net_algo)a, (net_proto)p);
            if (t < best.time_s)
                best = (net_choice){ .algo = (net_algo)a, .proto = (net_proto)p, .time_s = t,
                                     .latency_s = lat };
        }
    }
    if (!isfinite(best.time_s))
        return -1;
    if (out)
        *out = best;
    return 0;
}

double net_collective_s(const cluster_spec *c, const group_span *g, coll_kind k, double bytes)
{
    net_choice ch;
    if (net_collective_choose(c, g, k, bytes, c->force_algo, c->force_proto, &ch) == 0)
        return ch.time_s;
    if (net_collective_choose(c, g, k, bytes, NET_ALGO_AUTO, c->force_proto, &ch) == 0)
        return ch.time_s;
    if (net_collective_choose(c, g, k, bytes, NET_ALGO_AUTO, NET_PROTO_AUTO, &ch) == 0)
        return ch.time_s;
    return 0.0;
}

int net_p2p_choose(const cluster_spec *c, int64_t stride, double bytes, net_proto proto,
                   net_choice *out)
{
    if (bytes <= 0) {
        if (out)
            *out = (net_choice){ .algo = NET_ALGO_P2P, .proto = NET_PROTO_SIMPLE };
        return 0;
    }
    /* Rank 0 and rank `stride` share a domain iff stride < domain size. */
    bool same = stride < c->nvlink_domain_gpus;
    const nccl_params *nc = &c->nccl;
    double bw;
    const double *hw;
    if (same) {
        bw = c->scaleup.bw_bytes_per_s * curve_at(&c->scaleup.efficiency, bytes);
        hw = intra_hw(c)->ring;
    } else {
        /* Every GPU of a stage sends at once; a share stride/su_size of the
         * pairs lands in another scalable unit. */
        double share = 0.0;
        if (c->scaleout.su_nodes > 0 && c->gpus_per_node > 0) {
            share = (double)stride / (double)c->gpus_per_node / (double)c->scaleout.su_nodes;
            share = share > 1.0 ? 1.0 : share;
        }
        bw = cluster_nic_bw_per_gpu(c) * curve_at(&c->scaleout.efficiency, bytes) /
             spine_factor(c, share);
        hw = nc->net.ring;
    }
    net_choice best = { .algo = NET_ALGO_P2P, .proto = NET_PROTO_AUTO, .time_s = INFINITY };
    for (int p = 0; p < NET_PROTOS; p++) {
        if ((proto != NET_PROTO_AUTO && p != proto) || !proto_ok(c, NET_ALGO_P2P, (net_proto)p))
            continue;
        double b = bw * nc->ring_bw_factor[p];
        if (p == NET_PROTO_LL)
            b = fmin(b, nc->ll_max_bw_bytes_per_s[same ? 0 : 1]);
        double lat = nc->base.ring[p] + hw[p];
        double t = lat + bytes / b;
        if (t < best.time_s)
            best = (net_choice){ .algo = NET_ALGO_P2P, .proto = (net_proto)p, .time_s = t,
                                 .latency_s = lat };
    }
    if (!isfinite(best.time_s))
        return -1;
    if (out)
        *out = best;
    return 0;
}

double net_p2p_s(const cluster_spec *c, int64_t stride, double bytes)
{
    net_choice ch;
    if (net_p2p_choose(c, stride, bytes, c->force_proto, &ch) == 0 ||
        net_p2p_choose(c, stride, bytes, NET_PROTO_AUTO, &ch) == 0)
        return ch.time_s;
    return 0.0;
}

/* ------------------------------------------------------- durations */

int net_check_duration(const cluster_spec *c, const group_span *g, coll_kind k, double bytes,
                       double seconds, sim_err *err)
{
    sim_time_ps t;
    if (time_from_s_checked(seconds, &t))
        return SIM_OK;
    char where[160];
    const char *key;
    double spine = c->scaleout.spine_oversubscription *
                   fmax(g->spine_hop_fraction, g->spine_peer_fraction);
    if (g->in_nvlink_domain) {
        key = "cluster.nvlink.bw_gbytes_per_s";
        snprintf(where, sizeof where, "in one NVLink domain (%.3g GB/s per GPU)",
                 c->scaleup.bw_bytes_per_s / GB);
    } else if (spine > 1.0) {
        key = "cluster.scaleout.spine_oversubscription";
        snprintf(where, sizeof where, "on the scale-out fabric through a %.3g:1 spine",
                 c->scaleout.spine_oversubscription);
    } else {
        key = "cluster.scaleout.nic_bw_gbytes_per_s";
        snprintf(where, sizeof where,
                 "on the scale-out fabric (%.3g GB/s of NIC bandwidth per GPU: nics_per_node x "
                 "nic_bw_gbytes_per_s / gpus_per_node)", cluster_nic_bw_per_gpu(c) / GB);
    }
    return sim_err_set_at(err, SIM_EINVAL, NULL, 0, key,
                          "%s of %.6g bytes over %" PRId64 " GPUs %s would take %.3g s (limit %.3g s)",
                          coll_kind_name(k), bytes, g->size, where, seconds, LIMIT_DURATION_S);
}

/* ------------------------------------------------------------- spans */

/* Members of the group with base b below rank x: those b + t*s < x,
 * t in [0, n). */
static int64_t members_below(int64_t n, int64_t s, int64_t b, int64_t x)
{
    if (x <= b)
        return 0;
    int64_t t = imath_ceil_div(x - b, s);
    return t < n ? t : n;
}

/* Members sit at ranks b, b+s, .. up to b+E, E = (n-1)s; a tier cuts the
 * ranks into blocks of m.  Runs of consecutive members in one block: how
 * many (= distinct blocks touched, since ranks increase), the sum of their
 * squared lengths and the longest, in closed form.  With s >= m every
 * member has a block of its own.  With s < m the first and last blocks
 * touched may be partial; each block between them is whole and holds
 * floor(m/s) or one more members. */
static void block_runs(int64_t n, int64_t s, int64_t b, int64_t E, int64_t m, int64_t *runs,
                       double *sum_sq, int64_t *longest)
{
    if (s >= m) {
        *runs = n;
        *sum_sq = (double)n;
        *longest = 1;
        return;
    }
    int64_t top;
    if (__builtin_add_overflow(b, E, &top))
        top = INT64_MAX;
    int64_t k0 = b / m, k1 = top / m;
    if (k0 == k1) {
        *runs = 1;
        *sum_sq = (double)n * (double)n;
        *longest = n;
        return;
    }
    /* k0 < k1: (k0+1)*m <= k1*m <= top, no overflow. */
    int64_t first = members_below(n, s, b, (k0 + 1) * m);
    int64_t below_last = members_below(n, s, b, k1 * m), last = n - below_last;
    int64_t whole = k1 - k0 - 1, q = m / s, longer = below_last - first - whole * q;
    *runs = k1 - k0 + 1;
    *sum_sq = (double)first * (double)first + (double)whole * (double)q * (double)q +
              (double)longer * (2.0 * (double)q + 1.0) + (double)last * (double)last;
    int64_t mid = whole > 0 ? q + (longer > 0) : 0;
    *longest = first > last ? first : last;
    if (mid > *longest)
        *longest = mid;
}

/* Steps between consecutive members that cross both a domain boundary
 * (a multiple of dg) and a unit boundary (a multiple of w), for s < dg,
 * s < w, where neither block size divides the other (else the answer is
 * the number of crossings of the coarser).  Each of the J unit boundaries
 * jw the group spans (j from floor(b/w)+1) lies in one step, ending at
 * member position p = b + s*ceil((jw-b)/s); that step also crosses a
 * domain boundary iff p is < s past a multiple of dg.  After t0 =
 * s/gcd(s,w) boundaries p has moved by t0*w, a multiple of s, so the test
 * is periodic in j; one period is counted and repeated. */
static int64_t shared_crossings(int64_t s, int64_t dg, int64_t w, int64_t b, int64_t J)
{
    int64_t t0 = s / imath_gcd(s, w), shift = w / imath_gcd(s, w), mod = dg / imath_gcd(s, dg);
    int64_t period;
    if (__builtin_mul_overflow(t0, mod / imath_gcd(mod, shift), &period))
        period = J;
    int64_t len = J < period ? J : period, in_period = 0, in_rest = 0, rest = J % len;
    int64_t j0 = b / w;
    for (int64_t j = 1; j <= len; j++) {
        int64_t jw = (j0 + j) * w; /* <= b + E: no overflow */
        int64_t pos = b + imath_ceil_div(jw - b, s) * s;
        if (pos % dg < s) {
            in_period++;
            if (j <= rest)
                in_rest++;
        }
    }
    return J / len * in_period + in_rest;
}

/* GPUs per scalable unit; one unit for the whole cluster when unset or
 * past any rank. */
static int64_t su_gpus(const cluster_spec *c, int64_t gpn)
{
    int64_t w = INT64_MAX;
    if (c->scaleout.su_nodes > 0 && __builtin_mul_overflow(c->scaleout.su_nodes, gpn, &w))
        w = INT64_MAX;
    return w;
}

void net_group_span_at(const cluster_spec *c, int64_t size, int64_t stride, int64_t base,
                       group_span *out)
{
    memset(out, 0, sizeof *out);
    out->size = size;
    out->stride = stride;
    out->base = base > 0 ? base : 0;
    out->concurrent = size > 0 && c->num_gpus >= size ? c->num_gpus / size : 1;
    out->in_nvlink_domain = true;
    if (size <= 0)
        return;
    const int64_t n = size, s = stride > 0 ? stride : 0, b = out->base;
    const int64_t gpn = c->gpus_per_node > 0 ? c->gpus_per_node : 1;
    const int64_t dg = c->nvlink_domain_gpus > 0 ? c->nvlink_domain_gpus : 1;
    const int64_t w = su_gpus(c, gpn);
    /* The last member's distance from the base; a group reaching past
     * int64 ranks is cut at the largest rank (no world is that large). */
    int64_t E;
    if (__builtin_mul_overflow(n - 1, s, &E))
        E = INT64_MAX;
    if (s == 0) { /* every member on the base rank */
        out->nodes = out->domains = out->sus = 1;
        out->ranks_per_node = n;
        return;
    }
    double sq_dom, sq_su, sq_node;
    int64_t long_dom, long_su;
    block_runs(n, s, b, E, gpn, &out->nodes, &sq_node, &out->ranks_per_node);
    block_runs(n, s, b, E, dg, &out->domains, &sq_dom, &long_dom);
    block_runs(n, s, b, E, w, &out->sus, &sq_su, &long_su);
    out->in_nvlink_domain = out->domains <= 1;

    if (out->domains > 1) {
        /* Ring hops between domains: one per domain (the ring closes from
         * the last member back to the first); those that also change the
         * unit cross the spine, the closing one iff there are two units. */
        int64_t hops = out->domains, dom_steps = out->domains - 1, su_steps = out->sus - 1;
        int64_t spine;
        if (s >= dg || w % dg == 0)
            spine = su_steps; /* every unit change is a domain change */
        else if (s >= w || dg % w == 0)
            spine = dom_steps;
        else
            spine = su_steps > 0 ? shared_crossings(s, dg, w, b, su_steps) : 0;
        spine += out->sus > 1;
        out->spine_hop_fraction = (double)spine / (double)hops;
    }
    /* Ordered pairs of members in different domains, and in different
     * units: n^2 minus the pairs inside each run. */
    double n2 = (double)n * (double)n;
    double other_dom = n2 - sq_dom, other_su = n2 - sq_su;
    double f = other_dom > 0 ? other_su / other_dom : 0.0;
    out->spine_peer_fraction = f > 1.0 ? 1.0 : f;
}

void net_group_span(const cluster_spec *c, int64_t size, int64_t stride, group_span *out)
{
    net_group_span_at(c, size, stride, 0, out);
}

/* --------------------------------------------------------- placements */

static bool same_place(const group_span *a, const group_span *b)
{
    return a->nodes == b->nodes && a->ranks_per_node == b->ranks_per_node &&
           a->domains == b->domains && a->sus == b->sus &&
           a->spine_hop_fraction == b->spine_hop_fraction &&
           a->spine_peer_fraction == b->spine_peer_fraction;
}

/* Whether a is slower than b: more domains crossed, then the larger
 * spine share, then more units, then more nodes. */
static bool slower_place(const group_span *a, const group_span *b)
{
    if (a->domains != b->domains)
        return a->domains > b->domains;
    double sa = fmax(a->spine_hop_fraction, a->spine_peer_fraction);
    double sb = fmax(b->spine_hop_fraction, b->spine_peer_fraction);
    if (sa != sb)
        return sa > sb;
    if (a->sus != b->sus)
        return a->sus > b->sus;
    return a->nodes > b->nodes;
}

#define MAX_OF(a, b) ((a) > (b) ? (a) : (b))

static void envelope_add(group_span *e, const group_span *g)
{
    e->nodes = MAX_OF(e->nodes, g->nodes);
    e->ranks_per_node = MAX_OF(e->ranks_per_node, g->ranks_per_node);
    e->domains = MAX_OF(e->domains, g->domains);
    e->sus = MAX_OF(e->sus, g->sus);
    e->spine_hop_fraction = fmax(e->spine_hop_fraction, g->spine_hop_fraction);
    e->spine_peer_fraction = fmax(e->spine_peer_fraction, g->spine_peer_fraction);
    e->in_nvlink_domain = e->domains <= 1;
    e->base = e->base < g->base ? e->base : g->base;
}

static void place_add(group_placements *p, const group_span *g, int64_t count)
{
    for (int i = 0; i < p->n; i++) {
        if (!(p->envelope && i == p->n - 1) && same_place(&p->span[i], g)) {
            p->groups[i] += count;
            if (g->base < p->span[i].base)
                p->span[i].base = g->base;
            return;
        }
    }
    if (p->n < CLUSTER_MAX_PLACEMENTS) {
        p->span[p->n] = *g;
        p->groups[p->n++] = count;
        return;
    }
    p->envelope = true;
    envelope_add(&p->span[p->n - 1], g);
    p->groups[p->n - 1] += count;
}

/* lcm of the block sizes that can place the groups of bases i + j*B
 * (i < stride) differently; 1 for a group of one rank.  A block size m
 * places every group alike when m <= stride (each member has a block of
 * its own), m >= world (a block holds every group whole), B divides m
 * (each group lies inside one block), or m divides B and stride divides m
 * (each group meets the same boundaries after the same members).  0 when
 * the lcm overflows or reaches the world, where no two bases are known to
 * repeat. */
static int64_t place_period(int64_t world, int64_t size, int64_t stride, int64_t B,
                            const int64_t *m, int k)
{
    int64_t L = 1;
    if (size <= 1 || stride <= 0)
        return 1;
    for (int i = 0; i < k; i++) {
        if (m[i] <= stride || m[i] >= world || m[i] % B == 0 ||
            (B % m[i] == 0 && m[i] % stride == 0))
            continue;
        int64_t t;
        if (__builtin_mul_overflow(L / imath_gcd(L, m[i]), m[i], &t) || t >= world)
            return 0;
        L = t;
    }
    return L;
}

void net_group_placements_of(const cluster_spec *c, int64_t size, int64_t stride, int64_t first,
                             int64_t repeat, int64_t count, group_placements *out)
{
    memset(out, 0, sizeof *out);
    const int64_t si = first > 0 ? first : 1, G = count > 0 ? count : 1;
    const int64_t B = repeat > 0 ? repeat : 1;
    const int64_t gpn = c->gpus_per_node > 0 ? c->gpus_per_node : 1;
    const int64_t m[3] = { gpn, c->nvlink_domain_gpus, su_gpus(c, gpn) };
    int64_t world; /* past the last base's group: no boundary beyond it counts */
    if (__builtin_mul_overflow(G, B, &world))
        world = INT64_MAX;
    int64_t L = place_period(world, size, stride, B, m, 3);
    /* Base i + j*B has the placement of base (i mod L) + (j mod P)*B,
     * P = L/gcd(B, L): the visited bases are those of one period, each
     * counted for the groups it stands for. */
    int64_t ni = L > 0 && L < si ? L : si;
    int64_t P = L > 0 ? L / imath_gcd(B, L) : G;
    int64_t nj = P < G ? P : G;
    /* Distinct pairs (i, j) can still meet in one residue mod L: with a
     * short period the groups are counted per residue first, and each
     * residue's placement is computed once, from its lowest base. */
    enum { RESIDUES = 1024 };
    int32_t res_count[RESIDUES];
    int64_t res_base[RESIDUES];
    bool by_residue = L > 0 && L <= RESIDUES && ni * nj > L;
    if (by_residue)
        for (int64_t r = 0; r < L; r++)
            res_count[r] = 0;
    for (int64_t i = 0; i < ni; i++) {
        int64_t ci = L > 0 && L < si ? (si - 1 - i) / L + 1 : 1;
        for (int64_t j = 0; j < nj; j++) {
            int64_t cj = P < G ? (G - 1 - j) / P + 1 : 1, b = i + j * B;
            if (by_residue) {
                int64_t r = b % L;
                if (res_count[r] == 0 || b < res_base[r])
                    res_base[r] = b;
                res_count[r] += (int32_t)(ci * cj); /* <= world / size */
                continue;
            }
            group_span g;
            net_group_span_at(c, size, stride, b, &g);
            place_add(out, &g, ci * cj);
        }
    }
    for (int64_t r = 0; by_residue && r < L; r++) {
        if (res_count[r] == 0)
            continue;
        group_span g;
        net_group_span_at(c, size, stride, res_base[r], &g);
        place_add(out, &g, res_count[r]);
    }
    out->total = si * G;
    for (int i = 1; i < out->n; i++)
        if (slower_place(&out->span[i], &out->span[out->worst]))
            out->worst = i;
}

void net_group_placements(const cluster_spec *c, int64_t world, int64_t size, int64_t stride,
                          group_placements *out)
{
    int64_t B, si = stride > 0 ? stride : 1;
    if (size > 0 && !__builtin_mul_overflow(size, si, &B) && B <= world)
        net_group_placements_of(c, size, stride, si, B, world / B, out);
    else /* no room for more than the group from rank 0 */
        net_group_placements_of(c, size, stride, 1, 1, 1, out);
}

double net_collective_worst_s(const cluster_spec *c, const group_placements *p, coll_kind k,
                              double bytes)
{
    const group_span *w = &p->span[p->worst];
    double t = net_collective_s(c, w, k, bytes);
    for (int i = 0; i < p->n; i++) {
        const group_span *g = &p->span[i];
        /* a collective's time reads only the domains and spine shares */
        if (i == p->worst || (g->domains == w->domains &&
                              g->spine_hop_fraction == w->spine_hop_fraction &&
                              g->spine_peer_fraction == w->spine_peer_fraction))
            continue;
        t = fmax(t, net_collective_s(c, g, k, bytes));
    }
    return t;
}
