/* cluster: the GPUs and the fabric that joins them.
 *
 * cluster_spec is plain data filled by config from cluster.* keys, most of
 * them from a topology preset (topologies/<name>.cfg).  Every number there
 * carries its source in the preset file.  Two tiers are described: the
 * NVLink (scale-up) domain and the scale-out network (InfiniBand, RoCE,
 * Ethernet), each with an achievable per-GPU bandwidth and a per-step
 * latency.  A system without NVLink gives its PCIe figures as the
 * scale-up tier.
 * Units: flop/s, bytes, bytes/s, seconds (config keys use TFLOP/s, GB, GB/s
 * and microseconds, converted on load).
 */
#ifndef PARSIM_CLUSTER_H
#define PARSIM_CLUSTER_H

#include <stdint.h>

typedef struct gpu_spec {
    char name[32];
    double peak_bf16_flops_per_s;   /* dense tensor-core peak */
    double peak_fp8_flops_per_s;    /* 0 if unsupported */
    double peak_fp4_flops_per_s;    /* 0 if unsupported */
    double hbm_capacity_bytes;
    double hbm_bw_bytes_per_s;      /* vendor peak */
} gpu_spec;

/* Achievable fractions of the peaks above, and fixed overheads. */
typedef struct compute_params {
    double gemm_efficiency;          /* large bf16 GEMM / peak (MAMF ratio) */
    double gemm_fp8_efficiency;      /* large fp8 GEMM / fp8 peak */
    double attention_fwd_efficiency; /* flash attention forward / bf16 peak */
    double attention_bwd_efficiency; /* flash attention backward / bf16 peak */
    double hbm_efficiency;           /* achievable / peak HBM bandwidth */
    double kernel_overhead_s;        /* fixed cost per kernel launch */
} compute_params;

typedef enum { FABRIC_INFINIBAND = 0, FABRIC_ROCE, FABRIC_ETHERNET } fabric_kind;

typedef struct tier_spec {
    double bw_bytes_per_s;  /* achievable per GPU, one direction */
    double latency_s;       /* per algorithm step */
} tier_spec;

typedef struct cluster_spec {
    char name[64];          /* topology preset name */
    int64_t num_gpus;       /* GPUs in the job (world size) */
    int64_t gpus_per_node;
    int64_t nvlink_domain_gpus; /* GPUs in one scale-up domain (8, or 72 for NVL72) */
    gpu_spec gpu;
    compute_params compute;
    tier_spec nvlink;       /* scale-up tier */
    tier_spec scaleout;     /* per-GPU NIC into the scale-out network */
    fabric_kind scaleout_kind;
} cluster_spec;

void cluster_defaults(cluster_spec *c);

/* Node and scale-up domain of a global rank (ranks fill nodes in order). */
int64_t cluster_node_of(const cluster_spec *c, int64_t rank);
int64_t cluster_domain_of(const cluster_spec *c, int64_t rank);

const char *fabric_kind_name(fabric_kind k);

#endif
