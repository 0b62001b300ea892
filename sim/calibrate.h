/* calibrate: fit cost-model parameters to measurements.
 *
 * Two sources of measurements:
 *  - rows of a validation CSV (as `parsim validate` reads them): the
 *    residual of a row is log(predicted / measured) of its metric (time
 *    and throughput rows only: memory rows do not depend on the fitted
 *    parameters and TFLOP/s rows of flagged models are left out);
 *  - nccl-tests output (`all_reduce_perf` and friends): the residual of a
 *    message size is log(t_parsim / t_measured), t_parsim being
 *    net_collective_s of the tested group on the topology.
 *
 * The fit is GSL's nonlinear least squares (gsl_multifit_nlinear, trust
 * region with Levenberg-Marquardt steps, finite-difference Jacobian) of
 * the residuals through a loss (calib_loss).  By default the loss is the
 * absolute residual (Huber's, quadratic below CALIB_HUBER_DELTA so that
 * the solver's steps stay smooth; the solver sees sign(r) sqrt(2 rho(r))):
 * accuracy is judged by the median error, and with squares one row whose
 * missing physics puts it 60% off outweighs twenty rows a few percent off
 * and moves every other row of the GPU type.  `--loss squared` is plain
 * least squares.
 * Parameters are config keys, each kept inside the range the key table
 * gives it (cfg_key_range: a fraction in (0, 1], a time >= 0, a bandwidth
 * > 0): the solver's variable u maps to value = start + step * (u - 1),
 * folded back into the range at its ends (a mirror, so that a trial beyond
 * a bound still sees the slope towards the inside), step being the start
 * value or, for a start of 0, one unit of the key.  A fit that ends at a
 * bound is marked (at_bound) and said so in the report and the parameter
 * file: the data want a value the physics does not allow, which points at
 * a missing effect rather than at the parameter.  A scale factor of a list
 * or of KEY+KEY is bounded so that every entry stays in its key's range.
 * Uncertainties are one standard deviation from
 * the covariance (gsl_multifit_nlinear_covar) scaled by chi^2/dof and
 * mapped back to the key's scale (delta method); a parameter the data do
 * not constrain (a zero column of the Jacobian at the solution: a latency
 * of an algorithm the model never picks, say) is put back to its start,
 * the others are fitted again without it, and it is left out of the
 * parameter file.
 *
 * A fit holds for one topology (one GPU and fabric): a row filter that
 * selects rows of several topologies is an error.  The result is a
 * libconfig file of the fitted keys, loaded above the topology with
 * `parsim run ... sim.params=PARAMS.cfg`, or as the topology's fitted file
 * (topologies/fitted/NAME.cfg, which the preset names in cluster.fitted;
 * bench/validation/fit_defaults.sh writes them).
 *
 * Rules of a fit to validation rows (the defaults of a GPU type):
 *  - at most CALIB_MAX_ROW_PARAMS parameters (fits of more drift to
 *    unphysical values: fractions above 1, hundreds of microseconds per
 *    kernel);
 *  - the fit whose values are written uses at least CALIB_MIN_CONFIGS
 *    configurations (distinct `run` numbers, not rows);
 *  - held-out error always: rows are split by the parity of their
 *    configuration (validate_number_runs: rows of the same setup, such as
 *    the tokens/s and TFLOP/s rows of one run, share it); the parameters
 *    are fitted on the even configurations and evaluated on the odd ones,
 *    and the reverse (res->half[]), whatever is written.  These two fits
 *    only measure how a fit generalises and may use fewer configurations.
 * The written fit uses every selected row, or one half (train_half), the
 * other half then being its held-out rows (n_eval, eval_*).
 */
#ifndef PARSIM_CALIBRATE_H
#define PARSIM_CALIBRATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <time.h>

#include "csv.h"
#include "err.h"
#include "validate.h"

#define CALIB_MAX_PARAMS 16
/* Parameters of one fit to validation rows (one GPU type). */
#define CALIB_MAX_ROW_PARAMS 2
/* Configurations (distinct runs) a written fit to validation rows needs:
 * below it one odd configuration moves the value more than its error. */
#define CALIB_MIN_CONFIGS 20
#define CALIB_MAX_SUB 4
#define CALIB_MAX_LIST 16

/* One config key of a parameter, with its value at the start. */
typedef struct calib_sub {
    char key[128];
    int nlist;                     /* > 0: a list of numbers, these entries */
    double list[CALIB_MAX_LIST];
    double scalar;                 /* nlist == 0: the number */
} calib_sub;

/* A fitted parameter.  One numeric key is fitted in its own unit.  A key
 * holding a list of numbers (e.g. NCCL's per-protocol latencies [LL,
 * LL128, Simple]) or several keys joined with '+' (KEY1+KEY2) are fitted
 * as one scale factor of all their start values: start is then 1 and
 * value the fitted factor. */
typedef struct calib_param {
    char key[256];                 /* as given, KEY or KEY1+KEY2 */
    bool is_scale;                 /* fitted as a factor (lists, KEY+KEY) */
    double start;                  /* value before the fit (the topology's), 1 for a scale */
    double value;                  /* fitted */
    double sigma;                  /* 1 sigma, in the value's unit; NAN if unconstrained
                                      or at a bound */
    double lo, hi;                 /* range of the value: [lo, hi], (lo, hi] if lo_open */
    bool lo_open;
    double step;                   /* value change per unit of the solver's variable */
    int at_bound;                  /* the fit ended at -1: lo, +1: hi, 0: inside */
    bool fixed;                    /* the data do not constrain it: kept at start */
    int nsub;
    calib_sub sub[CALIB_MAX_SUB];
} calib_param;

/* How residuals are weighed (see the note at the top). */
typedef enum calib_loss {
    CALIB_LOSS_ABSOLUTE, /* Huber with CALIB_HUBER_DELTA: |r| but near 0 */
    CALIB_LOSS_SQUARED,  /* r^2 */
} calib_loss;

/* Where the absolute loss turns quadratic, in log(predicted/measured):
 * 2%, a quarter of the 8% median the defaults are held to, so the rows
 * that decide a median weigh by their absolute error. */
#define CALIB_HUBER_DELTA 0.02

typedef struct calib_opts {
    const char *params;    /* comma-separated keys; NULL = the defaults */
    const char *rows;      /* row filter (validate_filter_*), NULL = all */
    int train_half;        /* -1: fit all rows; 0: fit even configurations; 1: odd */
    int jobs;              /* threads for the simulations */
    int max_iter;          /* solver iterations, > 0 */
    calib_loss loss;       /* zero: CALIB_LOSS_ABSOLUTE */
    const char *data_dir;  /* as for cfg_create */
    const vsetup *setup;   /* frameworks and recipes the rows run with, as validate's;
                              NULL: validate_cases' (bundled frameworks, no recipes) */
    FILE *log;             /* one line per iteration, or NULL */
} calib_opts;

/* Errors of one set of rows: APE statistics and the median signed error
 * (validate's bias: + when parsim is optimistic). */
typedef struct calib_err {
    vstats ape;
    double bias;
} calib_err;

/* One direction of the held-out check: fitted on the configurations of
 * parity `train` (0 even, 1 odd), evaluated on the others. */
typedef struct calib_half {
    bool fitted;                   /* false: too few rows in this half (why) */
    char why[128];
    size_t n_train, n_configs, n_eval;
    double value[CALIB_MAX_PARAMS];
    int at_bound[CALIB_MAX_PARAMS];
    calib_err before, after;       /* of the held-out rows at the start / fitted values */
} calib_half;

typedef struct calib_result {
    size_t n_params;
    calib_param p[CALIB_MAX_PARAMS];
    char topology[64];
    char source[512];      /* what was fitted, for the file header */
    size_t n_train, n_eval;     /* rows or message sizes fitted / held out */
    size_t n_configs;           /* rows mode: configurations of the fitted rows */
    vstats train_before, train_after, eval_before, eval_after;
    double train_bias_before, train_bias_after;
    /* rows mode: the held-out check both ways; the cases and each selected
     * row's held-out prediction (by the fit of the other half; ok false for
     * rows not selected), freed by calibrate_result_free */
    calib_half half[2];
    size_t ncases;
    vcase *cases;
    vpred *heldout;
    calib_loss loss;       /* the fit's */
    double chi2, dof;      /* of the residuals through the loss */
    size_t iterations;
    int gsl_status;        /* of the driver (GSL_SUCCESS or why it stopped) */
} calib_result;

/* Fits parameters to the rows of a validation table.  name: the file name,
 * for messages.  Returns SIM_OK, SIM_EINVAL (unknown key, more than
 * CALIB_MAX_ROW_PARAMS parameters, fewer than CALIB_MIN_CONFIGS
 * configurations, no usable row, rows of several topologies), SIM_ENOMEM
 * or SIM_ESIM (the solver failed).  On SIM_OK the caller frees res with
 * calibrate_result_free. */
int calibrate_rows(const csv_table *t, const char *name, const calib_opts *o,
                   calib_result *res, sim_err *err);

/* Frees what calibrate_rows allocated in res (a no-op for nccl fits). */
void calibrate_result_free(calib_result *res);

/* One measured collective of an nccl-tests log. */
typedef struct nccl_point {
    double bytes;          /* "size" column */
    double time_s;         /* "time" column (us in the log) */
    bool in_place;
} nccl_point;

typedef struct nccl_log {
    char op[32];           /* all_reduce, all_gather, reduce_scatter, alltoall, broadcast, sendrecv */
    int ranks;             /* ranks in the test ("Rank N" lines), 0 if not stated */
    int nodes;             /* distinct hosts of the rank lines, 0 if not stated */
    char gpu[96];          /* device name of rank 0, "" if not stated */
    size_t n;
    nccl_point *pts;       /* n points, caller frees with nccl_log_free */
} nccl_log;

/* Parses the text of an nccl-tests run: the "# Rank" device lines, the
 * "Collective test starting: <op>_perf" line if present, the column
 * header and the data rows (out-of-place and, when present, in-place
 * time).  op_hint (may be NULL) names the collective when the log does
 * not.  Returns SIM_OK or SIM_EINVAL naming the line (and the field): a
 * size that is not whole bytes in 0..2^53 or a time that is not > 0 and
 * at most LIMIT_DURATION_S, a row shorter than the header, a NUL byte,
 * more ranks than LIMIT_GPUS, more lines than LIMIT_LOG_LINES.  On error
 * *out is empty. */
int nccl_log_parse(const char *text, size_t len, const char *name, const char *op_hint,
                   nccl_log *out, sim_err *err);
void nccl_log_free(nccl_log *l);

/* Fits the bandwidth and latency of the fabric tier the tested group
 * uses (or the keys of o->params) to an nccl-tests log.  Defaults, the
 * first key of each role that the topology has: in one NVLink domain
 * cluster.nvlink.bw_gbytes_per_s, cluster.nvlink.nvls_bw_gbytes_per_s and
 * the per-step latency
 * cluster.nccl.nvlink_latency_us.ring+cluster.nccl.nvlink_latency_us.tree
 * or cluster.nvlink.latency_us; across nodes
 * cluster.scaleout.nic_bw_gbytes_per_s (or .bw_gbytes_per_s) and
 * cluster.nccl.net_latency_us.ring+cluster.nccl.net_latency_us.tree (or
 * cluster.scaleout.latency_us); the latency lists are fitted as one scale
 * per tier.  overrides
 * (NULL-terminated, may be NULL) describe the system: at least
 * cluster.topology; cluster.num_gpus defaults to the log's ranks.
 * train_half splits the measurements by index as for rows. */
int calibrate_nccl(const nccl_log *log, const char *const *overrides, const calib_opts *o,
                   calib_result *res, sim_err *err);

/* Writes the fitted keys as a libconfig parameter file with a header
 * saying what was fitted, the errors before and after and each key's
 * uncertainty and start value.  The header is dated `when` (UTC day);
 * nothing else in the file depends on the time, so the same fit at the
 * same `when` gives the same bytes. */
void calibrate_write_params(FILE *out, const calib_result *res, time_t when);

/* The result as the fit of half h (0: fitted on the even configurations,
 * 1: on the odd) would write it: false if that half was not fitted. */
bool calibrate_half_result(const calib_result *res, int h, calib_result *out);

/* Prints the fit report (parameters, uncertainties, bounds reached,
 * errors; for rows, both held-out halves with validate's summary groups). */
void calibrate_report(FILE *out, const calib_result *res);

#endif
