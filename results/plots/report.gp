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
plot 'results/plots/bench_busbw.dat' index 0 using 1:2 with linespoints title 'ps-sync-servers1 P=4', 'results/plots/bench_busbw.dat' index 1 using 1:2 with linespoints title 'ps-sync-servers1 P=8', 'results/plots/bench_busbw.dat' index 2 using 1:2 with linespoints title 'ps-sync-servers1 P=16', 'results/plots/bench_busbw.dat' index 3 using 1:2 with linespoints title 'ps-sync-servers2 P=4', 'results/plots/bench_busbw.dat' index 4 using 1:2 with linespoints title 'ps-sync-servers2 P=8', 'results/plots/bench_busbw.dat' index 5 using 1:2 with linespoints title 'ps-sync-servers2 P=16', 'results/plots/bench_busbw.dat' index 6 using 1:2 with linespoints title 'ps-sync-servers3 P=4', 'results/plots/bench_busbw.dat' index 7 using 1:2 with linespoints title 'ps-sync-servers3 P=8', 'results/plots/bench_busbw.dat' index 8 using 1:2 with linespoints title 'ps-sync-servers3 P=16', 'results/plots/bench_busbw.dat' index 9 using 1:2 with linespoints title 'ps-sync-servers4 P=4', 'results/plots/bench_busbw.dat' index 10 using 1:2 with linespoints title 'ps-sync-servers4 P=8', 'results/plots/bench_busbw.dat' index 11 using 1:2 with linespoints title 'ps-sync-servers4 P=16', 'results/plots/bench_busbw.dat' index 12 using 1:2 with linespoints title 'ps-sync-servers5 P=8'
set terminal svg size 1000,600 dynamic
set output 'results/plots/bench_busbw.svg'
plot 'results/plots/bench_busbw.dat' index 0 using 1:2 with linespoints title 'ps-sync-servers1 P=4', 'results/plots/bench_busbw.dat' index 1 using 1:2 with linespoints title 'ps-sync-servers1 P=8', 'results/plots/bench_busbw.dat' index 2 using 1:2 with linespoints title 'ps-sync-servers1 P=16', 'results/plots/bench_busbw.dat' index 3 using 1:2 with linespoints title 'ps-sync-servers2 P=4', 'results/plots/bench_busbw.dat' index 4 using 1:2 with linespoints title 'ps-sync-servers2 P=8', 'results/plots/bench_busbw.dat' index 5 using 1:2 with linespoints title 'ps-sync-servers2 P=16', 'results/plots/bench_busbw.dat' index 6 using 1:2 with linespoints title 'ps-sync-servers3 P=4', 'results/plots/bench_busbw.dat' index 7 using 1:2 with linespoints title 'ps-sync-servers3 P=8', 'results/plots/bench_busbw.dat' index 8 using 1:2 with linespoints title 'ps-sync-servers3 P=16', 'results/plots/bench_busbw.dat' index 9 using 1:2 with linespoints title 'ps-sync-servers4 P=4', 'results/plots/bench_busbw.dat' index 10 using 1:2 with linespoints title 'ps-sync-servers4 P=8', 'results/plots/bench_busbw.dat' index 11 using 1:2 with linespoints title 'ps-sync-servers4 P=16', 'results/plots/bench_busbw.dat' index 12 using 1:2 with linespoints title 'ps-sync-servers5 P=8'
set output
reset
set title 'traffic matrix ps-sync-servers1 P=16: MiB from sender (row) to receiver (column)'
set xlabel 'receiver rank'
set ylabel 'sender rank'
set grid
set key outside right top
set xrange [-0.5:16.5]
set yrange [16.5:-0.5]
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
set title 'traffic matrix ps-sync-servers2 P=16: MiB from sender (row) to receiver (column)'
set xlabel 'receiver rank'
set ylabel 'sender rank'
set grid
set key outside right top
set xrange [-0.5:17.5]
set yrange [17.5:-0.5]
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
set title 'traffic matrix ps-sync-servers3 P=16: MiB from sender (row) to receiver (column)'
set xlabel 'receiver rank'
set ylabel 'sender rank'
set grid
set key outside right top
set xrange [-0.5:18.5]
set yrange [18.5:-0.5]
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
set title 'traffic matrix ps-sync-servers4 P=16: MiB from sender (row) to receiver (column)'
set xlabel 'receiver rank'
set ylabel 'sender rank'
set grid
set key outside right top
set xrange [-0.5:19.5]
set yrange [19.5:-0.5]
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
reset
set title 'traffic matrix ps-sync-servers5 P=8: MiB from sender (row) to receiver (column)'
set xlabel 'receiver rank'
set ylabel 'sender rank'
set grid
set key outside right top
set xrange [-0.5:12.5]
set yrange [12.5:-0.5]
set xtics 1
set ytics 1
set palette defined (0 'white', 1 'orange', 2 'dark-red')
unset grid
set terminal pngcairo size 1000,600
set output 'results/plots/traffic_4.png'
plot 'results/plots/traffic_4.dat' matrix with image notitle
set terminal svg size 1000,600 dynamic
set output 'results/plots/traffic_4.svg'
plot 'results/plots/traffic_4.dat' matrix with image notitle
set output
