/* sizing: the layout checklist (see sizing.h). */
#include "sizing.h"

#include <inttypes.h>

#include "heuristics.h"

/* The guidance row of the sequence length: the thresholds the rules-of-thumb
 * baseline applies (heuristics.h). */
static void long_sequence_advice(int64_t seq, char *buf, size_t len)
{
    if (seq < SP_FROM_TOKENS)
        snprintf(buf, len, "under %dK tokens: neither SP nor CP needed", SP_FROM_TOKENS / 1024);
    else if (seq < CP2_FROM_TOKENS)
        snprintf(buf, len, "%dK-%dK tokens: add SP (with TP > 1), no CP", SP_FROM_TOKENS / 1024,
                 CP2_FROM_TOKENS / 1024);
    else if (seq < CP4_FROM_TOKENS)
        snprintf(buf, len, "%dK-%dK tokens: add CP 2", CP2_FROM_TOKENS / 1024, CP4_FROM_TOKENS / 1024);
    else
        snprintf(buf, len, "%dK tokens and more: CP 4-8 (8 from %dK), hierarchical (cp_comm_type a2a+p2p)",
                 CP4_FROM_TOKENS / 1024, CP8_FROM_TOKENS / 1024);
}

static void print_group_domain(FILE *out, const char *name, const group_placements *p,
                               int64_t domain_gpus)
{
    const group_span *g = &p->span[p->worst];
    if (g->size <= 1) {
        fprintf(out, "%s 1", name);
        return;
    }
    int64_t crossing = 0;
    for (int i = 0; i < p->n; i++)
        if (!p->span[i].in_nvlink_domain)
            crossing += p->groups[i];
    if (crossing == 0)
        fprintf(out, "%s %" PRId64 " inside", name, g->size);
    else if (g->size > domain_gpus)
        fprintf(out, "%s %" PRId64 " crosses it (larger than the domain)", name, g->size);
    else
        fprintf(out, "%s %" PRId64 " crosses it in %" PRId64 " of %" PRId64 " groups", name,
                g->size, crossing, p->total);
}

void sizing_print(const model_spec *m, const strategy_t *s, const cluster_spec *c, FILE *out)
{
    const int64_t tpcp = s->tp * s->cp, epetp = s->ep * s->etp;
    fprintf(out, "\nsizing checklist\n");

    fprintf(out, "  min GPUs       %" PRId64 " = pp x lcm(tp x cp, ep x etp) = %" PRId64
                 " x lcm(%" PRId64 ", %" PRId64 ")\n",
            s->min_gpus, s->pp, tpcp, epetp);
    int64_t product = tpcp * epetp * s->pp;
    if (model_is_moe(m) && product != s->min_gpus) {
        fprintf(out, "                 not tp x cp x ep x etp x pp = %" PRId64
                     ": each stage's expert ranks (ep x etp x edp) are its dense ranks "
                     "(tp x cp x dp) again, so EP does not multiply the world\n",
                product);
    }
    if (s->min_gpus != s->min_gpus_common)
        fprintf(out, "                 not pp x max(tp x cp, ep x etp) = %" PRId64
                     ": a stage must hold whole groups of both, and neither %" PRId64
                     " nor %" PRId64 " divides the other\n",
                s->min_gpus_common, tpcp, epetp);

    fprintf(out, "  DP             dense  dp  = world / (tp x cp x pp) = %" PRId64 " / (%" PRId64
                 " x %" PRId64 " x %" PRId64 ") = %" PRId64 "\n",
            s->world, s->tp, s->cp, s->pp, s->dp);
    if (model_is_moe(m))
        fprintf(out, "                 expert edp = world / (ep x etp x pp) = %" PRId64 " / (%" PRId64
                 " x %" PRId64 " x %" PRId64 ") = %" PRId64 "\n",
            s->world, s->ep, s->etp, s->pp, s->edp);

    fprintf(out, "  NVLink domain  %" PRId64 " GPUs the job fills: ", c->nvlink_domain_gpus);
    print_group_domain(out, "tp", &s->places[GROUP_TP], c->nvlink_domain_gpus);
    if (model_is_moe(m)) {
        fprintf(out, "; ");
        print_group_domain(out, "ep", &s->places[GROUP_EP], c->nvlink_domain_gpus);
    }
    fprintf(out, "\n");

    const int64_t seq = m->seq_length;
    const char *sp;
    if (s->par.sequence_parallel)
        sp = "on";
    else if (s->tp == 1)
        sp = "off (needs TP > 1)";
    else if (seq >= SP_FROM_TOKENS)
        sp = "off: recommended with TP > 1 from 2K tokens";
    else
        sp = "off";
    fprintf(out, "  SP             %s\n", sp);

    if (s->cp > 1)
        fprintf(out, "  CP             seq %" PRId64 " is a multiple of 2 x cp = %" PRId64
                     " (Megatron's zig-zag split into 2 x cp chunks)\n",
                seq, 2 * s->cp);
    else
        fprintf(out, "  CP             1 (with CP > 1, seq must be a multiple of 2 x cp)\n");
    char advice[160];
    long_sequence_advice(seq, advice, sizeof advice);
    fprintf(out, "  long sequence  seq %" PRId64 ", %s\n", seq, advice);
}
