/* bounds: the limits parsim puts on its inputs so that every command ends
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
 * - LIMIT_PASSES: forward/backward passes of one step (PP x microbatches x
 *   chunks x 2), each a task of ~100 bytes: 10^7 take about a gigabyte.
 * - LIMIT_ACT_BYTES: activation bytes one pipeline stage could hold with
 *   every forward of the step in flight; keeps the engine's int64 memory
 *   counters from overflowing (a GPU holds ~10^11).
 * - LIMIT_CSV_ROWS / LIMIT_LOG_LINES: published-measurement tables and
 *   nccl-tests logs are thousands of rows; a million is far beyond.
 * - LIMIT_VALIDATE_ROWS: validate and calibrate hold each row's case as
 *   text (~15 KB a row), so 1e5 rows is ~1.5 GB; the published set is ~500.
 * - LIMIT_RECIPE_SETTINGS: each setting of a recipes file is checked
 *   against the key table and the mapping rules (~microseconds); the
 *   bundled file has ~12000; 1e5 are read in well under a second (2 s
 *   with ASan).
 * - LIMIT_YAML_BYTES / LIMIT_YAML_NODES / LIMIT_YAML_DEPTH: a Megatron
 *   Bridge run_config.yaml is ~2000 lines (~100 KB, ~5000 nodes) nested ~6
 *   deep; the caps are 40x that or more, bound the fields an alias may
 *   repeat (libyaml shares an aliased node; parsim visits each use), and
 *   keep the read of a file at the caps near a second (2 s with ASan).
 */
#ifndef PARSIM_BOUNDS_H
#define PARSIM_BOUNDS_H

#define LIMIT_GPUS 262144LL            /* cluster.num_gpus, search --gpus, nccl-tests ranks */
#define LIMIT_SWEEP_CONFIGS 1000000LL  /* configurations in one sweep spec */
#define LIMIT_NET_ROWS 4096LL          /* sizes printed by parsim net */
#define LIMIT_CSV_ROWS 1000000LL       /* rows read from one CSV file */
#define LIMIT_LOG_LINES 1000000LL      /* lines read from one nccl-tests log */
#define LIMIT_VALIDATE_ROWS 100000LL   /* rows of one table validate or calibrate turns into runs */
#define LIMIT_RECIPE_SETTINGS 100000LL /* settings in one recipes file (all rows) */
#define LIMIT_YAML_BYTES (16LL << 20) /* bytes of one Megatron Bridge YAML config */
#define LIMIT_YAML_NODES 200000LL     /* YAML events read, and fields visited through aliases */
#define LIMIT_YAML_DEPTH 64           /* nesting of mappings and sequences in it */
#define LIMIT_PASSES 1e7               /* forward/backward passes of one simulated step */
#define LIMIT_ACT_BYTES 0x1p62         /* activations one stage holds with every forward in flight */
#define LIMIT_DURATION_S 1.8e7         /* one simulated kernel, transfer or step (2^64 ps ~ 1.8e7 s) */

/* Config keys (the key table in config.c gives each numeric key one of
 * these or a range of its own; --help-config prints them).  All are far
 * beyond any real model or machine.  Integer keys are bounded so that the
 * integer products parsim forms from them (parallel sizes multiplied
 * together, the padded vocabulary, microbatch counts) stay inside int64;
 * model sizes and FLOPs are products of these in double and stay finite.
 * Float keys are bounded so that their value in SI units is finite and a
 * duration computed from them stays below LIMIT_DURATION_S where it can. */
#define LIMIT_WIDTH 1048576LL          /* hidden, FFN, head and latent widths: 20x GPT-3's 4h */
#define LIMIT_HEADS 65536LL            /* heads, KV groups, experts, top-k, expert groups */
#define LIMIT_VOCAB 16777216LL         /* vocabulary entries: 64x the largest tokenizer (256k) */
#define LIMIT_VOCAB_MULTIPLE 65536LL   /* make_vocab_size_divisible_by: x TP stays < 2^35 */
#define LIMIT_SEQ_TOKENS 16777216LL    /* sequence length, window: beyond the longest context (~10M) */
#define LIMIT_BATCH 1048576LL          /* sequences per step or microbatch: 16x LAMB's 64k batch */
#define LIMIT_BUCKET_PARAMS (1LL << 50) /* ddp.bucket_size: parameters, 1000x a 1T-parameter model */
#define LIMIT_NICS_PER_NODE 1024LL     /* NICs per node (real: 8-16) */
#define LIMIT_SM_COUNT 65536LL         /* streaming multiprocessors per GPU (real: ~150) */
#define LIMIT_CURVE_KIB (1LL << 30)    /* efficiency curve sizes: 1 TiB per rank */
#define LIMIT_TFLOPS 1e6               /* per-GPU peaks: 100x a B200's fp4 */
#define LIMIT_HBM_GB 1e5               /* HBM per GPU: 300x a B300's (288 GB) */
#define LIMIT_BW_GBPS 1e6              /* any bandwidth per GPU or NIC: 100x HBM3e */
#define LIMIT_LATENCY_US 1e6           /* any latency or fixed overhead: one second */
#define LIMIT_FACTOR 1e3               /* dimensionless multipliers (oversubscription, plateau, ...) */
#define LIMIT_HOST_OPS 100000LL      /* framework ops per module call: 1000x Megatron Core's busiest module */
#define LIMIT_NET_BYTES 0x1p50         /* parsim net --min-bytes/--max-bytes: 1 PiB */
#define LIMIT_TOKENS 1e18             /* search --token-budget: 10000x the largest training run (~4e13) */

#endif
