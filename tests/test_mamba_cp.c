/* Mamba-2 mixers with context parallelism (Megatron's head-parallel
 * all-to-all, mamba_context_parallel.py): the all-to-alls' volumes with and
 * without the repeated B/C groups, the CP rules, the activations kept with
 * CP and on the unfused path (model.use_mamba_mem_eff_path), search's
 * pruning by the Mamba rules, and the op names --trace shows. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_run.h"
#include "compute.h"
#include "config.h"
#include "memory.h"
#include "model.h"
#include "net.h"
#include "search.h"
#include "strategy.h"
#include "units.h"
#include "workload.h"
#include "wl_kept.h"

#define NH8B "model.name=nemotron-h-8b cluster.topology=dgx-h100 "

typedef struct resolved {
    cfg_t *cfg;
    run_inputs in;
    strategy_t s;
} resolved;

/* Resolves "KEY=VALUE ..." (space-separated) as the command line does. */
static void resolve(resolved *x, const char *args)
{
    sim_err err;
    sim_err_clear(&err);
    x->cfg = cfg_create(PARSIM_SOURCE_DIR);
    cr_assert_not_null(x->cfg);
    char buf[1024], *save = NULL;
    snprintf(buf, sizeof buf, "%s", args);
    for (char *kv = strtok_r(buf, " ", &save); kv; kv = strtok_r(NULL, " ", &save))
        cr_assert_eq(cfg_set_override(x->cfg, kv, &err), SIM_OK, "%s: %s", kv, err.msg);
    char msg[1024];
    int rc = cfg_resolve_all(x->cfg, &x->in, &x->s, &err);
    sim_err_format(&err, msg, sizeof msg);
    cr_assert_eq(rc, SIM_OK, "%s: %s", args, msg);
}

/* The first Mamba layer's forward or backward ops, unfused: a copy of the
 * first chunk's pass (layer 0 of the Nemotron-H patterns is a Mamba one). */
static wl_pass first_pass(const resolved *x, bool bwd)
{
    workload_t *w = wl_kept(&x->in, &x->s);
    const wl_pass *p = bwd ? &w->stages[0].chunks[0].bwd : &w->stages[0].chunks[0].fwd;
    wl_pass out = {malloc(((size_t)p->n_ops + 1) * sizeof *out.ops), p->n_ops, p->flops};
    cr_assert_not_null(out.ops);
    memcpy(out.ops, p->ops, (size_t)p->n_ops * sizeof *out.ops);
    workload_destroy(w);
    return out;
}

/* Durations of the ops named `name` from op `from` on, at most n. */
static int durations(const wl_pass *p, int32_t from, const char *name, sim_time_ps *out, int n, int32_t *last)
{
    int k = 0;
    for (int32_t i = from; i < p->n_ops && k < n; i++)
        if (strcmp(p->ops[i].name, name) == 0) {
            out[k++] = p->ops[i].duration_ps;
            *last = i;
        }
    return k;
}

static sim_time_ps a2a_ps(const resolved *x, double bytes)
{
    sim_time_ps t = 0;
    double s = net_collective_worst_s(&x->in.cluster, &x->s.places[GROUP_CP], COLL_ALL_TO_ALL, bytes);
    cr_assert(time_from_s_checked(s, &t));
    return t;
}

/* Forward: five all-to-alls before the scan (z, x, B, C, dt at d_in/t,
 * d_in/t, r G N/t, r G N/t, H/t bf16 elements per token of this rank) and
 * one after (y, d_in/t); the backward the same, in reverse.  Together
 * (2 d_in + 2 r G N + H)/t (cp-1)/cp elements per token leave the rank
 * before the SSM and d_in/t (cp-1)/cp after (megatron-features.md B.5). */
static void check_volumes(const char *args, int64_t want_r)
{
    resolved x;
    resolve(&x, args);
    const model_spec *m = &x.in.model;
    cr_assert_eq(strategy_mamba_group_repeat(m, x.s.tp, x.s.cp), want_r, "%s", args);
    double t = (double)x.s.tp, r = (double)want_r;
    double T = (double)m->seq_length / (double)x.s.cp * (double)x.in.train.micro_batch_size;
    double d = (double)(m->mamba_num_heads * m->mamba_head_dim) / t;
    double gn = (double)(m->mamba_num_groups * m->mamba_state_dim) / t;
    double H = (double)m->mamba_num_heads / t;
    double pre[5] = {d, d, r * gn, r * gn, H};
    double elems = 0;
    for (int i = 0; i < 5; i++)
        elems += pre[i];
    cr_assert_float_eq(elems, (2.0 * d * t + 2.0 * r * gn * t + H * t) / t, 1e-9 * elems);

    for (int bwd = 0; bwd < 2; bwd++) {
        wl_pass p = first_pass(&x, bwd);
        sim_time_ps got[6];
        int32_t last = 0;
        cr_assert_eq(durations(&p, 0, "mamba_cp_a2a", got, 6, &last), 6, "%s: six all-to-alls per layer", args);
        for (int i = 0; i < 6; i++) {
            /* forward: 5 in, then y; backward: dy, then the 5 back */
            int at = bwd ? i - 1 : i;
            double width = (bwd ? i == 0 : i == 5) ? d : pre[at];
            cr_assert_eq(got[i], a2a_ps(&x, 2.0 * T * width), "%s: %s all-to-all %d: %llu ps, want %llu", args,
                         bwd ? "backward" : "forward", i, (unsigned long long)got[i],
                         (unsigned long long)a2a_ps(&x, 2.0 * T * width));
        }
        for (int32_t i = 0; i < p.n_ops; i++)
            if (strcmp(p.ops[i].name, "mamba_cp_a2a") == 0)
                cr_assert_eq(p.ops[i].stream, STREAM_CP);
        free(p.ops);
    }
    cfg_destroy(x.cfg);
}

Test(mamba_cp, a2a_volumes_without_group_repeat)
{
    /* G/t = 4 groups per TP rank split over CP 4 */
    check_volumes(NH8B "cluster.num_gpus=8 train.global_batch_size=8 model.tensor_model_parallel_size=2 "
                       "model.sequence_parallel=true model.context_parallel_size=4", 1);
    check_volumes(NH8B "cluster.num_gpus=4 train.global_batch_size=4 model.context_parallel_size=4", 1);
}

Test(mamba_cp, a2a_volumes_with_group_repeat)
{
    /* G/t = 2 < CP 8: each group repeated 4 times; G/t = 1 < CP 2: twice */
    check_volumes(NH8B "cluster.num_gpus=32 train.global_batch_size=8 model.tensor_model_parallel_size=4 "
                       "model.sequence_parallel=true model.context_parallel_size=8", 4);
    check_volumes(NH8B "cluster.num_gpus=16 train.global_batch_size=8 model.tensor_model_parallel_size=8 "
                       "model.sequence_parallel=true model.context_parallel_size=2", 2);
}

/* Without CP nothing is exchanged; the attention layers of the same model
 * keep their own cp_comm_type. */
Test(mamba_cp, attention_layers_keep_their_cp_comm_type)
{
    resolved x;
    resolve(&x, NH8B "cluster.num_gpus=4 train.global_batch_size=4 model.context_parallel_size=4 "
                     "model.cp_comm_type=a2a");
    wl_pass p = first_pass(&x, false);
    int mamba = 0, attn = 0, ring = 0;
    for (int32_t i = 0; i < p.n_ops; i++) {
        mamba += strcmp(p.ops[i].name, "mamba_cp_a2a") == 0;
        attn += strcmp(p.ops[i].name, "cp_a2a") == 0;
        ring += strcmp(p.ops[i].name, "cp_p2p") == 0;
    }
    free(p.ops);
    cfg_destroy(x.cfg);
    int64_t layers = 0, attn_layers = 0;
    for (int64_t l = 0; l < x.in.model.num_layers; l++) {
        layers += x.in.model.layers[l].mixer == MODEL_MIXER_MAMBA;
        attn_layers += x.in.model.layers[l].mixer == MODEL_MIXER_ATTENTION;
    }
    cr_assert_gt(attn_layers, 0);
    cr_assert_eq(mamba, 6 * layers);
    cr_assert_eq(attn, 2 * attn_layers, "Ulysses: in and out per attention layer");
    cr_assert_eq(ring, 0);

    resolve(&x, NH8B "cluster.num_gpus=4 train.global_batch_size=4");
    p = first_pass(&x, false);
    for (int32_t i = 0; i < p.n_ops; i++)
        cr_assert(strncmp(p.ops[i].name, "mamba_cp_", 9) != 0, "CP 1: %s", p.ops[i].name);
    free(p.ops);
    cfg_destroy(x.cfg);
}

Test(mamba_cp, rules_refuse_naming_the_key)
{
    static const struct {
        const char *args, *want;
    } cases[] = {
        { "run " NH8B "cluster.num_gpus=8 train.global_batch_size=8 model.context_parallel_size=8 "
          "model.mamba_num_heads=12 model.mamba_num_groups=4",
          "model.context_parallel_size: the Mamba heads of a TP rank (mamba_num_heads / "
          "tensor_model_parallel_size = 12) must be divisible by context_parallel_size (8)" },
        { "run " NH8B "cluster.num_gpus=8 train.global_batch_size=8 model.tensor_model_parallel_size=2 "
          "model.context_parallel_size=4 model.mamba_num_heads=48 model.mamba_num_groups=12",
          "model.context_parallel_size: the Mamba groups of a TP rank (mamba_num_groups / "
          "tensor_model_parallel_size = 6) and context_parallel_size (4) must divide one another" },
        { "run model.name=llama3-8b cluster.topology=dgx-h100 cluster.num_gpus=8 train.global_batch_size=8 "
          "model.use_mamba_mem_eff_path=false",
          "model.use_mamba_mem_eff_path: false selects the Mamba mixer's unfused path, but the model has no "
          "Mamba layer" },
        { "search " NH8B "cluster.num_gpus=16 train.global_batch_size=16 model.tensor_model_parallel_size=16",
          "model.mamba_num_groups: 8 Mamba groups must be divisible by tensor_model_parallel_size (16)" },
        { "search " NH8B "cluster.num_gpus=16 train.global_batch_size=16 model.mamba_num_heads=24 "
          "model.context_parallel_size=16",
          "model.context_parallel_size: the Mamba heads of a TP rank (mamba_num_heads / "
          "tensor_model_parallel_size = 24) must be divisible by context_parallel_size (16)" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        result r;
        run(&r, cases[i].args);
        expect_refusal(&r, cases[i].args, cases[i].want, NULL);
    }
}

/* Bytes a Mamba layer (layer 0) keeps over those of the same layer at
 * CP 1 divided by CP: per token of s/cp, 2 (2 (r-1) G N)/t for the
 * repeated groups in the saved zxBCdt, nothing else. */
Test(mamba_cp, activations_with_cp)
{
    static const struct {
        const char *tp_cp;
        double r;
    } cases[] = {
        { "model.tensor_model_parallel_size=2 model.context_parallel_size=4", 1.0 },
        { "model.tensor_model_parallel_size=4 model.context_parallel_size=8", 4.0 },
        { "model.tensor_model_parallel_size=8 model.context_parallel_size=2", 2.0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char a[512], b[600];
        snprintf(a, sizeof a, NH8B "cluster.num_gpus=64 train.global_batch_size=64 model.sequence_parallel=true %s",
                 cases[i].tp_cp);
        snprintf(b, sizeof b, "%s model.context_parallel_size=1", a);
        resolved x, y;
        resolve(&x, a);
        resolve(&y, b);
        const model_spec *m = &x.in.model;
        double cp = (double)x.s.cp, t = (double)x.s.tp;
        double sb = (double)m->seq_length / cp * (double)x.in.train.micro_batch_size;
        double got = memory_layer_activation_bytes_at(&x.in, &x.s, 0);
        double base = memory_layer_activation_bytes_at(&y.in, &y.s, 0) / cp;
        double want = base + 2.0 * sb * 2.0 * (cases[i].r - 1.0) * (double)(m->mamba_num_groups * m->mamba_state_dim) / t;
        cr_assert_float_eq(got, want, 1e-9 * want, "%s: %.6g bytes, want %.6g", a, got, want);
        /* the whole formula at CP: seq part + (2 d_in + 2 r G N + H + 3 d_in)/t per token, bf16 */
        double h = (double)m->hidden_size, d_in = (double)(m->mamba_num_heads * m->mamba_head_dim);
        double whole = (2.0 + 2.0 + 1.0) * sb * h / t +
                       2.0 * sb * (5.0 * d_in + 2.0 * cases[i].r * (double)(m->mamba_num_groups * m->mamba_state_dim) +
                                   (double)m->mamba_num_heads) / t;
        cr_assert_float_eq(got, whole, 1e-9 * whole, "%s: %.6g bytes, formula %.6g", a, got, whole);
        cfg_destroy(x.cfg);
        cfg_destroy(y.cfg);
    }
}

/* The unfused path keeps the conv output's B and C (2 r G N/t) and the
 * scan's dA_cumsum (fp32, H/t) beyond the fused one, and its conv backward
 * does not recompute the conv output (half the fused one's bytes). */
Test(mamba_cp, unfused_path_keeps_more_and_recomputes_less)
{
    const char *base = NH8B "cluster.num_gpus=16 train.global_batch_size=16 model.tensor_model_parallel_size=8 "
                            "model.sequence_parallel=true model.context_parallel_size=2";
    char b[512];
    snprintf(b, sizeof b, "%s model.use_mamba_mem_eff_path=false", base);
    resolved f, u;
    resolve(&f, base);
    resolve(&u, b);
    const model_spec *m = &f.in.model;
    double t = (double)f.s.tp, r = 2.0;
    double sb = (double)m->seq_length / (double)f.s.cp * (double)f.in.train.micro_batch_size;
    double extra = 2.0 * sb * 2.0 * r * (double)(m->mamba_num_groups * m->mamba_state_dim) / t +
                   4.0 * sb * (double)m->mamba_num_heads / t;
    double got = memory_layer_activation_bytes_at(&u.in, &u.s, 0) - memory_layer_activation_bytes_at(&f.in, &f.s, 0);
    cr_assert_float_eq(got, extra, 1e-9 * extra, "%.6g more bytes, want %.6g", got, extra);

    wl_pass pf = first_pass(&f, true), pu = first_pass(&u, true);
    sim_time_ps cf = 0, cu = 0;
    int32_t last = 0;
    cr_assert_eq(durations(&pf, 0, "mamba_conv1d_bwd", &cf, 1, &last), 1);
    cr_assert_eq(durations(&pu, 0, "mamba_conv1d_bwd", &cu, 1, &last), 1);
    double conv = (double)(m->mamba_num_heads * m->mamba_head_dim) / t +
                  2.0 * r * (double)(m->mamba_num_groups * m->mamba_state_dim) / t; /* x B C per token, CP'd */
    double T = sb;                                                                    /* tokens x widths / cp */
    sim_time_ps want_f = 0, want_u = 0;
    cr_assert(time_from_s_checked(compute_memory_s(&f.in.cluster, 8.0 * T * conv), &want_f));
    cr_assert(time_from_s_checked(compute_memory_s(&u.in.cluster, 4.0 * T * conv), &want_u));
    cr_assert_eq(cf, want_f);
    cr_assert_eq(cu, want_u);
    cr_assert_lt(cu, cf);
    free(pf.ops);
    free(pu.ops);
    cfg_destroy(f.cfg);
    cfg_destroy(u.cfg);
}

/* Search prunes by the Mamba rules while enumerating: with 24 Mamba
 * heads (3 per rank at TP 8, 12 at TP 2) no candidate is illegal, every
 * simulated one satisfies them, and CP > 1 is among them. */
Test(mamba_cp, search_enumerates_only_legal_mamba_layouts)
{
    resolved x;
    resolve(&x, NH8B "cluster.num_gpus=16 train.global_batch_size=256 model.mamba_num_heads=24 "
                     "model.pipeline_model_parallel_size=1");
    search_opts o;
    search_opts_default(&o);
    o.jobs = 1;
    o.exhaustive = true;
    o.pinned |= 1u << SEARCH_DIM_PP;
    search_result r;
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(search_run(&x.in, &o, &r, &err), SIM_OK, "%s", err.msg);
    cr_assert_eq(r.counts.illegal, 0, "%lld illegal: %s", (long long)r.counts.illegal, r.first_illegal);
    cr_assert_gt(r.n_cands, 0);
    bool cp = false, tp = false;
    for (size_t i = 0; i < r.n_cands; i++) {
        const parallel_spec *p = &r.cands[i].par;
        cr_assert_eq(strategy_check_mamba(&x.in.model, p->tp, p->cp, NULL), SIM_OK, "TP %lld CP %lld",
                     (long long)p->tp, (long long)p->cp);
        cp |= p->cp > 1;
        tp |= p->tp > 1;
    }
    cr_assert(cp && tp, "CP > 1 and TP > 1 among the candidates");
    search_result_free(&r);
    cfg_destroy(x.cfg);
}

/* --trace names the mixer's ops mamba_* and its CP exchanges
 * mamba_cp_a2a; --layout shows the CP group. */
Test(mamba_cp, trace_and_layout_name_the_ops)
{
    char dir[] = "/tmp/parsim-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[256], args[1024];
    snprintf(path, sizeof path, "%s/trace.json", dir);
    snprintf(args, sizeof args,
             "run " NH8B "cluster.num_gpus=4 train.global_batch_size=4 model.context_parallel_size=4 --trace '%s'",
             path);
    result r;
    run(&r, args);
    cr_assert_eq(r.status, 0, "%s", r.out);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    static char buf[1 << 22];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    static const char *const names[] = {"\"mamba_cp_a2a\"", "\"mamba_cp_permute\"", "\"mamba_in_proj\"",
                                        "\"mamba_conv1d\"", "\"mamba_ssd_scan\"", "\"mamba_ssd_scan_bwd\"",
                                        "\"mamba_out_proj\""};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        cr_assert(strstr(buf, names[i]), "trace lacks %s", names[i]);
    cr_assert_eq(unlink(path), 0);
    cr_assert_eq(rmdir(dir), 0);

    run(&r, "run " NH8B "cluster.num_gpus=4 train.global_batch_size=4 model.context_parallel_size=4 --layout");
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_assert(strstr(r.out, "CP          4"), "%s", r.out);
}
