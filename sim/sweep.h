/* sweep: many simulations from one spec, one CSV row each.
 *
 * A sweep spec is a libconfig file with one group `sweep`:
 *
 *     sweep: {
 *       base = "llama3-70b-h100x64.cfg";   # run config (optional); relative to
 *                                          # this file, else to the working dir
 *       set  = [ "train.global_batch_size=128" ];       # fixed KEY=VALUE (optional)
 *       vary = (                                        # axes; their product is run
 *         { key = "cluster.num_gpus"; values = [32, 64, 128]; },
 *         { key = "model.tensor_model_parallel_size"; from = 1; to = 8; mul = 2; },
 *         { key = "train.micro_batch_size"; from = 1; to = 4; step = 1; },
 *         { keys = [ "model.pipeline_model_parallel_size",
 *                    "model.virtual_pipeline_model_parallel_size" ];
 *           rows = ( (1, 1), (2, 5), (4, 5) ); }        # a listed set: zipped keys
 *       );
 *     };
 *
 * An axis is one key with `values` (a list of scalars, or a `( )` list of
 * arrays for list-valued keys) or a range (`from`, `to` inclusive, and `step`
 * (default 1) or `mul`), or several keys with `rows`, a listed set of value
 * tuples that vary together.  A sweep with one `keys`/`rows` axis is a listed
 * set of configurations rather than a product.
 *
 * Order (contract).  Configurations are numbered 0..total-1 in mixed radix:
 * the last axis varies fastest, the first slowest.  A configuration is the
 * base file, then `set`, then the axis values, each applied as a command-line
 * override (so they beat the base file), resolved and simulated exactly as
 * `parsim run` would.
 *
 * Rows (contract).  Line 1 is the CSV header: `index`, the swept keys in
 * axis order, the columns of `parsim run --format csv`, `error`.  Line 2 is
 * a comment naming what the file holds (sweep_meta):
 *     # parsim sweep spec=<16 hex digits> configurations=48 shard=2/3 rows=16
 * spec is FNV-1a 64 of the expanded sweep (the base file's bytes, `set`,
 * every axis's KEY=VALUE overrides in order), so a resume can tell an edited
 * spec and merge can tell a shard that stopped after a whole row (fewer rows
 * than it says) from a finished one.  The rows follow.  A configuration that fails
 * (an invalid strategy, a bad value) is a row with empty report columns and
 * the reason in `error`; the sweep goes on.  A row depends only on the spec
 * and its index, never on threads, shards or ranks, so every way of running a
 * sweep yields the same bytes.
 *
 * Subsets.  Runs cover an arithmetic progression of indices (sweep_span):
 * a shard K/N is {K-1, K-1+N, ...} (round-robin, so each shard gets a fair
 * mix of small and large configurations), a resumed run drops its first
 * rows, an MPI rank takes every size-th of those.
 *
 * Threads.  Nothing here has global mutable state; a sweep_t is read-only
 * after sweep_load, and each configuration builds its own cfg_t and step_t,
 * so sweep_run's workers share only the spec and the reorder buffer.
 */
#ifndef PARSIM_SWEEP_H
#define PARSIM_SWEEP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "err.h"

typedef struct sweep sweep_t;

/* Indices first + j*stride for j in [0, count). */
typedef struct sweep_span {
    int64_t first;
    int64_t stride; /* >= 1 */
    int64_t count;  /* >= 0 */
} sweep_span;

/* Reads and checks a spec: syntax, axes, ranges, that every key is known
 * and that the base file loads.  data_dir as for cfg_create (NULL = the
 * default).  Errors are SIM_EINVAL with the spec's file and line.
 * On success *out owns the spec; free it with sweep_destroy. */
int sweep_load(sweep_t **out, const char *path, const char *data_dir, sim_err *err);
void sweep_destroy(sweep_t *sw);

/* Number of configurations (the product of the axis lengths). */
int64_t sweep_total(const sweep_t *sw);

/* The CSV header line, with its '\n'; lives as long as sw. */
const char *sweep_header(const sweep_t *sw);

/* What line 2 of an output records. */
typedef struct sweep_meta {
    uint64_t spec;            /* hash of the expanded sweep */
    int64_t total;            /* configurations of the sweep */
    int64_t shard_k, shard_n; /* the file's shard (1/1: the whole sweep) */
    int64_t rows;             /* rows the file has when finished */
} sweep_meta;

/* The line-2 record of shard k of n (1/1: the whole sweep). */
sweep_meta sweep_meta_of(const sweep_t *sw, int64_t k, int64_t n);

/* Writes the line-2 comment, with its '\n', into buf. */
void sweep_meta_format(const sweep_meta *m, char *buf, size_t len);

/* Reads a line-2 comment (with or without its '\n'); false if line is not one. */
bool sweep_meta_parse(const char *line, sweep_meta *m);

/* The span of shard k of n (1 <= k <= n): indices k-1, k-1+n, ... */
sweep_span sweep_shard_span(const sweep_t *sw, int64_t k, int64_t n);

/* Simulates configuration index and returns its row (with '\n') in *row,
 * malloc'd, length *len.  A configuration that fails is still SIM_OK with
 * an error row; only SIM_ENOMEM is returned as a failure. */
int sweep_row(const sweep_t *sw, int64_t index, char **row, size_t *len, sim_err *err);

/* Receives the rows of a run in span order: pos is the position in the
 * span (0, 1, ...), row has len bytes and its '\n'.  Returns SIM_OK to go on,
 * anything else to stop the run (it is then returned by sweep_run). */
typedef int (*sweep_emit_fn)(void *ctx, int64_t pos, int64_t index, const char *row, size_t len);

/* Runs the span with `jobs` threads (1 = in the calling thread), calling
 * emit in the calling thread, in span order, as soon as each row and all
 * rows before it are done (a reorder buffer of a few rows per thread).
 * Returns SIM_OK, emit's status, or SIM_ENOMEM. */
int sweep_run(const sweep_t *sw, sweep_span span, int jobs, sweep_emit_fn emit, void *ctx, sim_err *err);

/* Opens an output file for a run of span (whose line 2 is meta), resuming
 * it if it is a regular file that exists: the header and line 2 must match
 * (an edited spec or another shard is refused), the complete rows must be
 * the first rows of span (their leading index column is checked), and a
 * trailing partial line (a run killed mid-write) is cut off.  A missing or
 * empty file is created with both lines.  A FIFO or device (outfile.h) is
 * written from the start, never read, truncated or replaced; a directory is
 * refused.  On success *out is positioned to append and *done is the number
 * of rows of span already there.  A file that is not a prefix of this run
 * is SIM_EINVAL naming its line; I/O failures are SIM_EIO. */
int sweep_open_output(const char *path, const char *header, const sweep_meta *meta, sweep_span span, FILE **out,
                      int64_t *done, sim_err *err);

/* Reads the configuration index at the start of a row ("17,..."): true
 * and *index on success. */
bool sweep_row_index(const char *row, int64_t *index);

#endif
