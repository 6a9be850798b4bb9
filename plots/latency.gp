# latency.gp - allocation latency per allocator against a size parameter:
# p50 solid, p99 dashed, one line per series (allocator and the scenario's
# other parameters). Log-log.
#
#   gnuplot -c plots/latency.gp latency.csv latency.png ["title"]
need = "series size_bytes alloc_p50_ns alloc_p99_ns"
script = ARG0; nargs = ARGC; datafile = ARG1; output = ARG2; title_text = ARG3
load system("dirname '".ARG0."'")."/common.gp"

S = distinct("series")
set logscale x 2
set logscale y 10
set format x "%.0b %BB"
set xlabel "size parameter (bytes, binary units)"
set ylabel "allocate latency (nanoseconds; p50 solid, p99 dashed)"
set offsets graph 0.03, graph 0.03, 0, 0
plot for [i = 1:words(S)] datafile using (strcol("series") eq word(S, i) ? column("size_bytes") : NaN):"alloc_p50_ns" \
         with linespoints lc i dt 1 pt 7 ps 0.6 title word(S, i), \
     for [i = 1:words(S)] datafile using (strcol("series") eq word(S, i) ? column("size_bytes") : NaN):"alloc_p99_ns" \
         with lines lc i dt 2 notitle
