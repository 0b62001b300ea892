/* cluster: the GPUs and the fabric that joins them.
 *
 * cluster_spec is plain data filled by config from cluster.* keys, most of
 * them from a topology preset (topologies/<name>.cfg), where every number
 * carries its source.  The fabric has two tiers:
 *
 *   scale-up   an NVLink/NVSwitch domain of nvlink_domain_gpus GPUs (8 in a
 *              DGX, 72 in an NVL72 rack), or PCIe where a system has no
 *              NVLink (scaleup.kind); measured bus bandwidths per GPU for
 *              ring collectives, all-to-all and NVLink SHARP (NVLS).
 *   scale-out  nics_per_node NICs per node (InfiniBand, RoCE or Ethernet),
 *              each on its own rail of a rail-optimized fat tree: one leaf
 *              switch per rail serves the su_nodes nodes of a scalable unit,
 *              and traffic between scalable units crosses a spine that may
 *              be oversubscribed.
 *
 * Each tier has an efficiency curve over message size (bytes per rank ->
 * achieved fraction of its bandwidth).  NCCL's own cost-model constants
 * (latencies per algorithm and protocol, protocol bandwidth factors) sit in
 * nccl_params: they are calibration choices of a library, not measurements.
 * Units: flop/s, bytes, bytes/s, seconds (config keys use TFLOP/s, GB, GB/s,
 * KiB and microseconds, converted on load).
 */
#ifndef PARSIM_CLUSTER_H
#define PARSIM_CLUSTER_H

#include <stdbool.h>
#include <stdint.h>

typedef struct gpu_spec {
    char name[32];
    double peak_bf16_flops_per_s;   /* dense tensor-core peak */
    double peak_fp8_flops_per_s;    /* 0 if unsupported */
    double peak_fp4_flops_per_s;    /* 0 if unsupported */
    double hbm_capacity_bytes;
    double hbm_bw_bytes_per_s;      /* vendor peak */
    int64_t sm_count;               /* streaming multiprocessors (0 = no wave model) */
    double host_link_bytes_per_s;   /* GPU <-> host memory copy, per GPU and direction
                                       (0 = not given): CPU offloading's copies */
} gpu_spec;

/* Achievable fractions of the peaks above, and fixed overheads. */
/* A measured efficiency table (bench/gpu_microbench.py --format cfg), named
 * by cluster.compute.microbench: GEMM efficiency by shape per dtype and
 * flash attention efficiency by key length and head dimension, against the
 * dense peaks, and the measured HBM copy bandwidth.  Empty parts leave the
 * analytic model in charge. */
#define MICROBENCH_MAX_GEMM 1024
#define MICROBENCH_MAX_ATTN 128
typedef struct microbench_gemm {
    float log_m, log_n, log_k; /* ln of the shape: lookups compare in log space */
    float efficiency;
} microbench_gemm;
typedef struct microbench_attn {
    float seq, head_dim, efficiency;
} microbench_attn;
typedef struct microbench_table {
    int n_gemm[2];                                   /* [0] bf16, [1] fp8 */
    microbench_gemm gemm[2][MICROBENCH_MAX_GEMM];
    int n_attn[2];                                   /* [0] forward, [1] backward */
    microbench_attn attn[2][MICROBENCH_MAX_ATTN];    /* sorted by head_dim, then seq */
    double hbm_bytes_per_s;                          /* 0 = peak x hbm_efficiency */
} microbench_table;

/* The published kernel table of a GPU (kernels/<gpu>.cfg, named by
 * cluster.compute.kernels; sim/kerneltable.h reads it): achieved TFLOPS of
 * GEMMs by shape per precision recipe, of grouped GEMMs, of attention by
 * kernel family, pass, mask, window, head dimension and sequence length, and
 * the MoE flex dispatcher's dispatch/combine rates by backend and EP size.
 * Every figure says whether the sustained clock fraction applies to it
 * (taken at a clock training does not hold) or not (it already includes
 * throttling, or was power capped). */
#define KT_MAX_GEMM 48   /* shapes per precision */
#define KT_MAX_CURVES 48 /* attention curves */
#define KT_MAX_SEQ 12    /* points of one attention curve */
#define KT_MAX_FLEX 12   /* flex rate points per backend */
typedef enum { KT_BF16 = 0, KT_FP8_TENSOR, KT_FP8_BLOCK, KT_MXFP8, KT_NVFP4, KT_PRECISIONS } kt_precision;
typedef enum { KT_CUDNN = 0, KT_FA2, KT_FA3, KT_FA4, KT_FAMILIES } kt_family;
typedef enum { KT_DEEPEP = 0, KT_HYBRIDEP, KT_FLEX_BACKENDS } kt_flex_backend;
typedef struct kt_gemm {
    float log_m, log_n, log_k, log_groups; /* ln of the shape (groups 1 for plain GEMMs) */
    double m, n, k, groups;
    double flops_per_s;                    /* as published, times the clock fraction where it applies */
    bool best_shape;                       /* the best shape of a brute-force sweep (MAMF): no tile or
                                              wave loss at it, by construction */
} kt_gemm;
typedef struct kt_curve {
    kt_family family;
    bool backward, causal;
    double window;                         /* keys of a sliding window; 0 = full attention */
    double head_dim;
    int n;
    double log2_seq[KT_MAX_SEQ];           /* strictly increasing */
    double flops_per_s[KT_MAX_SEQ];
} kt_curve;
typedef struct kt_flex {
    bool network;                          /* false: inside the NVLink domain; true: across it */
    double ranks;
    double sms;                            /* SMs the kernels ran on; 0 = not stated */
    double dispatch_bytes_per_s, combine_bytes_per_s;
} kt_flex;
typedef struct kernel_table {
    bool loaded;
    double clock_fraction;                 /* sustained / boost SM clock under the power limit */
    int n_gemm[KT_PRECISIONS];
    kt_gemm gemm[KT_PRECISIONS][KT_MAX_GEMM];
    int n_grouped[KT_PRECISIONS];
    kt_gemm grouped[KT_PRECISIONS][KT_MAX_GEMM];
    kt_family auto_family;                 /* attention_backend auto (what Transformer Engine picks) */
    kt_family flash_family;                /* attention_backend flash */
    bool sinks[KT_FAMILIES];               /* family supports softmax sinks (off-by-one, learnable) */
    int n_curves;
    kt_curve curves[KT_MAX_CURVES];
    int n_flex[KT_FLEX_BACKENDS];
    kt_flex flex[KT_FLEX_BACKENDS][KT_MAX_FLEX]; /* sorted: NVLink first, then by SMs, then by ranks */
    double ssd_efficiency;                 /* Mamba-2 chunked SSD scan / bf16 peak; 0 = not given */
} kernel_table;

typedef struct compute_params {
    /* Analytic model: one large-GEMM and one attention plateau efficiency
     * for every shape and kernel family.  0 = take the kernel table's
     * figures; a value set replaces them (an override of the table). */
    double gemm_efficiency;          /* large bf16 GEMM / peak (MAMF ratio) */
    double gemm_fp8_efficiency;      /* large fp8 GEMM / fp8 peak */
    double attention_fwd_efficiency; /* flash attention forward / bf16 peak */
    double attention_bwd_efficiency; /* flash attention backward / bf16 peak */
    double hbm_efficiency;           /* achievable / peak HBM bandwidth */
    double sustained_fraction;       /* share of the benchmarked tensor-core
                                        ceilings (GEMM, attention) held in a
                                        training job; 1 = as benchmarked */
    double kernel_overhead_s;        /* fixed cost per kernel launch */
    double pass_overhead_s;          /* fixed host cost per forward or backward pass of
                                        a microbatch (schedule step, data, loss); 0 = none */
    /* GEMM shape: output tile of the library's large kernels (0 = no tile
     * or wave quantization) and the K depth whose prologue/epilogue cost
     * equals the main loop's (efficiency k / (k + gemm_k_overhead)). */
    double gemm_tile_m, gemm_tile_n;
    double gemm_k_overhead;
    /* Flash attention reaches half its plateau efficiency at this key
     * length (efficiency s / (s + this)); 0 = flat. */
    double attention_seq_half_tokens;
    /* Head dimension at which attention reaches half the efficiency it has
     * at 128 (the dimension the plateau was measured at): efficiency scales
     * by d/(d + this) over 128/(128 + this), capped at 1; 0 = flat. */
    double attention_head_dim_half;
    /* Share of the SMs a collective running beside a kernel takes from it
     * (the kernel runs at 1 - share of its speed while they overlap), for
     * collectives inside the NVLink domain and across the network. */
    double overlap_sm_share_nvlink;
    double overlap_sm_share_network;
    microbench_table bench;          /* measured tables, when named */
    kernel_table kernels;            /* published tables, when named (the measured ones win) */
} compute_params;

typedef enum { SCALEUP_NVLINK = 0, SCALEUP_PCIE } scaleup_kind;
typedef enum { FABRIC_INFINIBAND = 0, FABRIC_ROCE, FABRIC_ETHERNET } fabric_kind;

/* NCCL's algorithms (NCCL_ALGO) plus the two forms parsim adds: the
 * hierarchical one (intra-domain, then inter-domain, then intra-domain) and
 * point-to-point (all-to-all and send/recv, which have no algorithm).
 * AUTO = choose by predicted time, as NCCL's tuning does. */
typedef enum {
    NET_ALGO_AUTO = -1,
    NET_ALGO_RING = 0,
    NET_ALGO_TREE,
    NET_ALGO_NVLS,
    NET_ALGO_NVLS_TREE,
    NET_ALGO_HIER,
    NET_ALGO_P2P,
    NET_ALGOS
} net_algo;

/* NCCL's protocols (NCCL_PROTO). */
typedef enum {
    NET_PROTO_AUTO = -1,
    NET_PROTO_LL = 0,
    NET_PROTO_LL128,
    NET_PROTO_SIMPLE,
    NET_PROTOS
} net_proto;

/* Achieved fraction of a tier's bandwidth against message size, linear in
 * log2(bytes) between points and flat beyond the ends.  The scale-up curve
 * is read at the collective's size S (it is measured on one node), the
 * scale-out curve at the bytes each rank adds, S/n (measured across node
 * counts, where it lines up that way), for all-to-all at the bytes a rank
 * sends to one remote domain, S/D; p2p reads both at the message. */
#define NET_CURVE_MAX 16
typedef struct net_curve {
    int n;                            /* points; 0 = efficiency 1 at every size */
    double log2_bytes[NET_CURVE_MAX]; /* strictly increasing */
    double efficiency[NET_CURVE_MAX]; /* in (0, 1] */
} net_curve;

typedef struct scaleup_spec {
    scaleup_kind kind;
    double bw_bytes_per_s;       /* ring bus bandwidth per GPU, one direction (large
                                    ring all-reduce busbw) */
    double a2a_bw_bytes_per_s;   /* all-to-all bus bandwidth per GPU, large messages */
    double nvls_bw_bytes_per_s;  /* NVLink SHARP: per-GPU rate of the switch
                                    reduce/multicast path; 0 = no NVLS */
    net_curve efficiency;
} scaleup_spec;

typedef struct scaleout_spec {
    fabric_kind kind;
    int64_t nics_per_node;         /* compute-fabric NICs (rails) per node */
    double nic_bw_bytes_per_s;     /* achievable per NIC, one direction */
    double a2a_efficiency;         /* all-to-all: achieved share of the NIC bandwidth */
    int64_t su_nodes;              /* nodes per scalable unit (one leaf per rail);
                                      0 = the whole cluster is one unit */
    double spine_oversubscription; /* leaf downlink : uplink bandwidth, >= 1 */
    double hier_serial_fraction;   /* two-tier algorithms: share of the shorter
                                      tier's time not hidden behind the longer */
    net_curve efficiency;
} scaleout_spec;

/* Latency constants of NCCL's tuning model, per protocol (LL, LL128,
 * Simple), seconds.  NVLS and NVLS tree run Simple only. */
typedef struct nccl_latency {
    double ring[NET_PROTOS];
    double tree[NET_PROTOS];
    double nvls;       /* hardware rows only (NCCL's base latency for NVLS is 0) */
    double nvls_tree;
} nccl_latency;

typedef struct nccl_params {
    nccl_latency base;     /* baseLat: per call */
    nccl_latency nvlink;   /* hwLat[NVLINK]: per algorithm step inside a domain */
    nccl_latency pcie;     /* hwLat[PCI] */
    nccl_latency net;      /* hwLat[NET]: per step across domains */
    double net_overhead_s;             /* per intra step once a group spans domains */
    double net_overhead_simple_factor; /* net overhead multiplier for Simple */
    double ll_max_bw_bytes_per_s[3];   /* LL bus bandwidth cap: 1, 2, >= 3 domains */
    double ring_bw_factor[NET_PROTOS]; /* protocol share of the ring bandwidth */
    double tree_bw_factor[NET_PROTOS]; /* same for tree (LL128: groups across domains) */
    double tree_ll128_one_domain_factor; /* tree LL128 inside one domain */
    double ring_plateau_factor; /* ring Simple all-reduce across domains: latency x */
    bool ll128;                 /* LL128 enabled on this platform */
} nccl_params;

/* The host thread of a rank that issues its GPU work (cluster.host.*).
 * Host costs are separate from the GPU-side cost of a kernel
 * (compute.kernel_overhead_s, inside each kernel's duration): a kernel
 * cannot start before the host has issued it, and the host runs ahead
 * while kernels are long, so the two overlap instead of adding up. */
/* Framework ops per module call beyond the kernels workload costs
 * (PyTorch calls that launch a small kernel or allocate: topk, scatter,
 * bincount, empty, ...), each taking launch_s of host time
 * (cluster.host.framework_ops.*, counted in topologies/host/megatron-core.cfg).
 * MOE_PER_EXPERT is per local expert of the expert module. */
enum {
    HOST_OPS_ATTN, HOST_OPS_MLP, HOST_OPS_MOE_ROUTER, HOST_OPS_MOE_PREPROCESS, HOST_OPS_MOE_DISPATCH,
    HOST_OPS_MOE_EXPERTS, HOST_OPS_MOE_PER_EXPERT, HOST_OPS_MOE_COMBINE, HOST_OPS_EMBEDDING, HOST_OPS_OUTPUT,
    HOST_OPS_MAMBA, HOST_OPS_KINDS
};

typedef struct host_params {
    double launch_s;         /* host time to issue one kernel or collective
                                (PyTorch dispatch + CUDA launch) */
    int64_t framework_ops[HOST_OPS_KINDS]; /* forward, per module call */
    double framework_ops_bwd_factor;       /* backward ops per forward op (autograd) */
    bool grouped_gemm_per_expert;     /* a grouped expert GEMM launches once per local expert */
    bool grouped_quantize_per_expert; /* so does the quantize of the expert inputs */
    int64_t ssd_launches_fwd;         /* kernels of the chunked SSD scan, forward */
    int64_t ssd_launches_bwd;         /* and backward (recomputed states included) */
    double op_overhead_s;    /* framework time per module call (Python, autograd) */
    double sync_s;           /* a device-to-host copy and stream sync, beyond the
                                wait for the GPU to drain */
    double graph_launch_s;   /* one CUDA graph replay */
    double optimizer_s;      /* host time issuing the optimizer step */
    double graph_pool_bytes;    /* CUDA graph memory pool, PP = 1 */
    double graph_pool_pp_bytes; /* with PP > 1 */
} host_params;

typedef struct cluster_spec {
    char name[64];          /* topology preset name */
    int64_t num_gpus;       /* GPUs in the job (world size) */
    int64_t gpus_per_node;
    int64_t nvlink_domain_gpus; /* GPUs of one scale-up domain the job's ranks fill (8, or
                                   72 for NVL72; cluster.nvlink_domain_job_gpus when set) */
    int64_t nvlink_domain_job_gpus; /* as set: 0 = the whole domain */
    gpu_spec gpu;
    compute_params compute;
    host_params host;
    scaleup_spec scaleup;
    scaleout_spec scaleout;
    nccl_params nccl;
    net_algo force_algo;    /* sim.nccl_algo; AUTO = NCCL's choice */
    net_proto force_proto;  /* sim.nccl_proto */
} cluster_spec;

void cluster_defaults(cluster_spec *c);

/* Node, scale-up domain and scalable unit of a global rank (ranks fill
 * nodes in order, nodes fill units in order). */
int64_t cluster_node_of(const cluster_spec *c, int64_t rank);
int64_t cluster_domain_of(const cluster_spec *c, int64_t rank);
int64_t cluster_su_of(const cluster_spec *c, int64_t rank);

/* Scale-out bandwidth one GPU can count on when every GPU of its node
 * drives the NICs at once: the node's NIC bandwidth shared equally. */
double cluster_nic_bw_per_gpu(const cluster_spec *c);

/* How one communication group sits on the fabric (filled by
 * net_group_span_at).  Groups of a kind are translates of each other under
 * Megatron's order (same size and stride, another base) and run their
 * collectives at the same time; where the base falls against node, domain
 * and unit boundaries can differ, so a kind can have several placements
 * (group_placements).  What the groups share: every GPU of a node drives
 * the node's NICs at once (each gets its share, cluster_nic_bw_per_gpu),
 * and a leaf's uplinks to the spine carry the share of its traffic that
 * leaves the scalable unit. */
typedef struct group_span {
    int64_t size;            /* ranks in the group */
    int64_t stride;          /* rank distance between consecutive members */
    int64_t base;            /* lowest member's rank */
    int64_t nodes;           /* distinct nodes the group touches */
    int64_t ranks_per_node;  /* max members on one node */
    int64_t domains;         /* distinct NVLink domains touched */
    bool in_nvlink_domain;   /* all members in one NVLink domain */
    int64_t sus;             /* distinct scalable units (leaf groups) touched */
    int64_t concurrent;      /* groups of this kind running at once: world / size */
    double spine_hop_fraction;  /* ring/tree: share of the hops between domains
                                   that cross scalable units, through the spine */
    double spine_peer_fraction; /* all-to-all: share of a member's peers in
                                   other domains that sit in other units */
} group_span;

/* The distinct placements of the groups of one kind (net_group_placements)
 * and how many groups have each.  span[worst] has the most domains, then
 * the largest spine share, units and nodes: it paces the kind's collective
 * steps.  When a kind has more than CLUSTER_MAX_PLACEMENTS distinct
 * placements, the last entry is the envelope of the rest (each field its
 * largest value over them: no faster than any of them) and `envelope` is
 * set. */
#define CLUSTER_MAX_PLACEMENTS 8
typedef struct group_placements {
    int n;                   /* entries in span[] (>= 1) */
    int worst;               /* index of the slowest placement */
    bool envelope;           /* span[n-1] stands for several placements */
    int64_t total;           /* groups of the kind: world / size */
    int64_t groups[CLUSTER_MAX_PLACEMENTS]; /* groups with each placement */
    group_span span[CLUSTER_MAX_PLACEMENTS]; /* the lowest base of each */
} group_placements;

const char *net_algo_name(net_algo a);
bool net_algo_from_name(const char *name, net_algo *out); /* also NCCL_ALGO's "nvlstree" */
const char *net_proto_name(net_proto p);
bool net_proto_from_name(const char *name, net_proto *out);
const char *fabric_kind_name(fabric_kind k);
const char *scaleup_kind_name(scaleup_kind k);

#endif
