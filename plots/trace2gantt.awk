# trace2gantt.awk: turns a parsim Chrome trace (parsim run --trace FILE.json)
# into tables for plots/timeline.gp, a Gantt chart per pipeline stage and
# stream like the schedule figures of the Megatron papers.
#
#   awk -f plots/trace2gantt.awk -v out=PREFIX [-v width=PIXELS] [-v t0=MS -v t1=MS] trace.json
#
# t0, t1: draw only that window of the step (milliseconds; boxes clipped to it).
#
# writes
#   PREFIX.boxes   x0_ms x1_ms y0 y1 rgb kind  one box per pass (kind 0) or
#                                              run of transfers (kind 1)
#   PREFIX.labels  x_ms y width_ms text         microbatch numbers of F/B/W boxes
#   PREFIX.lanes   y "name"                     one line per stage and stream
#   PREFIX.legend  rgb "name"                   the kinds of box present
#
# Lanes: per stage, the compute stream (F, B, W passes and the optimizer;
# the individual kernels inside a pass are left out) and every other stream
# that carries anything in the trace (tp, cp, ep, dp, pp, host), stage 0 at
# the top.  Colours: forward blue, backward green, weight gradient red, each
# model chunk of an interleaved schedule its own shade (chunk 1 darkest, the
# last lightest), other streams by name.  Microbatches and chunks are
# numbered as in the trace (from 0), so a box can be found there.
# Transfers closer together than a pixel of the picture (width, default
# 1600) are drawn as one box: a step has hundreds of thousands of them,
# which no picture resolves.  One pass over the trace, one event per line
# as parsim writes it (several on a line are read too); memory grows with
# the boxes kept, not with the kernels.

function num(e, key,    m) {
    if (!match(e, "\"" key "\": *-?[0-9.eE+-]+")) return ""
    m = substr(e, RSTART, RLENGTH)
    sub(/^[^:]*: */, "", m)
    return m + 0
}
function str(e, key,    m) {
    if (!match(e, "\"" key "\": *\"[^\"]*\"")) return ""
    m = substr(e, RSTART, RLENGTH)
    sub(/^[^:]*: *"/, "", m); sub(/"$/, "", m)
    return m
}
function shade(rgb, chunk, nchunk,    r, g, b, t) {
    # mix towards white, evenly from the first chunk (as is) to the last (60%)
    t = nchunk > 1 ? 0.6 * chunk / (nchunk - 1) : 0
    r = int(rgb / 65536); g = int(rgb / 256) % 256; b = rgb % 256
    r = int(r + (255 - r) * t); g = int(g + (255 - g) * t); b = int(b + (255 - b) * t)
    return r * 65536 + g * 256 + b
}
function is_compute(t) { return (t in tname) ? tname[t] == "compute" : t == 0 }
function event(e,    ph, pid, tid, name, ts, dur, mb, ch, k, x0, x1) {
    ph = substr(e, index(e, "\"") + 1, 1)
    pid = num(e, "pid"); tid = num(e, "tid")
    if (ph == "M") {
        if (str(e, "name") == "thread_name") {
            # args: {"name":"tp"} is the second "name" in the event
            a = e; sub(/.*"args" *: *\{/, "", a)
            tname[tid] = str(a, "name")
        }
        return
    }
    if (ph != "X") return
    if (pid + 1 > nstage) nstage = pid + 1
    name = str(e, "name")
    mb = num(e, "microbatch")
    if (is_compute(tid) && !(name in base) && mb != "" && mb >= 0) return # a kernel inside a pass
    ts = num(e, "ts") / 1000; dur = num(e, "dur") / 1000
    ch = num(e, "chunk")
    ch = ch == "" ? 0 : ch
    if (ch + 1 > nchunk) nchunk = ch + 1 # every chunk counts for the shades, seen or not
    x0 = ts; x1 = ts + dur
    if (windowed) {
        if (x1 < t0 || x0 > t1) return
        if (x0 < t0) x0 = t0
        if (x1 > t1) x1 = t1
    }
    k = ++nev
    E_pid[k] = pid; E_tid[k] = tid; E_name[k] = name
    E_x0[k] = x0; E_x1[k] = x1; E_mb[k] = mb; E_ch[k] = ch
    if (x1 > tmax) tmax = x1
    used[tid] = 1
}
function flush(key) {
    if (!(key in P_x0)) return
    printf("%.6f %.6f %.3f %.3f %d 1\n", P_x0[key], P_x1[key], P_y0[key], P_y1[key], P_rgb[key]) > (out ".boxes")
    delete P_x0[key]
}

BEGIN {
    if (width == "") width = 1600
    windowed = t1 != ""
    t0 = t0 + 0; t1 = t1 + 0
    base["F"] = 4813488      # 0x4972B0
    base["B"] = 5613672      # 0x55A868
    base["W"] = 12865106     # 0xC44E52
    base["optimizer"] = 9211020
    comm["tp"] = 14517330    # 0xDD8452
    comm["cp"] = 8483507     # 0x8172B3
    comm["ep"] = 9664608     # 0x937860
    comm["dp"] = 14322627    # 0xDA8BC3
    comm["pp"] = 6579300     # 0x646464
    comm["host"] = 11711154  # 0xB2B2B2
    nstage = 0; nchunk = 1; tmax = 0
}

{
    n = split($0, ev, /"ph" *:/)
    for (i = 2; i <= n; i++) event(ev[i])
}

END {
    # lanes: compute first, then the streams that carry something, by tid
    nl = 0
    for (t = 0; t < 64; t++)
        if ((t in used) && is_compute(t)) lane[t] = nl++
    for (t = 0; t < 64; t++)
        if ((t in used) && !(t in lane)) lane[t] = nl++
    pitch = nl + 0.6
    for (s = 0; s < nstage; s++)
        for (t in lane) {
            nm = (t in tname) ? tname[t] : "stream " t
            y = -(s * pitch + lane[t])
            printf("%s \"%s\"\n", y, lane[t] == 0 ? "stage " s " " nm : nm) > (out ".lanes")
        }
    if (windowed) tmax = t1
    px = (tmax - (windowed ? t0 : 0)) / (width - 200.0)
    for (k = 1; k <= nev; k++) {
        t = E_tid[k]; nm = E_name[k]
        compute = is_compute(t)
        y = -(E_pid[k] * pitch + lane[t])
        h = compute ? 0.42 : 0.25
        chunk = E_ch[k]
        if (compute) {
            rgb = (nm in base) ? shade(base[nm], chunk, nchunk) : 10066329
            what = (nm in base) ? nm (nchunk > 1 && nm != "optimizer" ? " chunk " chunk : "") : "other"
        } else {
            rgb = (tname[t] in comm) ? comm[tname[t]] : 10066329
            what = (t in tname) ? tname[t] : "stream " t
        }
        if (!(what in seen)) {
            seen[what] = 1
            order[++nseen] = what
            color[what] = rgb
        }
        if (compute) {
            printf("%.6f %.6f %.3f %.3f %d 0\n", E_x0[k], E_x1[k], y - h, y + h, rgb) > (out ".boxes")
            if ((nm == "F" || nm == "B" || nm == "W") && E_mb[k] != "" && E_mb[k] >= 0)
                printf("%.6f %.3f %.6f %d\n", (E_x0[k] + E_x1[k]) / 2, y, E_x1[k] - E_x0[k], E_mb[k]) > (out ".labels")
            continue
        }
        # a transfer: joins the lane's open run when within a pixel of it
        key = E_pid[k] SUBSEP t
        if ((key in P_x0) && E_x0[k] <= P_x1[key] + px && E_x1[k] >= P_x0[key] - px) {
            if (E_x0[k] < P_x0[key]) P_x0[key] = E_x0[k]
            if (E_x1[k] > P_x1[key]) P_x1[key] = E_x1[k]
            continue
        }
        flush(key)
        P_x0[key] = E_x0[k]; P_x1[key] = E_x1[k]; P_y0[key] = y - h; P_y1[key] = y + h; P_rgb[key] = rgb
    }
    for (key in P_x0) flush(key)
    # legend: passes by kind and chunk (F, its later chunks, B, ...), then
    # the streams in order of appearance
    split("F B W", kinds, " ")
    for (j = 1; j <= 3; j++)
        for (c = 0; c < nchunk; c++) {
            what = kinds[j] (nchunk > 1 ? " chunk " c : "")
            if (what in seen) printf("#%06X \"%s\"\n", color[what], what) > (out ".legend")
        }
    for (i = 1; i <= nseen; i++)
        if (order[i] !~ /^[FBW]( |$)/) printf("#%06X \"%s\"\n", color[order[i]], order[i]) > (out ".legend")
}
