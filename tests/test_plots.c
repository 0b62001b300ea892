/* plots/trace2gantt.awk: what the timeline picture is drawn from. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "scratch.h"

/* A 1 s step: stage 0 computes F of microbatch 0 (chunk 0) with a kernel
 * inside it, B of microbatch 1 in chunk 1, and its tp stream carries three
 * transfers, two of them 1 us apart (well under a pixel of 1 s) and one
 * far off. */
static const char small_trace[] =
    "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n"
    "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":0,\"tid\":0,\"args\":{\"name\":\"compute\"}}\n"
    ",{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":0,\"tid\":1,\"args\":{\"name\":\"tp\"}}\n"
    ",{\"ph\":\"X\",\"name\":\"F\",\"pid\":0,\"tid\":0,\"ts\":0,\"dur\":400000,\"args\":{\"microbatch\":0,\"chunk\":0}}\n"
    ",{\"ph\":\"X\",\"name\":\"qkv\",\"pid\":0,\"tid\":0,\"ts\":10,\"dur\":100,\"args\":{\"microbatch\":0,\"chunk\":0}}\n"
    ",{\"ph\":\"X\",\"name\":\"B\",\"pid\":0,\"tid\":0,\"ts\":500000,\"dur\":500000,\"args\":{\"microbatch\":1,\"chunk\":1}}\n"
    ",{\"ph\":\"X\",\"name\":\"tp_ag\",\"pid\":0,\"tid\":1,\"ts\":1000,\"dur\":5,\"args\":{\"microbatch\":0,\"chunk\":0}}\n"
    ",{\"ph\":\"X\",\"name\":\"tp_rs\",\"pid\":0,\"tid\":1,\"ts\":1006,\"dur\":5,\"args\":{\"microbatch\":0,\"chunk\":0}}\n"
    ",{\"ph\":\"X\",\"name\":\"tp_ag\",\"pid\":0,\"tid\":1,\"ts\":700000,\"dur\":5,\"args\":{\"microbatch\":1,\"chunk\":1}}\n"
    "]}\n";

static char *convert(const char *window)
{
    char trace[256], prefix[256], cmd[1024], boxes[300];
    write_file(path_in(trace, sizeof trace, "t.json"), small_trace);
    path_in(prefix, sizeof prefix, "tl");
    snprintf(cmd, sizeof cmd, "cd '%s' && awk -f plots/trace2gantt.awk -v out='%s' %s '%s'", PARSIM_SOURCE_DIR,
             prefix, window, trace);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    snprintf(boxes, sizeof boxes, "%s.boxes", prefix);
    return read_file(boxes, NULL);
}

Test(plots, passes_kept_kernels_dropped_close_transfers_joined)
{
    make_dir();
    char *boxes = convert("");
    /* F, B (kind 0), the two close transfers as one box and the far one */
    cr_expect_eq(count_lines(boxes), 4, "%s", boxes);
    cr_expect(strstr(boxes, "1.000000 1.011000 "), "joined run 1.000-1.011 ms: %s", boxes);
    cr_expect(strstr(boxes, "700.000000 700.005000 "), "%s", boxes);
    free(boxes);

    char labels[300];
    char *lab = read_file(path_in(labels, sizeof labels, "tl.labels"), NULL);
    /* numbered as in the trace: F of microbatch 0 is "0", B of 1 is "1" */
    cr_expect(strstr(lab, "200.000000 -0.000 400.000000 0\n"), "%s", lab);
    cr_expect(strstr(lab, "750.000000 -0.000 500.000000 1\n"), "%s", lab);
    free(lab);

    char legend[300];
    char *leg = read_file(path_in(legend, sizeof legend, "tl.legend"), NULL);
    /* two chunks: each its own shade, named as in the trace */
    cr_expect(strstr(leg, "\"F chunk 0\""), "%s", leg);
    cr_expect(strstr(leg, "\"B chunk 1\""), "%s", leg);
    free(leg);
    remove_dir();
}

Test(plots, a_window_clips_the_boxes)
{
    make_dir();
    char *boxes = convert("-v t0=300 -v t1=600");
    /* F clipped to 300-400, B to 500-600; no transfer in the window */
    cr_expect_eq(count_lines(boxes), 2, "%s", boxes);
    cr_expect(strstr(boxes, "300.000000 400.000000 "), "%s", boxes);
    cr_expect(strstr(boxes, "500.000000 600.000000 "), "%s", boxes);
    free(boxes);
    remove_dir();
}
