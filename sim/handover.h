/* handover: a planned layout handed on — the KEY=VALUE overrides that
 * rerun it with `parsim run` or launch it with Megatron Bridge's
 * scripts/training/run_recipe.py, and a Slurm batch script that does the
 * latter.
 *
 * The overrides are every setting a search or sweep decides (parallel
 * sizes, the layer split, CP communication, SP, recompute, micro and global
 * batch, distributed optimizer and its overlaps), whether or not it differs
 * from the config, so they reproduce the layout on any base that shares
 * the model and the system.  Two spellings:
 *   HANDOVER_PARSIM  parsim's values (0 = the key's default) and
 *                    cluster.num_gpus: `parsim run CONFIG <these>`
 *                    simulates the same step;
 *   HANDOVER_BRIDGE  Megatron Bridge's: `null` for the defaults parsim
 *                    spells 0 or none (no VPP, ETP = TP, even split, no
 *                    recompute), no cluster keys (the launcher gives the
 *                    world size); run_recipe.py takes them as they are.
 * Words are space-separated and shell-quoted where needed ('[2,2]').
 */
#ifndef PARSIM_HANDOVER_H
#define PARSIM_HANDOVER_H

#include <stdbool.h>
#include <stdio.h>

#include "config.h"
#include "err.h"
#include "strategy.h"

typedef enum { HANDOVER_PARSIM = 0, HANDOVER_BRIDGE } handover_flavor;

/* The layout of in (cluster.num_gpus, par, train, ddp) as overrides, on
 * one line without a newline. */
void handover_overrides(FILE *out, const run_inputs *in, handover_flavor fl);

/* s as one shell word: as it is when every character is safe, else in
 * single quotes. */
void handover_shell_word(FILE *out, const char *s);

/* Whether name may be a recipe name in the script: letters, digits, '_',
 * '.', '-' (nothing the shell would read). */
bool handover_recipe_ok(const char *name);

/* A Slurm batch script running run_recipe.py --recipe RECIPE (NULL: the
 * script asks for $RECIPE) with the Bridge overrides: whole nodes of
 * cluster.gpus_per_node GPUs, one torchrun a node.  SIM_EINVAL when the
 * world size is not whole nodes. */
int handover_sbatch(FILE *out, const run_inputs *in, const strategy_t *s, const char *recipe, sim_err *err);

#endif
