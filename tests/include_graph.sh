#!/bin/sh
# The modules under sim/ include each other without a cycle.
#
# A module is a file pair sim/NAME.{c,h}; the files inside workload
# (wl_*.c, wl_build.h, wl_fsdp.{c,h}) count as workload, those inside
# search (search_*.{c,h}: its space, bound, rank and print, which include
# search.h for its types) as search, and those inside step (step_internal.h,
# step_measure.{c,h}, step_direct.{c,h}: its shared state, its measurement
# and its walk without a graph) as step, as
# sim/README.md's module map says.  Module A depends on B when A's .c or .h includes
# "B.h".  Every set of modules that reach each other (a strongly connected
# component of more than one module) is printed; the run fails (status 1)
# on any such set not listed in KNOWN below, and on a KNOWN set that is no
# longer a cycle (so the list only shrinks).
#
# KNOWN: cycles outside the input side, each one line of its modules in
# sorted order, separated by spaces (none left).
#
# Usage: tests/include_graph.sh [SIM_DIR]   (default: sim/ beside tests/)
KNOWN=''

dir=${1:-$(dirname "$0")/../sim}
[ -d "$dir" ] || { echo "include_graph: no folder $dir" >&2; exit 2; }

module_of() {
    case $1 in
    wl_*) echo workload ;;
    search_*) echo search ;;
    step_internal | step_measure | step_direct) echo step ;;
    *) echo "$1" ;;
    esac
}

edges=$(
    for f in "$dir"/*.c "$dir"/*.h; do
        b=$(basename "$f")
        m=$(module_of "${b%.*}")
        sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)\.h".*/\1/p' "$f" |
            while read -r d; do
                [ -f "$dir/$d.h" ] || continue
                d=$(module_of "$d")
                [ "$d" = "$m" ] || echo "$m $d"
            done
    done | sort -u
)
[ -n "$edges" ] || { echo "include_graph: no includes found under $dir" >&2; exit 2; }

# Reachability by closure (a few dozen modules), then the components:
# modules that reach each other, one line each, members sorted.
cycles=$(echo "$edges" | awk '
    { if (!($1 in id)) { id[$1] = n; name[n++] = $1 }
      if (!($2 in id)) { id[$2] = n; name[n++] = $2 }
      r[id[$1], id[$2]] = 1 }
    END {
        for (k = 0; k < n; k++)
            for (i = 0; i < n; i++)
                if ((i, k) in r)
                    for (j = 0; j < n; j++)
                        if ((k, j) in r)
                            r[i, j] = 1
        for (i = 0; i < n; i++) {
            if (i in done)
                continue
            line = ""
            for (j = 0; j < n; j++)
                if (j == i || (((i, j) in r) && ((j, i) in r))) {
                    if (j != i)
                        done[j] = 1
                    line = line " " name[j]
                }
            if (line != " " name[i])
                print substr(line, 2)
        }
    }' | while read -r line; do echo "$line" | tr ' ' '\n' | sort | tr '\n' ' ' | sed 's/ $//'; echo; done | sort)

status=0
echo "$cycles" | while read -r c; do
    [ -n "$c" ] || continue
    if echo "$KNOWN" | grep -qxF "$c"; then
        echo "include_graph: known cycle: $c"
    else
        echo "include_graph: cycle among sim/ modules: $c"
    fi
done
new=$(echo "$cycles" | grep -vxF "$KNOWN" | grep -v '^$')
if [ -n "$new" ]; then
    echo "include_graph: FAIL: a new cycle (break it: one of the modules must not include the other)"
    status=1
fi
gone=$(echo "$KNOWN" | grep -vxF "$cycles")
if [ -n "$gone" ]; then
    echo "include_graph: FAIL: no longer a cycle, remove it from KNOWN: $gone"
    status=1
fi
[ $status -eq 0 ] && echo "include_graph: no cycle among sim/ modules but the known ones"
exit $status
