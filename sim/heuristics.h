/* heuristics: the starting point the common rules of thumb give, as the
 * Megatron Bridge parallelism guide (docs/parallelisms.md, reference §6)
 * and its performance skill state them.  `parsim search` simulates it
 * beside the searched layouts to show what searching buys.
 *
 * The rules, in the order they are applied (heuristics.c has the tables):
 *   1. TP by model size (dense: total parameters; MoE: active parameters,
 *      at most 4 because EP carries the experts), kept inside the NVLink
 *      domain and dividing the heads.
 *   2. Sequence length: SP from 2K tokens (with TP > 1); CP 2 from 8K;
 *      CP 4 from 32K and 8 from 64K, with hierarchical a2a+p2p (the a2a
 *      level inside the NVLink domain with TP where it fits, else 2).
 *   3. MoE: ETP 1, EP the largest divisor of the experts that fits the
 *      NVLink domain.
 *   4. PP by model size (dense table; MoE starts at 1), the nearest size
 *      with a layer split (strategy_split_layers: even, else uneven); then
 *      PP grows while the model does not fit
 *      (then EP, for MoE, beyond the NVLink domain; then selective, then
 *      full recompute).
 *   5. Interleaving when PP > 1: the smallest VP that leaves at most 4
 *      layers per model chunk (the recipes' shape).
 *   6. MBS 1, distributed optimizer on, DP takes the rest.
 * Whatever the rules give is then made legal (strategy_resolve) by the
 * fewest changes: VP off, CP, TP and PP stepped down.
 */
#ifndef PARSIM_HEURISTICS_H
#define PARSIM_HEURISTICS_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "strategy.h"

/* The sequence-length rules of the Megatron Bridge parallelism guide
 * (megatron-formulas.md §6: "< 2K standard; 2K-8K add SP; 8K-32K add CP=2;
 * 32K+ CP=4-8"); the baseline and the --layout checklist both read them. */
#define SP_FROM_TOKENS 2048
#define CP2_FROM_TOKENS 8192
#define CP4_FROM_TOKENS 32768
#define CP8_FROM_TOKENS 65536

#define HEUR_MAX_NOTES 20
#define HEUR_NOTE_LEN 200

typedef struct heur_plan {
    int64_t world;
    parallel_spec par;
    train_spec train;
    ddp_spec ddp;
    bool legal;                 /* strategy_resolve accepts it */
    bool fits;                  /* its memory lower bound fits in HBM */
    char notes[HEUR_MAX_NOTES][HEUR_NOTE_LEN]; /* one line per decision */
    int n_notes;
} heur_plan;

/* The rules of thumb for base's model, cluster and batch on `world` GPUs.
 * base's ddp overlap options are kept.  Never fails: when no legal layout
 * is found out->legal is false and the last note says why. */
void heur_baseline(const run_inputs *base, int64_t world, heur_plan *out);

/* Total and active (per token: routed experts at top-k of E) parameters. */
void heur_model_params(const model_spec *m, double *total, double *active);

#endif
