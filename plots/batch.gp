# batch.gp - the largest batch that fits, per allocator (batch-sweep): the
# median with a min-max whisker, one box per series. Failed or skipped cases
# get their status written at the axis instead of a box.
#
#   gnuplot -c plots/batch.gp batch.csv batch.png ["title"]
need = "series x allocator status largest_batch lo hi"
script = ARG0; nargs = ARGC; datafile = ARG1; output = ARG2; title_text = ARG3
load system("dirname '".ARG0."'")."/common.gp"

S = distinct("series")
n = words(S)
w = 0.8 / n
set style fill solid 0.7 border -1
set boxwidth w
set xtics rotate by -35 left
set ylabel "largest batch that fits (samples; higher is better)"
set yrange [0:*]
set offsets 0.5, 0.5, 0, 0
set bmargin 8
plot for [i = 1:n] datafile using (strcol("series") eq word(S, i) ? column("x") + (i - (n + 1) / 2.0) * w : NaN):"largest_batch"\
         with boxes lc i title word(S, i), \
     for [i = 1:n] datafile using (strcol("series") eq word(S, i) ? column("x") + (i - (n + 1) / 2.0) * w : NaN):"largest_batch":"lo":"hi" \
         with yerrorbars lc rgb "black" pt -1 notitle, \
     datafile using (column("x")):(0):(strcol("status") eq "ok" || strcol("status") eq "partial" ? "" : strcol("status")):xtic(strcol("allocator")) \
         with labels rotate by 90 left offset 0, 0.5 tc rgb "#c00000" notitle
