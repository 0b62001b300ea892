# pareto.gp: a sweep's step time against peak memory per GPU, one colour per
# tensor-parallel size, with the Pareto front (no other configuration is both
# faster and smaller).
#   gnuplot -e "in='points.dat'; front='front.dat'; out='pareto.png'; tps='1 2 4 8'; hbm=80" plots/pareto.gp
# in: "peak_bytes step_time_s tp" rows (plots/csvcols.awk); front: the same
# columns for the front; hbm (optional): GPU memory in GiB, drawn as a line.
if (!exists("title")) title = "step time vs memory"
set encoding utf8
set terminal pngcairo size 900, 600 font "Sans,10" noenhanced
set output out
set title title
set xlabel "peak memory per GPU (GiB)"
set ylabel "step time (s)"
set offsets 0, 0, graph 0.05, graph 0.05
set grid lc rgb "#dddddd"
set key outside right top
GiB = 2.0**30
fronttitle = exists("hbm") ? sprintf("Pareto front (fits in %g GiB)", hbm) : "Pareto front"
if (exists("hbm")) set arrow from hbm, graph 0 to hbm, graph 1 nohead dt 2 lc rgb "#aa0000"
if (exists("hbm")) set label sprintf("GPU memory %g GiB", hbm) at hbm, graph 0.03 left offset 0.5, 0 tc rgb "#aa0000"
plot for [t in tps] in using ($3 == t + 0 ? $1 / GiB : NaN):2 with points pt 7 ps 0.9 title sprintf("TP %s", t), \
     front using ($1 / GiB):2 with steps lw 2 lc rgb "#222222" notitle, \
     front using ($1 / GiB):2 with points pt 6 ps 1.6 lw 2 lc rgb "#222222" title fronttitle
