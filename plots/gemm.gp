# gemm.gp - GEMM time against the memory budget (gemm-chunked): the median
# with a min-max whisker, one line per series (allocator and other
# parameters). A failed budget is a gap in its line.
#
#   gnuplot -c plots/gemm.gp gemm.csv gemm.png ["title"]
need = "series budget_bytes time_s time_lo time_hi"
script = ARG0; nargs = ARGC; datafile = ARG1; output = ARG2; title_text = ARG3
load system("dirname '".ARG0."'")."/common.gp"

S = distinct("series")
set logscale x 2
set format x "%.0b %BB"
set xlabel "memory budget (bytes, binary units)"
set ylabel "time (seconds)"
set offsets graph 0.03, graph 0.03, 0, 0
plot for [i = 1:words(S)] datafile using (strcol("series") eq word(S, i) ? column("budget_bytes") : NaN):"time_s":"time_lo":"time_hi" \
         with yerrorlines lc i pt 7 ps 0.6 title word(S, i)
