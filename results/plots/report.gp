# report.gp: written by harness report; run `gnuplot report.gp` in any folder
reset
set title 'allreduce bus bandwidth'
set xlabel 'message size (bytes)'
set ylabel 'busbw (GB/s)'
set grid
set key outside right top
set logscale x 2
set format x '%.0b%BB'
set terminal pngcairo size 1000,600
set output 'results/plots/bench_busbw.png'
plot 'results/plots/bench_busbw.dat' index 0 using 1:2 with linespoints title 'ps-sync-colocated P=2', 'results/plots/bench_busbw.dat' index 1 using 1:2 with linespoints title 'ps-sync-colocated P=4', 'results/plots/bench_busbw.dat' index 2 using 1:2 with linespoints title 'ps-sync-colocated P=8', 'results/plots/bench_busbw.dat' index 3 using 1:2 with linespoints title 'ps-sync-servers1 P=2', 'results/plots/bench_busbw.dat' index 4 using 1:2 with linespoints title 'ps-sync-servers1 P=4', 'results/plots/bench_busbw.dat' index 5 using 1:2 with linespoints title 'ps-sync-servers1 P=8', 'results/plots/bench_busbw.dat' index 6 using 1:2 with linespoints title 'ring P=2', 'results/plots/bench_busbw.dat' index 7 using 1:2 with linespoints title 'ring P=4', 'results/plots/bench_busbw.dat' index 8 using 1:2 with linespoints title 'ring P=8', 'results/plots/bench_busbw.dat' index 9 using 1:2 with linespoints title 'tree P=2', 'results/plots/bench_busbw.dat' index 10 using 1:2 with linespoints title 'tree P=4', 'results/plots/bench_busbw.dat' index 11 using 1:2 with linespoints title 'tree P=8'
set terminal svg size 1000,600 dynamic
set output 'results/plots/bench_busbw.svg'
plot 'results/plots/bench_busbw.dat' index 0 using 1:2 with linespoints title 'ps-sync-colocated P=2', 'results/plots/bench_busbw.dat' index 1 using 1:2 with linespoints title 'ps-sync-colocated P=4', 'results/plots/bench_busbw.dat' index 2 using 1:2 with linespoints title 'ps-sync-colocated P=8', 'results/plots/bench_busbw.dat' index 3 using 1:2 with linespoints title 'ps-sync-servers1 P=2', 'results/plots/bench_busbw.dat' index 4 using 1:2 with linespoints title 'ps-sync-servers1 P=4', 'results/plots/bench_busbw.dat' index 5 using 1:2 with linespoints title 'ps-sync-servers1 P=8', 'results/plots/bench_busbw.dat' index 6 using 1:2 with linespoints title 'ring P=2', 'results/plots/bench_busbw.dat' index 7 using 1:2 with linespoints title 'ring P=4', 'results/plots/bench_busbw.dat' index 8 using 1:2 with linespoints title 'ring P=8', 'results/plots/bench_busbw.dat' index 9 using 1:2 with linespoints title 'tree P=2', 'results/plots/bench_busbw.dat' index 10 using 1:2 with linespoints title 'tree P=4', 'results/plots/bench_busbw.dat' index 11 using 1:2 with linespoints title 'tree P=8'
set output
reset
set title 'traffic matrix ps-sync-colocated P=8: MiB from sender (row) to receiver (column)'
set xlabel 'receiver rank'
set ylabel 'sender rank'
set grid
set key outside right top
set xrange [-0.5:7.5]
set yrange [7.5:-0.5]
set xtics 1
set ytics 1
set palette defined (0 'white', 1 'orange', 2 'dark-red')
unset grid
set terminal pngcairo size 1000,600
set output 'results/plots/traffic_0.png'
plot 'results/plots/traffic_0.dat' matrix with image notitle
set terminal svg size 1000,600 dynamic
set output 'results/plots/traffic_0.svg'
plot 'results/plots/traffic_0.dat' matrix with image notitle
set output
reset
set title 'traffic matrix ps-sync-servers1 P=8: MiB from sender (row) to receiver (column)'
set xlabel 'receiver rank'
set ylabel 'sender rank'
set grid
set key outside right top
set xrange [-0.5:8.5]
set yrange [8.5:-0.5]
set xtics 1
set ytics 1
set palette defined (0 'white', 1 'orange', 2 'dark-red')
unset grid
set terminal pngcairo size 1000,600
set output 'results/plots/traffic_1.png'
plot 'results/plots/traffic_1.dat' matrix with image notitle
set terminal svg size 1000,600 dynamic
set output 'results/plots/traffic_1.svg'
plot 'results/plots/traffic_1.dat' matrix with image notitle
set output
reset
set title 'traffic matrix ring P=8: MiB from sender (row) to receiver (column)'
set xlabel 'receiver rank'
set ylabel 'sender rank'
set grid
set key outside right top
set xrange [-0.5:7.5]
set yrange [7.5:-0.5]
set xtics 1
set ytics 1
set palette defined (0 'white', 1 'orange', 2 'dark-red')
unset grid
set terminal pngcairo size 1000,600
set output 'results/plots/traffic_2.png'
plot 'results/plots/traffic_2.dat' matrix with image notitle
set terminal svg size 1000,600 dynamic
set output 'results/plots/traffic_2.svg'
plot 'results/plots/traffic_2.dat' matrix with image notitle
set output
reset
set title 'traffic matrix tree P=8: MiB from sender (row) to receiver (column)'
set xlabel 'receiver rank'
set ylabel 'sender rank'
set grid
set key outside right top
set xrange [-0.5:7.5]
set yrange [7.5:-0.5]
set xtics 1
set ytics 1
set palette defined (0 'white', 1 'orange', 2 'dark-red')
unset grid
set terminal pngcairo size 1000,600
set output 'results/plots/traffic_3.png'
plot 'results/plots/traffic_3.dat' matrix with image notitle
set terminal svg size 1000,600 dynamic
set output 'results/plots/traffic_3.svg'
plot 'results/plots/traffic_3.dat' matrix with image notitle
set output
