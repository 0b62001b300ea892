#define _DEFAULT_SOURCE /* mkstemps */
/* parsim calibrate: recovers known parameters from synthetic measurements
 * made by parsim itself at other parameter values (validation rows and an
 * nccl-tests table), splits rows into halves, writes a parameter file that
 * sim.params loads, and parses a measured nccl-tests log (transcribed
 * from hardware.md, tests/data/nccl_allreduce_8xa100.log). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "calibrate.h"
#include "config.h"
#include "csv.h"
#include "net.h"
#include "validate.h"

#define MINI PARSIM_SOURCE_DIR "/tests/data/validate_mini.csv"
#define NCCL_A100 PARSIM_SOURCE_DIR "/tests/data/nccl_allreduce_8xa100.log"

/* Copies of the 8 rows of validate_mini.csv: each copy a global batch
 * this many times larger, so a copy is 8 other configurations. */
#define MINI_COPIES 5

/* The rows of validate_mini.csv, MINI_COPIES times (40 configurations: a
 * written fit needs CALIB_MIN_CONFIGS, a half of them too), with
 * metric_value set to parsim's own prediction under `extra`
 * (NULL-terminated overrides); CSV text. */
static char *synthetic_rows(const char *const *extra, const char *gpu_override_row0)
{
    csv_table t;
    sim_err err;
    cr_assert_eq(csv_read_file(MINI, &t, &err), SIM_OK, "%s", err.msg);
    int mv = csv_col(&t, "metric_value"), gpu = csv_col(&t, "gpu_type");
    int gbs = csv_col(&t, "gbs"), id = csv_col(&t, "id");
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    fprintf(f, "%s\n", t.header_raw);
    char path[] = "/tmp/parsim-XXXXXX";
    cr_assert_not_null(mkdtemp(path));
    char copy[sizeof path + 16];
    snprintf(copy, sizeof copy, "%s/rows.csv", path);
    for (int m = 1; m <= MINI_COPIES; m++) {
        /* the copy's rows as a table, to predict them */
        FILE *cf = fopen(copy, "w");
        cr_assert_not_null(cf);
        fprintf(cf, "%s\n", t.header_raw);
        for (size_t r = 0; r < t.nrows; r++) {
            for (int k = 0; k < t.ncols; k++) {
                char num[64];
                const char *v = csv_cell(&t, r, k);
                if (k == gbs) {
                    snprintf(num, sizeof num, "%lld", atoll(v) * m);
                    v = num;
                } else if (k == id) {
                    snprintf(num, sizeof num, "mini-%03zu", (size_t)(m - 1) * t.nrows + r + 1);
                    v = num;
                } else if (k == gpu && r == 0 && m == 1 && gpu_override_row0)
                    v = gpu_override_row0;
                if (k)
                    fputc(',', cf);
                csv_write_field(cf, v);
            }
            fputc('\n', cf);
        }
        fclose(cf);
        csv_table ct;
        cr_assert_eq(csv_read_file(copy, &ct, &err), SIM_OK, "%s", err.msg);
        for (size_t r = 0; r < ct.nrows; r++) {
            vcase c;
            vpred p;
            validate_case(&ct, r, PARSIM_SOURCE_DIR, &c);
            cr_assert_eq(validate_predict(&c, PARSIM_SOURCE_DIR, extra, &p), SIM_OK);
            cr_assert(p.ok, "%s: %s", c.id, p.skip);
            for (int k = 0; k < ct.ncols; k++) {
                char num[64];
                const char *v = csv_cell(&ct, r, k);
                if (k == mv) {
                    snprintf(num, sizeof num, "%.12g", p.value);
                    v = num;
                }
                if (k)
                    fputc(',', f);
                csv_write_field(f, v);
            }
            fputc('\n', f);
        }
        csv_free(&ct);
    }
    remove(copy);
    rmdir(path);
    fclose(f);
    csv_free(&t);
    return buf;
}

static calib_opts quiet_opts(void)
{
    return (calib_opts){ .params = NULL, .rows = NULL, .train_half = -1, .jobs = 2,
                         .max_iter = 50, .data_dir = PARSIM_SOURCE_DIR, .log = NULL };
}

static const calib_param *param(const calib_result *r, const char *key)
{
    for (size_t k = 0; k < r->n_params; k++)
        if (!strcmp(r->p[k].key, key))
            return &r->p[k];
    cr_assert_fail("no parameter %s", key);
    return NULL;
}

Test(calibrate, recovers_sustained_fraction_from_synthetic_rows, .timeout = 600)
{
    const char *const extra[] = { "cluster.compute.sustained_fraction=0.8", NULL };
    char *text = synthetic_rows(extra, NULL);
    csv_table t;
    sim_err err;
    cr_assert_eq(csv_parse(text, strlen(text), "synthetic", &t, &err), SIM_OK, "%s", err.msg);
    calib_opts o = quiet_opts();
    calib_result res;
    int rc = calibrate_rows(&t, "synthetic", &o, &res, &err);
    cr_assert_eq(rc, SIM_OK, "%s", err.msg);
    cr_assert_str_eq(res.topology, "dgx-h100");
    cr_assert_eq(res.n_params, 1, "the default parameter");
    cr_assert_eq(res.n_train, 8 * MINI_COPIES);
    cr_assert_eq(res.n_configs, 8 * MINI_COPIES);
    const calib_param *g = param(&res, "cluster.compute.sustained_fraction");
    cr_assert(fabs(g->value - 0.8) < 1e-3, "sustained_fraction fitted %g", g->value);
    cr_assert(fabs(g->start - 1.0) < 1e-9);
    cr_assert(res.train_before.median > 5.0, "the start was off: %g", res.train_before.median);
    cr_assert(res.train_after.p90 < 0.1, "after the fit: p90 %g %%", res.train_after.p90);

    /* the parameter file loads as sim.params */
    char path[] = "/tmp/parsim_calib_XXXXXX.cfg";
    int fd = mkstemps(path, 4);
    cr_assert_geq(fd, 0);
    FILE *f = fdopen(fd, "w");
    calibrate_write_params(f, &res, 0);
    fclose(f);
    cfg_t *cfg = cfg_create(PARSIM_SOURCE_DIR);
    char kv[600];
    snprintf(kv, sizeof kv, "sim.params=%s", path);
    const char *const keys[] = { "model.name=llama3-8b", "cluster.topology=dgx-h100",
                                 "cluster.num_gpus=8", "train.global_batch_size=8", kv, NULL };
    for (const char *const *k = keys; *k; k++)
        cr_assert_eq(cfg_set_override(cfg, *k, &err), SIM_OK, "%s", err.msg);
    run_inputs in;
    cr_assert_eq(cfg_resolve(cfg, &in, &err), SIM_OK, "%s: %s", path, err.msg);
    cr_assert(fabs(in.cluster.compute.sustained_fraction - g->value) < 1e-5, "%g",
              in.cluster.compute.sustained_fraction);
    cfg_destroy(cfg);
    remove(path);
    calibrate_result_free(&res);
    csv_free(&t);
    free(text);
}

Test(calibrate, train_half_holds_out_the_other_rows, .timeout = 600)
{
    const char *const extra[] = { "cluster.compute.sustained_fraction=0.7", NULL };
    char *text = synthetic_rows(extra, NULL);
    csv_table t;
    sim_err err;
    cr_assert_eq(csv_parse(text, strlen(text), "synthetic", &t, &err), SIM_OK);
    calib_opts o = quiet_opts();
    o.params = "cluster.compute.sustained_fraction";
    o.train_half = 1;
    calib_result res;
    cr_assert_eq(calibrate_rows(&t, "synthetic", &o, &res, &err), SIM_OK, "%s", err.msg);
    cr_assert_eq(res.n_train, 4 * MINI_COPIES);
    cr_assert_eq(res.n_eval, 4 * MINI_COPIES);
    cr_assert(fabs(res.p[0].value - 0.7) < 1e-3, "%g", res.p[0].value);
    /* the held-out rows were not fitted but improve as much */
    cr_assert_eq(res.eval_before.n, 4 * MINI_COPIES);
    cr_assert(res.eval_after.median < 0.1 && res.eval_before.median > 3.0, "%g -> %g",
              res.eval_before.median, res.eval_after.median);
    calibrate_result_free(&res);
    /* a filter that leaves too few configurations */
    o.rows = "id=mini-001";
    o.params = "cluster.compute.gemm_efficiency,cluster.compute.attention_fwd_efficiency";
    o.train_half = -1;
    cr_assert_eq(calibrate_rows(&t, "synthetic", &o, &res, &err), SIM_EINVAL);
    cr_assert(strstr(err.msg, "1 configurations") && strstr(err.msg, "at least 20"), "%s",
              err.msg);
    csv_free(&t);
    free(text);
}

Test(calibrate, one_topology_at_a_time_and_known_keys)
{
    const char *const extra[] = { NULL };
    char *text = synthetic_rows(extra, "A100-80GB");
    csv_table t;
    sim_err err;
    cr_assert_eq(csv_parse(text, strlen(text), "synthetic", &t, &err), SIM_OK);
    calib_opts o = quiet_opts();
    calib_result res;
    cr_assert_eq(calibrate_rows(&t, "synthetic", &o, &res, &err), SIM_EINVAL);
    cr_assert(strstr(err.msg, "several topologies"), "%s", err.msg);
    o.rows = "gpu_type=H100";
    o.params = "cluster.compute.no_such_efficiency";
    cr_assert_eq(calibrate_rows(&t, "synthetic", &o, &res, &err), SIM_EINVAL);
    cr_assert(strstr(err.msg, "no_such_efficiency"), "%s", err.msg);
    o.params = "model.name";
    cr_assert_eq(calibrate_rows(&t, "synthetic", &o, &res, &err), SIM_EINVAL);
    cr_assert(strstr(err.msg, "not a numeric config key"), "%s", err.msg);
    csv_free(&t);
    free(text);
}

/* ------------------------------------------------------------ nccl-tests */

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    char *buf = malloc(1 << 20);
    *len = fread(buf, 1, (1 << 20) - 1, f);
    buf[*len] = '\0';
    fclose(f);
    return buf;
}

Test(calibrate_nccl, parses_a_measured_log)
{
    size_t len;
    char *text = slurp(NCCL_A100, &len);
    nccl_log log;
    sim_err err;
    cr_assert_eq(nccl_log_parse(text, len, NCCL_A100, NULL, &log, &err), SIM_OK, "%s", err.msg);
    cr_assert_str_eq(log.op, "all_reduce");
    cr_assert_eq(log.ranks, 8);
    cr_assert_eq(log.nodes, 1);
    cr_assert_str_eq(log.gpu, "NVIDIA A100-SXM4-80GB");
    cr_assert_eq(log.n, 11);
    cr_assert_float_eq(log.pts[0].bytes, 32768.0, 1e-9);
    cr_assert_float_eq(log.pts[0].time_s, 43.83e-6, 1e-15);
    cr_assert_float_eq(log.pts[10].bytes, 17179869184.0, 1e-3);
    cr_assert_float_eq(log.pts[10].time_s, 0.127997, 1e-12);
    nccl_log_free(&log);

    /* a fit of the NVLink tier to it lands near the measured ring busbw
     * (230-235 GB/s) and does not make the error worse */
    const char *const ov[] = { "cluster.topology=dgx-a100", NULL };
    cr_assert_eq(nccl_log_parse(text, len, NCCL_A100, NULL, &log, &err), SIM_OK);
    calib_opts o = quiet_opts();
    calib_result res;
    cr_assert_eq(calibrate_nccl(&log, ov, &o, &res, &err), SIM_OK, "%s", err.msg);
    const calib_param *bw = param(&res, "cluster.nvlink.bw_gbytes_per_s");
    cr_assert(bw->value > 200 && bw->value < 280, "%g", bw->value);
    cr_assert_leq(res.train_after.mean, res.train_before.mean + 1e-9);
    nccl_log_free(&log);
    free(text);

    /* not a table */
    cr_assert_eq(nccl_log_parse("hello\n", 6, "x.log", NULL, &log, &err), SIM_EINVAL);
    cr_assert(strstr(err.msg, "no nccl-tests table"), "%s", err.msg);
}

/* An nccl-tests table of all_reduce on 16 GPUs (2 DGX H100 nodes) made by
 * parsim's own model with the NIC bandwidth at 40 GB/s and the network
 * latencies 1.5x NCCL's: synthetic test data, not a measurement. */
static char *synthetic_nccl(void)
{
    sim_err err;
    cfg_t *cfg = cfg_create(PARSIM_SOURCE_DIR);
    const char *const keys[] = {
        "model.name=llama3-8b", "train.global_batch_size=1", "cluster.topology=dgx-h100",
        "cluster.num_gpus=16", "cluster.scaleout.nic_bw_gbytes_per_s=40.0",
        "cluster.nccl.net_latency_us.ring=[4.05,6.0,21.0]",
        "cluster.nccl.net_latency_us.tree=[7.5,12.75,21.0]", NULL,
    };
    for (const char *const *k = keys; *k; k++)
        cr_assert_eq(cfg_set_override(cfg, *k, &err), SIM_OK, "%s: %s", *k, err.msg);
    run_inputs in;
    cr_assert_eq(cfg_resolve(cfg, &in, &err), SIM_OK, "%s", err.msg);
    group_span g;
    net_group_span(&in.cluster, 16, 1, &g);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    fputs("# SYNTHETIC test data generated by parsim's own model (tests/test_calibrate.c),\n"
          "# not a measurement.\n"
          "# nThread 1 nGpus 1 minBytes 1024 maxBytes 4294967296 step: 4(factor)\n"
          "# Collective test starting: all_reduce_perf\n#\n# Using devices\n",
          f);
    for (int r = 0; r < 16; r++)
        fprintf(f, "#  Rank %2d Group  0 Pid %5d on node-%d device %2d [0x%02x] NVIDIA H100 80GB HBM3\n",
                r, 1000 + r, r / 8, r % 8, 0x18 + r);
    fputs("#\n#                                                    out-of-place                       in-place\n"
          "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
          "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n",
          f);
    for (double b = 1024; b <= 4294967296.0; b *= 4) {
        double t = net_collective_s(&in.cluster, &g, COLL_ALL_REDUCE, b) * 1e6;
        fprintf(f, "%12.0f  %12.0f     float     sum      -1  %8.2f  %6.2f  %6.2f      0  %8.2f  %6.2f  %6.2f      0\n",
                b, b / 4, t, b / t / 1e3, b / t / 1e3 * 30.0 / 16.0, t, b / t / 1e3,
                b / t / 1e3 * 30.0 / 16.0);
    }
    fputs("# Out of bounds values : 0 OK\n", f);
    fclose(f);
    cfg_destroy(cfg);
    return buf;
}

Test(calibrate_nccl, recovers_scaleout_bandwidth_and_latency)
{
    char *text = synthetic_nccl();
    nccl_log log;
    sim_err err;
    cr_assert_eq(nccl_log_parse(text, strlen(text), "synthetic", NULL, &log, &err), SIM_OK, "%s",
                 err.msg);
    cr_assert_eq(log.ranks, 16);
    cr_assert_eq(log.nodes, 2);
    cr_assert_eq(log.n, 2 * 12, "out-of-place and in-place times");
    cr_assert(log.pts[1].in_place && !log.pts[0].in_place);
    const char *const ov[] = { "cluster.topology=dgx-h100", NULL };
    calib_opts o = quiet_opts();
    calib_result res;
    cr_assert_eq(calibrate_nccl(&log, ov, &o, &res, &err), SIM_OK, "%s", err.msg);
    const calib_param *bw = param(&res, "cluster.scaleout.nic_bw_gbytes_per_s");
    const calib_param *lat =
        param(&res, "cluster.nccl.net_latency_us.ring+cluster.nccl.net_latency_us.tree");
    cr_assert(fabs(bw->value - 40.0) < 0.2, "nic bandwidth %g", bw->value);
    cr_assert(lat->is_scale);
    cr_assert(fabs(lat->value - 1.5) < 0.02, "latency scale %g", lat->value);
    cr_assert(res.train_after.p90 < 1.0, "%g", res.train_after.p90);

    /* the parameter file carries both latency lists, scaled */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    calibrate_write_params(f, &res, 0);
    fclose(f);
    cr_assert(strstr(buf, "nic_bw_gbytes_per_s = 39.9") || strstr(buf, "nic_bw_gbytes_per_s = 40"),
              "%s", buf);
    cr_assert(strstr(buf, "ring = [4.0"), "%s", buf);
    cr_assert(strstr(buf, "tree = [7.49") || strstr(buf, "tree = [7.5"), "%s", buf);
    free(buf);
    nccl_log_free(&log);
    free(text);
}

/* ------------------------------------------------------------------ CLI */

static int run_status(const char *args)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s >/dev/null 2>&1", PARSIM_SOURCE_DIR,
             PARSIM_BINARY, args);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

Test(calibrate_cli, bad_input_exits_2)
{
    cr_assert_eq(run_status("calibrate"), 2);
    cr_assert_eq(run_status("calibrate tests/data/validate_mini.csv --nccl-tests x.log"), 2);
    cr_assert_eq(run_status("calibrate --nccl-tests tests/data/nccl_allreduce_8xa100.log"), 2);
    cr_assert_eq(run_status("calibrate tests/data/validate_mini.csv --train-half middle"), 2);
    cr_assert_eq(run_status("calibrate tests/data/validate_mini.csv --params nosuch.key"), 2);
    char dir[] = "/tmp/parsim-XXXXXX", args[256];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(args, sizeof args, "calibrate --nccl-tests tests/data/nccl_allreduce_8xa100.log "
             "cluster.topology=dgx-a100 --quiet --out %s/fit.cfg", dir);
    cr_assert_eq(run_status(args), 0);
    snprintf(args, sizeof args, "%s/fit.cfg", dir);
    cr_assert_eq(remove(args), 0, "calibrate wrote no %s", args);
    cr_assert_eq(rmdir(dir), 0);
}
