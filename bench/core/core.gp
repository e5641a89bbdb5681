# SPDX-License-Identifier: GPL-2.0
# Plots of the core benchmark: gnuplot -e "dir='OUT'" core.gp
if (!exists("dir")) dir = "."
set terminal pngcairo size 1500,480 font ",10"
set output dir."/core.png"
set termoption noenhanced
set multiplot layout 1,3 title "Enqueue+dequeue cost per packet, userspace build of sch_mercury.c (median)"
set logscale x
set ylabel "ns per packet"
set grid
set key top left
set style data linespoints

set title "vs queued packets (1024 levels, 64 flows)"
set xlabel "packets queued"
set logscale y
plot dir."/core-queued.dat" using 1:2 title "mercury", \
     "" using 1:3 title "mercury, flow order off", \
     "" using 1:4 title "binary heap", \
     "" using 1:5 title "red-black tree", \
     "" using 1:7 title "mercury, 65534 levels, 4096 flows" dashtype 2, \
     "" using 1:8 title "same, 16 of the levels in use" dashtype 3

unset logscale y
set title "vs levels (10000 queued, 64 flows)"
set xlabel "levels"
plot dir."/core-levels.dat" using 1:2 title "mercury", \
     "" using 1:3 title "mercury, flow order off", \
     "" using 1:4 title "binary heap", \
     "" using 1:5 title "red-black tree", \
     "" using 1:6 title "mercury, 16 of the levels in use" dashtype 2

set title "vs flows (1024 levels, 10000 queued)"
set xlabel "flows"
plot dir."/core-flows.dat" using 1:2 title "mercury", \
     "" using 1:3 title "mercury, flow order off"
unset multiplot
