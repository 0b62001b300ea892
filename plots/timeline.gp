# timeline.gp: the pipeline schedule of one step, a Gantt chart per stage and
# stream (tables from plots/trace2gantt.awk).
#   gnuplot -e "in='PREFIX'; out='timeline.png'; title='...'[; t0=MS; t1=MS]" plots/timeline.gp
# in: the PREFIX given to trace2gantt.awk (reads PREFIX.boxes, .labels, .lanes,
# .legend); t0, t1: the window drawn (default the whole step).
if (!exists("title")) title = "pipeline timeline"
if (!exists("width")) width = 1600

stats in.'.lanes' using 1 nooutput
nlanes = STATS_records
ymin = STATS_min
stats in.'.boxes' using 2 nooutput
tmax = exists("t1") ? t1 : STATS_max
tmin = exists("t0") ? t0 : 0

set encoding utf8
set terminal pngcairo size width, 140 + 26 * nlanes font "Sans,10" noenhanced
set output out
set title title
set xlabel "time (ms)"
set xrange [tmin:tmin + (tmax - tmin) * 1.005]
set yrange [ymin - 0.8:0.8]
set ytics nomirror scale 0 font ",9"
set grid xtics lc rgb "#dddddd"
set border 3
set key outside bottom center horizontal samplen 1 width 2
set style fill solid 1.0 border lc rgb "#ffffff"
# a label is drawn when the box is wider than about two digits
minw = (tmax - tmin) * 1200.0 / width / 100.0 * 1.6

# legend entries from PREFIX.legend: "#RRGGBB "name"" per line
legend = system("cat '".in.".legend'")
nlegend = words(legend) / 2

# transfers are drawn at least a pixel wide, or short ones would vanish
px = (tmax - tmin) / (width - 200.0)
halfw(a, b) = (b - a) / 2 > px / 2 ? (b - a) / 2 : px / 2
# passes narrower than 3 pixels lose their white border, or it is all one sees
plot in.'.boxes' using (($1+$2)/2):(($3+$4)/2):(($2-$1)/2):($6 == 0 && $2 - $1 > 3 * px ? ($4-$3)/2 : NaN):5 \
         with boxxyerror lc rgb variable notitle, \
     in.'.boxes' using (($1+$2)/2):(($3+$4)/2):(halfw($1, $2)):($6 == 0 && $2 - $1 <= 3 * px ? ($4-$3)/2 : NaN):5 \
         with boxxyerror fs solid noborder lc rgb variable notitle, \
     in.'.boxes' using (($1+$2)/2):(($3+$4)/2):(halfw($1, $2)):($6 == 1 ? ($4-$3)/2 : NaN):5 \
         with boxxyerror fs solid noborder lc rgb variable notitle, \
     in.'.labels' using 1:2:($3 > minw ? sprintf("%d", $4) : "") \
         with labels font ",7" tc rgb "#ffffff" notitle, \
     in.'.lanes' using (NaN):1:ytic(2) notitle, \
     for [i = 1:nlegend] NaN with boxes fs solid lc rgb word(legend, 2 * i - 1) title word(legend, 2 * i)
