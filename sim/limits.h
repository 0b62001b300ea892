/* limits: the bounds parsim puts on its inputs so that every command ends
 * in bounded time and output.  A value beyond one is bad input (exit 2,
 * naming the key or option and the limit); README "Limits" lists them.
 *
 * Why these numbers:
 * - LIMIT_GPUS: above the largest single training cluster announced
 *   (~200k GPUs); every per-rank quantity in parsim is a closed form, so the
 *   limit keeps products of sizes far from int64 overflow, not run time.
 * - LIMIT_SWEEP_CONFIGS: a day of sweeping at ~10-20 configurations/s a core
 *   on a 64-core node; the product of the axes is checked before expansion.
 * - LIMIT_NET_ROWS: nccl-tests prints ~30 sizes; 4096 covers any factor a
 *   person reads.
 * - LIMIT_CSV_ROWS / LIMIT_LOG_LINES: published-measurement tables and
 *   nccl-tests logs are thousands of rows; a million is far beyond.
 */
#ifndef PARSIM_LIMITS_H
#define PARSIM_LIMITS_H

#define LIMIT_GPUS 262144LL            /* cluster.num_gpus, search --gpus, nccl-tests ranks */
#define LIMIT_SWEEP_CONFIGS 1000000LL  /* configurations in one sweep spec */
#define LIMIT_NET_ROWS 4096LL          /* sizes printed by parsim net */
#define LIMIT_CSV_ROWS 1000000LL       /* rows read from one CSV file */
#define LIMIT_LOG_LINES 1000000LL      /* lines read from one nccl-tests log */
#define LIMIT_DURATION_S 1.8e7         /* one simulated kernel, transfer or step (2^64 ps ~ 1.8e7 s) */

#endif
