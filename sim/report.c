#include "report.h"

#include <inttypes.h>

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

/* Writes s as a JSON string (quotes, backslashes and control characters
 * escaped), so any preset or topology name yields valid JSON. */
static void json_str(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(out, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(out, "\\u%04x", ch);
        else
            fputc(ch, out);
    }
    fputc('"', out);
}

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
    fprintf(out, "  options     %s  recompute %s  cp_comm %s  dist-opt %s", precision_name(s->par.precision),
            recompute_name(s->par.recompute_granularity), cp_comm_name(s->par.cp_comm_type),
            in->ddp.use_distributed_optimizer ? "on" : "off");
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
    if (in->sim.ideal_pipeline)
        fputs("  mode        ideal pipeline (no communication, identical stages)\n", out);
    fputc('\n', out);
    fprintf(out, "  step time            %10.4f s\n", r->step_time_s);
    fprintf(out, "  tokens/s per GPU     %10.1f\n", r->tokens_per_s_per_gpu);
    fprintf(out, "  model TFLOP/s per GPU%10.1f\n", r->model_tflops_per_gpu);
    fprintf(out, "  MFU                  %10.1f %%  (of %.0f TFLOP/s bf16 dense)\n", 100.0 * r->mfu,
            in->cluster.gpu.peak_bf16_flops_per_s / TFLOPS);
    fprintf(out, "  pipeline bubble      %10.1f %%\n", 100.0 * r->bubble_fraction);
    fputs("\n  communication (busiest stage)   total s   exposed s\n", out);
    for (int k = STREAM_TP; k < STREAM_KINDS; k++)
        fprintf(out, "    %-30s %9.4f   %9.4f\n", stream_kind_name((stream_kind)k), r->comm_s[k], r->exposed_s[k]);
    fprintf(out, "    %-30s %9s   %9.4f\n", "all (not hidden by compute)", "", r->exposed_total_s);
    fputs("\n  memory per GPU (GiB)  weights  grads  optim  activ  peak   in-flight\n", out);
    for (int64_t i = 0; i < r->n_stages; i++) {
        const stage_result *sr = &r->stages[i];
        fprintf(out, "    stage %-13" PRId64 "%8.2f %6.2f %6.2f %6.2f %6.2f   %5" PRId64 "\n", sr->stage,
                GIB_F(sr->weights_bytes), GIB_F(sr->gradients_bytes), GIB_F(sr->optimizer_bytes),
                GIB_F(sr->activations_peak_bytes), GIB_F(sr->peak_bytes), sr->inflight_microbatches_max);
    }
    double cap = in->cluster.gpu.hbm_capacity_bytes;
    fprintf(out, "    peak %.2f GiB of %.2f GiB HBM%s\n", GIB_F(r->peak_bytes), GIB_F(cap),
            r->peak_bytes > cap ? "  -- DOES NOT FIT" : "");
    char warn[1024];
    if (strategy_layout_warnings(s, warn, sizeof warn) > 0)
        fprintf(out, "\n%s", warn);
    fprintf(out, "\n  simulated %" PRIu64 " tasks, %" PRIu64 " events\n", r->tasks, r->events);
}

void report_json(FILE *out, const run_inputs *in, const strategy_t *s, const step_result *r)
{
    fprintf(out, "{\n  \"parallel\": {\"world_size\": %" PRId64 ", \"tp\": %" PRId64 ", \"pp\": %" PRId64
                 ", \"vp\": %" PRId64 ", \"cp\": %" PRId64 ", \"ep\": %" PRId64 ", \"etp\": %" PRId64
                 ", \"dp\": %" PRId64 ", \"edp\": %" PRId64 ", \"num_microbatches\": %" PRId64
                 ", \"min_gpus\": %" PRId64 ", \"min_gpus_common_rule\": %" PRId64
                 ", \"sequence_parallel\": %s},\n",
            s->world, s->tp, s->pp, s->v, s->cp, s->ep, s->etp, s->dp, s->edp, s->num_microbatches, s->min_gpus,
            s->min_gpus_common, s->par.sequence_parallel ? "true" : "false");
    fputs("  \"model\": ", out);
    json_str(out, in->model.name);
    fputs(", \"topology\": ", out);
    json_str(out, in->cluster.name);
    fprintf(out, ", \"mixed_precision\": \"%s\",\n", precision_name(s->par.precision));
    fprintf(out, "  \"step_time_s\": %.9g,\n  \"pipeline_s\": %.9g,\n  \"bubble_fraction\": %.9g,\n", r->step_time_s,
            r->pipeline_s, r->bubble_fraction);
    fprintf(out, "  \"tokens_per_s_per_gpu\": %.9g,\n  \"model_flops_per_step\": %.9g,\n", r->tokens_per_s_per_gpu,
            r->model_flops);
    fprintf(out, "  \"model_tflops_per_gpu\": %.9g,\n  \"mfu\": %.9g,\n", r->model_tflops_per_gpu, r->mfu);
    fprintf(out, "  \"memory\": {\"peak_bytes\": %.0f, \"hbm_capacity_bytes\": %.0f, \"stages\": [", r->peak_bytes,
            in->cluster.gpu.hbm_capacity_bytes);
    for (int64_t i = 0; i < r->n_stages; i++) {
        const stage_result *sr = &r->stages[i];
        fprintf(out, "%s\n    {\"stage\": %" PRId64 ", \"weights_bytes\": %.0f, \"gradients_bytes\": %.0f, "
                     "\"optimizer_bytes\": %.0f, \"activations_peak_bytes\": %.0f, "
                     "\"inflight_microbatches_max\": %" PRId64 ", \"peak_bytes\": %.0f, \"busy_s\": %.9g, "
                     "\"bubble_s\": %.9g}",
                i ? "," : "", sr->stage, sr->weights_bytes, sr->gradients_bytes, sr->optimizer_bytes,
                sr->activations_peak_bytes, sr->inflight_microbatches_max, sr->peak_bytes, sr->busy_s, sr->bubble_s);
    }
    fputs("]},\n  \"comm\": {", out);
    for (int k = STREAM_TP; k < STREAM_KINDS; k++)
        fprintf(out, "\"%s_s\": %.9g, ", stream_kind_name((stream_kind)k), r->comm_s[k]);
    for (int k = STREAM_TP; k < STREAM_KINDS; k++)
        fprintf(out, "\"%s_exposed_s\": %.9g, ", stream_kind_name((stream_kind)k), r->exposed_s[k]);
    fprintf(out, "\"exposed_s\": %.9g},\n", r->exposed_total_s);
    fprintf(out, "  \"sim\": {\"tasks\": %" PRIu64 ", \"events\": %" PRIu64 ", \"seed\": %" PRId64 "}\n}\n", r->tasks,
            r->events, in->sim.seed);
}

void report_csv_header(FILE *out)
{
    fputs("model,topology,world_size,tp,pp,vp,cp,ep,etp,dp,edp,sp,num_microbatches,global_batch_size,"
          "micro_batch_size,seq_length,mixed_precision,recompute,step_time_s,bubble_fraction,"
          "tokens_per_s_per_gpu,model_tflops_per_gpu,mfu,peak_bytes,tp_s,cp_s,ep_s,dp_s,pp_s,exposed_s\n",
          out);
}

void report_csv_row(FILE *out, const run_inputs *in, const strategy_t *s, const step_result *r)
{
    fprintf(out,
            "%s,%s,%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64
            ",%" PRId64 ",%d,%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%s,%s,%.9g,%.9g,%.9g,%.9g,%.9g,%.0f",
            in->model.name, in->cluster.name, s->world, s->tp, s->pp, s->v, s->cp, s->ep, s->etp, s->dp, s->edp,
            s->par.sequence_parallel ? 1 : 0, s->num_microbatches, in->train.global_batch_size,
            in->train.micro_batch_size, in->model.seq_length, precision_name(s->par.precision),
            recompute_name(s->par.recompute_granularity), r->step_time_s, r->bubble_fraction, r->tokens_per_s_per_gpu,
            r->model_tflops_per_gpu, r->mfu, r->peak_bytes);
    for (int k = STREAM_TP; k < STREAM_KINDS; k++)
        fprintf(out, ",%.9g", r->comm_s[k]);
    fprintf(out, ",%.9g\n", r->exposed_total_s);
}
