# trace2gantt.awk: turns a parsim Chrome trace (parsim run --trace FILE.json)
# into tables for plots/timeline.gp, a Gantt chart per pipeline stage and
# stream like the schedule figures of the Megatron papers.
#
#   awk -f plots/trace2gantt.awk -v out=PREFIX trace.json
#
# writes
#   PREFIX.boxes   x0_ms x1_ms y0 y1 rgb kind  one box per pass (kind 0) or
#                                              transfer (kind 1)
#   PREFIX.labels  x_ms y width_ms text         microbatch numbers of F/B/W boxes
#   PREFIX.lanes   y "name"                     one line per stage and stream
#   PREFIX.legend  rgb "name"                   the kinds of box present
#
# Lanes: per stage, the compute stream (F, B, W passes and the optimizer;
# the individual kernels inside a pass are left out) and every
# communication stream that carries anything in the trace (tp, cp, ep, dp,
# pp), stage 0 at the top.  Colours: forward blue, backward green, weight
# gradient red, a lighter shade for each further model chunk (interleaved
# schedules), communication by stream.  Microbatches are numbered from 1,
# as in the papers' figures.  Needs only POSIX awk; reads the whole trace
# into memory (about the trace's size).

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
function shade(rgb, chunk,    r, g, b, t) {
    # mix towards white: chunk 0 as is, each further chunk 35% lighter
    t = 1 - 0.65 ^ (chunk % 3)
    r = int(rgb / 65536); g = int(rgb / 256) % 256; b = rgb % 256
    r = int(r + (255 - r) * t); g = int(g + (255 - g) * t); b = int(b + (255 - b) * t)
    return r * 65536 + g * 256 + b
}

{ buf = buf $0 " " }

END {
    base["F"] = 4813488      # 0x4972B0
    base["B"] = 5613672      # 0x55A868
    base["W"] = 12865106     # 0xC44E52
    base["optimizer"] = 9211020
    comm["tp"] = 14517330    # 0xDD8452
    comm["cp"] = 8483507     # 0x8172B3
    comm["ep"] = 9664608     # 0x937860
    comm["dp"] = 14322627    # 0xDA8BC3
    comm["pp"] = 6579300     # 0x646464

    n = split(buf, ev, /"ph" *:/)
    nstage = 0
    for (i = 2; i <= n; i++) {
        e = ev[i]
        ph = substr(e, index(e, "\"") + 1, 1)
        pid = num(e, "pid"); tid = num(e, "tid")
        if (ph == "M") {
            if (str(e, "name") == "thread_name") {
                # args: {"name":"tp"} is the second "name" in the event
                a = e; sub(/.*"args" *: *\{/, "", a)
                tname[tid] = str(a, "name")
            }
            continue
        }
        if (ph != "X") continue
        if (pid + 1 > nstage) nstage = pid + 1
        name = str(e, "name")
        ts = num(e, "ts") / 1000; dur = num(e, "dur") / 1000
        mb = num(e, "microbatch"); ch = num(e, "chunk")
        k = ++nev
        E_pid[k] = pid; E_tid[k] = tid; E_name[k] = name
        E_x0[k] = ts; E_x1[k] = ts + dur; E_mb[k] = mb; E_ch[k] = ch
        used[tid] = 1
    }
    # lanes: compute first, then the streams that carry something, by tid
    nl = 0
    for (t = 0; t < 64; t++)
        if ((t in used) && (tname[t] == "compute" || !(t in tname) && t == 0)) lane[t] = nl++
    for (t = 0; t < 64; t++)
        if ((t in used) && !(t in lane)) lane[t] = nl++
    pitch = nl + 0.6
    for (s = 0; s < nstage; s++)
        for (t in lane) {
            nm = (t in tname) ? tname[t] : "stream " t
            y = -(s * pitch + lane[t])
            printf("%s \"%s\"\n", y, lane[t] == 0 ? "stage " s " " nm : nm) > (out ".lanes")
        }
    for (k = 1; k <= nev; k++) {
        t = E_tid[k]; nm = E_name[k]
        compute = (t in tname) ? tname[t] == "compute" : t == 0
        if (compute && !(nm in base) && E_mb[k] != "") continue  # kernels inside a pass
        y = -(E_pid[k] * pitch + lane[t])
        h = compute ? 0.42 : 0.25
        chunk = E_ch[k] == "" ? 0 : E_ch[k]
        if (compute) {
            rgb = (nm in base) ? shade(base[nm], chunk) : 10066329
            what = (nm in base) ? nm (chunk > 0 ? " chunk " chunk + 1 : "") : "other"
        } else {
            rgb = (tname[t] in comm) ? comm[tname[t]] : 10066329
            what = tname[t]
        }
        if (!(what in seen)) {
            seen[what] = 1
            order[++nseen] = what
            color[what] = rgb
        }
        printf("%.6f %.6f %.3f %.3f %d %d\n", E_x0[k], E_x1[k], y - h, y + h, rgb, compute ? 0 : 1) > (out ".boxes")
        if (compute && (nm == "F" || nm == "B" || nm == "W") && E_mb[k] != "")
            printf("%.6f %.3f %.6f %d\n", (E_x0[k] + E_x1[k]) / 2, y, E_x1[k] - E_x0[k], E_mb[k] + 1) > (out ".labels")
    }
    # legend: passes by kind and chunk (F, its later chunks, B, ...), then
    # the streams in order of appearance
    split("F B W", kinds, " ")
    for (j = 1; j <= 3; j++)
        for (c = 1; c <= 64; c++) {
            what = kinds[j] (c > 1 ? " chunk " c : "")
            if (what in seen) printf("#%06X \"%s\"\n", color[what], what) > (out ".legend")
        }
    for (i = 1; i <= nseen; i++)
        if (order[i] !~ /^[FBW]/) printf("#%06X \"%s\"\n", color[order[i]], order[i]) > (out ".legend")
}
