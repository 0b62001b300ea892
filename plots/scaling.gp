# scaling.gp: throughput per GPU against the GPU count, one curve per series
# (plots/make_plots.sh writes one data block per series).
#   gnuplot -e "in='scaling.dat'; out='scaling.png'; nseries=3" plots/scaling.gp
# in: blocks separated by two blank lines, each "# series" then "gpus tokens/s/GPU".
if (!exists("title")) title = "scaling: tokens/s per GPU vs GPUs"
set encoding utf8
set terminal pngcairo size 900, 600 font "Sans,10" noenhanced
set output out
set title title
set xlabel "GPUs"
set ylabel "tokens/s per GPU"
# GPUs double from point to point; throughput on a linear axis from 0, so a
# 20% loss per GPU looks like one (a log axis flattens it)
set logscale x 2
set yrange [0:*]
set grid lc rgb "#dddddd"
set key outside right top
plot for [i = 0:nseries - 1] in index i using 1:2 with linespoints pt 7 lw 2 title columnheader(1)
