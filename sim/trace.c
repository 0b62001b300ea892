#include "trace.h"

#include <inttypes.h>

static void meta(FILE *out, bool *first, const char *what, int64_t pid, int tid, const char *name)
{
    fprintf(out, "%s\n{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%" PRId64 ",\"tid\":%d,\"args\":{\"name\":\"%s\"}}",
            *first ? "" : ",", what, pid, tid, name);
    *first = false;
}

static void event(FILE *out, bool *first, const char *name, int64_t pid, int tid, sim_time_ps start,
                  sim_time_ps end, int32_t mb, int32_t chunk)
{
    fprintf(out, "%s\n{\"ph\":\"X\",\"name\":\"%s\",\"pid\":%" PRId64 ",\"tid\":%d,\"ts\":%.6f,\"dur\":%.6f",
            *first ? "" : ",", name, pid, tid, time_as_us(start), time_as_us(end - start));
    if (mb >= 0 || chunk >= 0)
        fprintf(out, ",\"args\":{\"microbatch\":%d,\"chunk\":%d}", (int)mb, (int)chunk);
    fputc('}', out);
    *first = false;
}

void trace_write(FILE *out, const step_t *st)
{
    const engine_t *e = step_engine(st);
    int64_t pp, v, M;
    step_shape(st, &pp, &v, &M);
    bool first = true;
    fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", out);
    for (int64_t r = 0; r < pp; r++) {
        char name[32];
        snprintf(name, sizeof name, "stage %" PRId64, r);
        meta(out, &first, "process_name", r, 0, name);
        for (int k = 0; k < STREAM_KINDS; k++)
            meta(out, &first, "thread_name", r, k, stream_kind_name((stream_kind)k));
    }
    /* Forward and backward passes, the spans the schedule figures show. */
    for (int64_t r = 0; r < pp; r++)
        for (int kind = 0; kind < 2; kind++)
            for (int64_t mb = 0; mb < M; mb++)
                for (int64_t c = 0; c < v; c++) {
                    sim_time_ps a, b;
                    if (step_pass_span(st, r, kind, mb, c, &a, &b))
                        event(out, &first, kind == 0 ? "F" : "B", r, STREAM_COMPUTE, a, b, (int32_t)mb,
                              (int32_t)c);
                }
    /* Every kernel and transfer, nested under its pass on its stream. */
    size_t n = eng_num_tasks(e);
    for (size_t i = 0; i < n; i++) {
        step_task_info info;
        step_task_describe(st, (eng_task)i, &info);
        sim_time_ps a = eng_task_start(e, (eng_task)i), b = eng_task_end(e, (eng_task)i);
        /* Zero-length joins, and passes that stand as one task (written
         * above as their span), are left out. */
        if (b == a || ((info.name[0] == 'F' || info.name[0] == 'B') && info.name[1] == '\0'))
            continue;
        event(out, &first, info.name, info.stage, (int)info.stream, a, b, info.microbatch, info.chunk);
    }
    fputs("\n]}\n", out);
}
