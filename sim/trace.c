#include "trace.h"

#include <inttypes.h>

#include "jsonout.h"
#include "schedule.h"
#include "streams.h"

/* Opens an event's map with the fields every event has.  One event per
 * line: a newline before each keeps the file readable with line tools
 * (grep, diff) at no cost to JSON readers. */
static void event_open(jsonout *j, const char *ph, const char *name, int64_t pid, int tid)
{
    jsonout_space(j, "\n");
    jsonout_map_open(j);
    jsonout_kv_str(j, "ph", ph);
    jsonout_kv_str(j, "name", name);
    jsonout_kv_int(j, "pid", pid);
    jsonout_kv_int(j, "tid", tid);
}

static void meta(jsonout *j, const char *what, int64_t pid, int tid, const char *name)
{
    event_open(j, "M", what, pid, tid);
    jsonout_str(j, "args");
    jsonout_map_open(j);
    jsonout_kv_str(j, "name", name);
    jsonout_map_close(j);
    jsonout_map_close(j);
}

static void event(jsonout *j, const char *name, int64_t pid, int tid, sim_time_ps start, sim_time_ps end,
                  int32_t mb, int32_t chunk)
{
    event_open(j, "X", name, pid, tid);
    /* Microseconds with 6 decimals: the simulated picoseconds exactly. */
    jsonout_kv_scaled(j, "ts", start, 6);
    jsonout_kv_scaled(j, "dur", end - start, 6);
    if (mb >= 0 || chunk >= 0) {
        jsonout_str(j, "args");
        jsonout_map_open(j);
        jsonout_kv_int(j, "microbatch", mb);
        jsonout_kv_int(j, "chunk", chunk);
        jsonout_map_close(j);
    }
    jsonout_map_close(j);
}

int trace_write(FILE *out, const step_t *st, sim_err *err)
{
    const engine_t *e = step_engine(st);
    if (!e)
        return sim_err_set(err, SIM_EINVAL, "a trace needs the step simulated on its graph, task by task");
    jsonout *j = jsonout_begin(out, false, err);
    if (!j)
        return SIM_ENOMEM;
    int64_t pp, v, M;
    step_shape(st, &pp, &v, &M);
    jsonout_map_open(j);
    jsonout_kv_str(j, "displayTimeUnit", "ns");
    jsonout_str(j, "traceEvents");
    jsonout_array_open(j);
    for (int64_t r = 0; r < pp; r++) {
        char name[32];
        snprintf(name, sizeof name, "stage %" PRId64, r);
        meta(j, "process_name", r, 0, name);
        for (int k = 0; k < STREAM_KINDS; k++)
            if (streams_desc((stream_kind)k)->role != STREAM_ROLE_DELAY)
                meta(j, "thread_name", r, k, streams_desc((stream_kind)k)->name);
    }
    /* The passes (F, B, W), the spans the schedule figures show. */
    for (int64_t r = 0; r < pp; r++)
        for (int kind = 0; kind < SCHED_KINDS; kind++)
            for (int64_t mb = 0; mb < M; mb++)
                for (int64_t c = 0; c < v; c++) {
                    sim_time_ps a, b;
                    if (step_pass_span(st, r, kind, mb, c, &a, &b))
                        event(j, sched_kind_of((sched_kind)kind)->name, r, STREAM_COMPUTE, a, b, (int32_t)mb,
                              (int32_t)c);
                }
    /* Every kernel and transfer, nested under its pass on its stream. */
    size_t n = eng_num_tasks(e);
    for (size_t i = 0; i < n; i++) {
        step_task_info info;
        step_task_describe(st, (eng_task)i, &info);
        sim_time_ps a = eng_task_start(e, (eng_task)i), b = eng_task_end(e, (eng_task)i);
        /* Zero-length joins, passes that stand as one task (written
         * above as their span) and delay tasks (no resource) are left
         * out. */
        if (b == a || info.whole_pass ||
            streams_desc(info.stream)->role == STREAM_ROLE_DELAY)
            continue;
        event(j, info.name, info.stage, (int)info.stream, a, b, info.microbatch, info.chunk);
    }
    jsonout_space(j, "\n");
    jsonout_array_close(j);
    jsonout_map_close(j);
    jsonout_space(j, "\n");
    return jsonout_end(j, err);
}
