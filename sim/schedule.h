/* schedule: the order in which one pipeline rank runs its forward and
 * backward passes, as Megatron Core's schedules.py does it.
 *
 *   p == 1           forward_backward_no_pipelining: F0 B0 F1 B1 ...
 *   v == 1, p > 1    non-interleaved 1F1B: warmup = min(p-rank-1, M)
 *   v > 1            interleaved 1F1B: microbatches in groups of N per
 *                    model chunk; warmup = (p-rank-1)*2 + (v-1)*N, capped
 *                    at M*v; backward walks chunks in reverse.
 * A sched_item names one pass: its kind, microbatch and model chunk.
 * Pure functions; the caller owns the arrays.
 */
#ifndef PARSIM_SCHEDULE_H
#define PARSIM_SCHEDULE_H

#include <stdint.h>

#include "err.h"

typedef enum { SCHED_F = 0, SCHED_B = 1 } sched_kind;

typedef struct sched_item {
    uint8_t kind;        /* SCHED_F or SCHED_B */
    int32_t microbatch;  /* 0..M-1 */
    int32_t chunk;       /* model chunk 0..v-1 on this rank */
} sched_item;

/* Number of items one rank runs: 2*M*v. */
int64_t sched_len(int64_t M, int64_t v);

/* Warmup forward passes of a rank (Megatron's num_warmup_microbatches). */
int64_t sched_warmup(int64_t p, int64_t v, int64_t M, int64_t N, int64_t rank);

/* Fills out[0 .. 2*M*v-1] with the order of rank `rank`.  N is
 * microbatch_group_size_per_vp_stage (ignored when v == 1).  Returns SIM_OK
 * or SIM_EINVAL (with a message) when Megatron would reject (p, v, M, N). */
int sched_build(int64_t p, int64_t v, int64_t M, int64_t N, int64_t rank,
                sched_item *out, sim_err *err);

/* The (microbatch, chunk) of virtual microbatch k in the forward order of
 * the interleaved table (get_schedule_table); backward uses chunk v-1-c. */
void sched_virtual(int64_t v, int64_t M, int64_t N, int64_t k,
                   int32_t *microbatch, int32_t *chunk);


#endif
