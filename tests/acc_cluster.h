/* The cluster of a topology preset as a run resolves it, for tests of
 * kernel-table lookups (tests/test_acc_*.c). */
#ifndef PARSIM_TESTS_ACC_CLUSTER_H
#define PARSIM_TESTS_ACC_CLUSTER_H

#include <stdio.h>

#include "sim_run.h"

/* A small MoE run on `topology`: its cluster, as the command line resolves it. */
static inline const cluster_spec *cluster_of(sim *x, const char *topology)
{
    char kv[128];
    snprintf(kv, sizeof kv, "cluster.topology=%s", topology);
    const char *keys[] = { "model.name=qwen3-30b-a3b", kv, "cluster.num_gpus=8", "model.seq_length=1024",
                           "train.global_batch_size=8", "model.expert_model_parallel_size=8", NULL };
    sim_run(x, keys);
    return &x->in.cluster;
}

#endif
