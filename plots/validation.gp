# validation.gp: predicted against measured values of the validation set
# (parsim validate --out), one point style per metric, with the ideal line
# and the ±10% and ±25% bands.
#   gnuplot -e "in='validation.dat'; out='validation.png'; metrics='step_time_s tokens_per_s_per_gpu'" plots/validation.gp
# in: "metric_name metric_value predicted_value" rows (plots/csvcols.awk).
if (!exists("title")) title = "validation: predicted vs measured"
set encoding utf8
set terminal pngcairo size 800, 720 font "Sans,10" noenhanced
set output out
set title title
set xlabel "measured"
set ylabel "predicted by parsim"
set logscale xy
set grid lc rgb "#dddddd"
set key top left box opaque
set size ratio -1
stats in using 2:3 nooutput
lo = (STATS_min_x < STATS_min_y ? STATS_min_x : STATS_min_y) / 1.5
hi = (STATS_max_x > STATS_max_y ? STATS_max_x : STATS_max_y) * 1.5
set xrange [lo:hi]
set yrange [lo:hi]
set samples 2
plot x with lines lc rgb "#222222" title "predicted = measured", \
     1.1 * x with lines dt 2 lc rgb "#888888" title "±10%", 0.9 * x with lines dt 2 lc rgb "#888888" notitle, \
     1.25 * x with lines dt 3 lc rgb "#bbbbbb" title "±25%", 0.75 * x with lines dt 3 lc rgb "#bbbbbb" notitle, \
     for [m in metrics] in using (strcol(1) eq m ? $2 : NaN):3 with points pt 7 ps 0.8 title m
