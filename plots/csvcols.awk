# csvcols.awk: picks columns of a CSV file by header name and prints them as a
# whitespace-separated table that gnuplot reads without CSV quirks.
#
#   awk -f plots/csvcols.awk -v cols="peak_bytes,step_time_s,tp" sweep.csv
#
# Parses RFC 4180 quoting (parsim's sweep, search and validate outputs quote
# cells that hold commas, e.g. error messages and list values).  Rows where a
# chosen column is empty (a sweep's invalid configurations, validation rows
# that were skipped) are left out.  Spaces inside a value become '_' so each
# value stays one gnuplot column.  The first output line is "# name ...".
# A missing column name is an error (exit 2).  POSIX awk (mawk, gawk).

function csvsplit(s, f,    n, i, c, q, cur, len) {
    if (index(s, "\"") == 0)
        return split(s, f, ",")
    n = 0; cur = ""; q = 0; len = length(s)
    for (i = 1; i <= len; i++) {
        c = substr(s, i, 1)
        if (q) {
            if (c == "\"") {
                if (substr(s, i + 1, 1) == "\"") { cur = cur "\""; i++ }
                else q = 0
            } else cur = cur c
        } else if (c == "\"") q = 1
        else if (c == ",") { f[++n] = cur; cur = "" }
        else cur = cur c
    }
    f[++n] = cur
    return n
}

BEGIN { nwant = split(cols, want, ",") }

{ sub(/\r$/, "") }

NR == 1 {
    n = csvsplit($0, h)
    for (i = 1; i <= n; i++) pos[h[i]] = i
    line = "#"
    for (k = 1; k <= nwant; k++) {
        if (!(want[k] in pos)) {
            printf("csvcols.awk: %s: no column '%s'\n", FILENAME, want[k]) > "/dev/stderr"
            bad = 1; exit 2
        }
        line = line " " want[k]
    }
    print line
    next
}

{
    n = csvsplit($0, f)
    line = ""
    for (k = 1; k <= nwant; k++) {
        v = f[pos[want[k]]]
        if (v == "") next
        gsub(/[ \t]/, "_", v)
        line = line (k > 1 ? " " : "") v
    }
    print line
}

END { if (bad) exit 2 }
