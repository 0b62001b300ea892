#include "report.h"

#include <inttypes.h>
#include <math.h>

#include "csv.h"
#include "jsonout.h"
#include "streams.h"
#include "workload.h"
#include "units.h"

static const char *cp_comm_name(cp_comm_kind k)
{
    switch (k) {
    case CP_COMM_P2P: return "p2p";
    case CP_COMM_ALL_GATHER: return "all_gather";
    case CP_COMM_A2A: return "a2a";
    case CP_COMM_A2A_P2P: return "a2a+p2p";
    }
    return "?";
}

static const char *recompute_name(recompute_kind k)
{
    switch (k) {
    case RECOMPUTE_NONE: return "none";
    case RECOMPUTE_SELECTIVE: return "selective";
    case RECOMPUTE_FULL: return "full";
    }
    return "?";
}

#define GIB_F(x) ((x) / GIB)

/* The one rule for a number in text and CSV: printf's fmt when v is
 * finite; otherwise `missing` ("n/a" in text, "" in CSV: an empty cell),
 * right-aligned in width (0: as it is).  A ratio over a zero time (the MFU
 * of a step that takes no time) is not a number, and no reader should
 * have to parse "inf" or "nan". */
static void put_num(FILE *out, int width, const char *fmt, double v, const char *missing)
{
    char buf[352]; /* %.0f of DBL_MAX is 309 digits */
    if (isfinite(v))
        snprintf(buf, sizeof buf, fmt, v);
    else
        snprintf(buf, sizeof buf, "%s", missing);
    fprintf(out, "%*s", width, buf);
}

#define TEXT_NA "n/a"

void report_text(FILE *out, const run_inputs *in, const strategy_t *s, const step_result *r)
{
    const model_spec *m = &in->model;
    fprintf(out, "parsim: %s on %" PRId64 " x %s (%s)\n", m->name[0] ? m->name : "model", s->world,
            in->cluster.gpu.name, in->cluster.name);
    fprintf(out, "  layout      TP %" PRId64 "  PP %" PRId64 "  VP %" PRId64 "  CP %" PRId64 "  DP %" PRId64, s->tp,
            s->pp, s->v, s->cp, s->dp);
    /* The expert dimensions mean something only for MoE models. */
    if (model_is_moe(m))
        fprintf(out, "  EP %" PRId64 "  ETP %" PRId64 "  EDP %" PRId64, s->ep, s->etp, s->edp);
    fprintf(out, "  SP %s\n", s->par.sequence_parallel ? "on" : "off");
    fprintf(out, "  batch       global %" PRId64 "  micro %" PRId64 "  microbatches %" PRId64 "  seq %" PRId64 "\n",
            in->train.global_batch_size, in->train.micro_batch_size, s->num_microbatches, m->seq_length);
    fprintf(out, "  options     %s  recompute %s  cp_comm %s", precision_name(s->par.precision),
            recompute_name(s->par.recompute_granularity), cp_comm_name(s->par.cp_comm_type));
    if (in->ddp.use_megatron_fsdp)
        fprintf(out, "  megatron-fsdp %s", dp_shard_name(in->ddp.sharding));
    else
        fprintf(out, "  dist-opt %s", in->ddp.use_distributed_optimizer ? "on" : "off");
    if (in->peft.lora) {
        static const char *const names[] = { "qkv", "proj", "fc1", "fc2" };
        fprintf(out, "  LoRA rank %" PRId64 " on", in->peft.dim);
        const char *sep = " ";
        for (int i = 0; i < 4; i++)
            if (in->peft.targets & (1u << i)) {
                fprintf(out, "%s%s", sep, names[i]);
                sep = ",";
            }
    }
    fputc('\n', out);
    fprintf(out, "  min GPUs    %" PRId64 " = PP x lcm(TP x CP, EP x ETP)", s->min_gpus);
    if (s->min_gpus != s->min_gpus_common)
        fprintf(out, "  (the common rule PP x max(TP x CP, EP x ETP) = %" PRId64
                     " is too few: the world must be divisible by both products)",
                s->min_gpus_common);
    fputc('\n', out);
    const sched_name sn = s->par.pipeline_schedule;
    const char *ep_overlap = !s->par.overlap_moe_ep_comm ? ""
                             : s->par.delay_wgrad_compute ? ", EP all-to-all overlapped, weight gradients delayed"
                                                          : ", EP all-to-all overlapped";
    if (sn == SCHED_MEGATRON)
        fprintf(out, "  schedule    megatron (%s%s)\n",
                s->par.overlap_moe_ep_comm ? (s->v > 1 ? "combined interleaved 1F1B" : "combined 1F1B")
                : s->v > 1                 ? "interleaved 1F1B"
                                           : "1F1B",
                ep_overlap);
    else
        fprintf(out, "  schedule    %s%s%s\n", sched_name_str(sn),
                sched_name_splits(sn) ? " (beyond Megatron: backward as B and W passes)" : "", ep_overlap);
    if (in->sim.ideal_pipeline)
        fputs("  mode        ideal pipeline (no communication, identical stages)\n", out);
    fputc('\n', out);
    fputs("  step time            ", out);
    put_num(out, 10, "%.4f", r->step_time_s, TEXT_NA);
    fputs(" s\n  tokens/s per GPU     ", out);
    put_num(out, 10, "%.1f", r->tokens_per_s_per_gpu, TEXT_NA);
    fputs("\n  model TFLOP/s per GPU", out);
    put_num(out, 10, "%.1f", r->model_tflops_per_gpu, TEXT_NA);
    fputs("\n  MFU                  ", out);
    put_num(out, 10, "%.1f", 100.0 * r->mfu, TEXT_NA);
    fputs(" %  (of ", out);
    put_num(out, 0, "%.0f", in->cluster.gpu.peak_bf16_flops_per_s / TFLOPS, TEXT_NA);
    fputs(" TFLOP/s bf16 dense)\n  pipeline bubble      ", out);
    put_num(out, 10, "%.1f", 100.0 * r->bubble_fraction, TEXT_NA);
    fputs(" %\n", out);
    fputs("\n  communication (busiest stage)   total s   exposed s\n", out);
    for (int k = 0; k < STREAM_KINDS; k++) {
        if (!streams_is_comm((stream_kind)k))
            continue;
        fprintf(out, "    %-30s ", stream_kind_name((stream_kind)k));
        put_num(out, 9, "%.4f", r->comm_s[k], TEXT_NA);
        fputs("   ", out);
        put_num(out, 9, "%.4f", r->exposed_s[k], TEXT_NA);
        fputc('\n', out);
    }
    fprintf(out, "    %-30s %9s   ", "all (not hidden by compute)", "");
    put_num(out, 9, "%.4f", r->exposed_total_s, TEXT_NA);
    for (int k = 0; k < STREAM_KINDS; k++)
        if (streams_desc((stream_kind)k)->role == STREAM_ROLE_HOST) {
            fprintf(out, "\n    %-30s ", "host (issuing the GPU work)");
            put_num(out, 9, "%.4f", r->comm_s[k], TEXT_NA);
        }
    fputs("\n\n  memory per GPU (GiB)  weights  grads  optim  activ  peak   in-flight\n", out);
    for (int64_t i = 0; i < r->n_stages; i++) {
        const stage_result *sr = &r->stages[i];
        fprintf(out, "    stage %-13" PRId64, sr->stage);
        const double bytes[] = { sr->weights_bytes, sr->gradients_bytes, sr->optimizer_bytes,
                                 sr->activations_peak_bytes, sr->peak_bytes };
        for (int c = 0; c < 5; c++) {
            if (c)
                fputc(' ', out);
            put_num(out, c ? 6 : 8, "%.2f", GIB_F(bytes[c]), TEXT_NA);
        }
        fprintf(out, "   %5" PRId64 "\n", sr->inflight_microbatches_max);
    }
    double cap = in->cluster.gpu.hbm_capacity_bytes;
    fputs("    peak ", out);
    put_num(out, 0, "%.2f", GIB_F(r->peak_bytes), TEXT_NA);
    fputs(" GiB of ", out);
    put_num(out, 0, "%.2f", GIB_F(cap), TEXT_NA);
    fprintf(out, " GiB HBM%s\n", r->peak_bytes > cap ? "  -- DOES NOT FIT" : "");
    char warn[1024];
    if (strategy_layout_warnings(s, warn, sizeof warn) > 0)
        fprintf(out, "\n%s", warn);
    fprintf(out, "\n  simulated %" PRIu64 " tasks, %" PRIu64 " events\n", r->tasks, r->events);
}

/* Bytes are whole numbers, written without an exponent. */
static void kv_bytes(jsonout *j, const char *key, double v)
{
    jsonout_kv_fixed(j, key, v, 0);
}

int report_json(FILE *out, const run_inputs *in, const strategy_t *s, const step_result *r, sim_err *err)
{
    jsonout *j = jsonout_begin(out, true, err);
    if (!j)
        return SIM_ENOMEM;
    jsonout_map_open(j);
    jsonout_str(j, "parallel");
    jsonout_map_open(j);
    const struct { const char *key; int64_t v; } par[] = {
        { "world_size", s->world }, { "tp", s->tp }, { "pp", s->pp }, { "vp", s->v },
        { "cp", s->cp }, { "ep", s->ep }, { "etp", s->etp }, { "dp", s->dp }, { "edp", s->edp },
        { "num_microbatches", s->num_microbatches }, { "min_gpus", s->min_gpus },
        { "min_gpus_common_rule", s->min_gpus_common },
    };
    for (size_t i = 0; i < sizeof par / sizeof par[0]; i++)
        jsonout_kv_int(j, par[i].key, par[i].v);
    jsonout_str(j, "sequence_parallel");
    jsonout_bool(j, s->par.sequence_parallel);
    jsonout_kv_str(j, "pipeline_schedule", sched_name_str(s->par.pipeline_schedule));
    jsonout_str(j, "overlap_moe_expert_parallel_comm");
    jsonout_bool(j, s->par.overlap_moe_ep_comm);
    jsonout_str(j, "delay_wgrad_compute");
    jsonout_bool(j, s->par.delay_wgrad_compute);
    jsonout_str(j, "megatron_fsdp");
    jsonout_str(j, in->ddp.use_megatron_fsdp ? dp_shard_name(in->ddp.sharding) : "off");
    jsonout_map_close(j);
    jsonout_kv_str(j, "model", in->model.name);
    jsonout_kv_str(j, "topology", in->cluster.name);
    jsonout_kv_str(j, "mixed_precision", precision_name(s->par.precision));
    const struct { const char *key; double v; } reals[] = {
        { "step_time_s", r->step_time_s }, { "pipeline_s", r->pipeline_s },
        { "bubble_fraction", r->bubble_fraction }, { "tokens_per_s_per_gpu", r->tokens_per_s_per_gpu },
        { "model_flops_per_step", r->model_flops }, { "model_tflops_per_gpu", r->model_tflops_per_gpu },
        { "mfu", r->mfu },
    };
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++)
        jsonout_kv_real(j, reals[i].key, reals[i].v);
    jsonout_str(j, "memory");
    jsonout_map_open(j);
    kv_bytes(j, "peak_bytes", r->peak_bytes);
    kv_bytes(j, "hbm_capacity_bytes", in->cluster.gpu.hbm_capacity_bytes);
    jsonout_str(j, "stages");
    jsonout_array_open(j);
    for (int64_t i = 0; i < r->n_stages; i++) {
        const stage_result *sr = &r->stages[i];
        jsonout_map_open(j);
        jsonout_kv_int(j, "stage", sr->stage);
        const struct { const char *key; double v; } bytes[] = {
            { "weights_bytes", sr->weights_bytes }, { "gradients_bytes", sr->gradients_bytes },
            { "optimizer_bytes", sr->optimizer_bytes }, { "activations_peak_bytes", sr->activations_peak_bytes },
        };
        for (size_t b = 0; b < sizeof bytes / sizeof bytes[0]; b++)
            kv_bytes(j, bytes[b].key, bytes[b].v);
        jsonout_kv_int(j, "inflight_microbatches_max", sr->inflight_microbatches_max);
        kv_bytes(j, "peak_bytes", sr->peak_bytes);
        jsonout_kv_real(j, "busy_s", sr->busy_s);
        jsonout_kv_real(j, "bubble_s", sr->bubble_s);
        jsonout_map_close(j);
    }
    jsonout_array_close(j);
    jsonout_map_close(j);
    jsonout_str(j, "comm");
    jsonout_map_open(j);
    char key[64];
    for (int k = 0; k < STREAM_KINDS; k++)
        if (streams_is_comm((stream_kind)k)) {
            snprintf(key, sizeof key, "%s_s", streams_desc((stream_kind)k)->key);
            jsonout_kv_real(j, key, r->comm_s[k]);
        }
    for (int k = 0; k < STREAM_KINDS; k++)
        if (streams_is_comm((stream_kind)k)) {
            snprintf(key, sizeof key, "%s_exposed_s", streams_desc((stream_kind)k)->key);
            jsonout_kv_real(j, key, r->exposed_s[k]);
        }
    jsonout_kv_real(j, "exposed_s", r->exposed_total_s);
    jsonout_map_close(j);
    /* Host streams: busy time per step on the busiest stage. */
    jsonout_str(j, "host");
    jsonout_map_open(j);
    for (int k = 0; k < STREAM_KINDS; k++)
        if (streams_desc((stream_kind)k)->role == STREAM_ROLE_HOST) {
            snprintf(key, sizeof key, "%s_s", streams_desc((stream_kind)k)->key);
            jsonout_kv_real(j, key, r->comm_s[k]);
        }
    jsonout_map_close(j);
    jsonout_str(j, "sim");
    jsonout_map_open(j);
    jsonout_str(j, "tasks");
    jsonout_uint(j, r->tasks);
    jsonout_str(j, "events");
    jsonout_uint(j, r->events);
    jsonout_kv_int(j, "seed", in->sim.seed);
    jsonout_map_close(j);
    jsonout_map_close(j);
    return jsonout_end(j, err);
}

/* A stream with a CSV column, in table order: communication and host
 * streams (the compute stream's time is what the step and bubble columns
 * say). */
static bool csv_stream(stream_kind k)
{
    return streams_desc(k)->role == STREAM_ROLE_COMM || streams_desc(k)->role == STREAM_ROLE_HOST;
}

void report_csv_header(FILE *out)
{
    fputs("model,topology,world_size,tp,pp,vp,cp,ep,etp,dp,edp,sp,num_microbatches,global_batch_size,"
          "micro_batch_size,seq_length,mixed_precision,recompute,step_time_s,bubble_fraction,"
          "tokens_per_s_per_gpu,model_tflops_per_gpu,mfu,peak_bytes",
          out);
    for (int k = 0; k < STREAM_KINDS; k++)
        if (csv_stream((stream_kind)k))
            fprintf(out, ",%s_s", streams_desc((stream_kind)k)->key);
    fputs(",exposed_s\n", out);
}

void report_csv_row(FILE *out, const run_inputs *in, const strategy_t *s, const step_result *r)
{
    csv_write_field(out, in->model.name);
    fputc(',', out);
    csv_write_field(out, in->cluster.name);
    const int64_t ints[] = { s->world, s->tp, s->pp, s->v, s->cp, s->ep, s->etp, s->dp, s->edp,
                             s->par.sequence_parallel ? 1 : 0, s->num_microbatches, in->train.global_batch_size,
                             in->train.micro_batch_size, in->model.seq_length };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        fprintf(out, ",%" PRId64, ints[i]);
    fputc(',', out);
    csv_write_field(out, precision_name(s->par.precision));
    fputc(',', out);
    csv_write_field(out, recompute_name(s->par.recompute_granularity));
    const double reals[] = { r->step_time_s, r->bubble_fraction, r->tokens_per_s_per_gpu, r->model_tflops_per_gpu,
                             r->mfu };
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++) {
        fputc(',', out);
        put_num(out, 0, "%.9g", reals[i], "");
    }
    fputc(',', out);
    put_num(out, 0, "%.0f", r->peak_bytes, "");
    for (int k = 0; k < STREAM_KINDS; k++)
        if (csv_stream((stream_kind)k)) {
            fputc(',', out);
            put_num(out, 0, "%.9g", r->comm_s[k], "");
        }
    fputc(',', out);
    put_num(out, 0, "%.9g", r->exposed_total_s, "");
    fputc('\n', out);
}
