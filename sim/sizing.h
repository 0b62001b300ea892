/* sizing: the checklist a user goes through before choosing a layout,
 * printed by `parsim run --layout` under the rank table: the minimum GPU
 * count and why the common products are not it, both data-parallel sizes,
 * which groups stay inside the NVLink domain, sequence parallelism, the
 * context-parallel divisibility rule and the long-sequence guidance
 * (megatron-formulas.md §6: "< 2K standard; 2K-8K add SP; 8K-32K add
 * CP=2; 32K+ CP=4-8, consider hierarchical CP"). */
#ifndef PARSIM_SIZING_H
#define PARSIM_SIZING_H

#include <stdio.h>

#include "cluster.h"
#include "model.h"
#include "strategy.h"

void sizing_print(const model_spec *m, const strategy_t *s, const cluster_spec *c, FILE *out);

#endif
