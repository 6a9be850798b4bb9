# frag.gp - fragmentation ratio (1 - peak requested / peak reserved) per
# allocator: the median with a min-max whisker, one point style per series
# (parameter set). A case without a value gets its status written at the
# axis instead of a point (failed, skipped, n/a): never a zero.
#
#   gnuplot -c plots/frag.gp frag.csv frag.png ["title"]
need = "series x allocator status frag_ratio frag_lo frag_hi"
script = ARG0; nargs = ARGC; datafile = ARG1; output = ARG2; title_text = ARG3
load system("dirname '".ARG0."'")."/common.gp"

S = distinct("series")
n = words(S)
set xtics rotate by -35 left
set ylabel "fragmentation ratio (0-1; lower is better)"
set yrange [0:*]
set offsets 0.5, 0.5, 0, 0
set bmargin 8
plot for [i = 1:n] datafile using (strcol("series") eq word(S, i) ? column("x") + (i - (n + 1) / 2.0) * 0.8 / n : NaN):"frag_ratio":"frag_lo":"frag_hi"\
         with yerrorbars lc i pt 7 ps 0.8 title word(S, i), \
     datafile using (column("x")):(0):(strcol("status") eq "ok" || strcol("status") eq "partial" ? "" : strcol("status")):xtic(strcol("allocator")) \
         with labels rotate by 90 left offset 0, 0.5 tc rgb "#c00000" notitle
