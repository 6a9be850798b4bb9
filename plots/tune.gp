# tune.gp - cumembench tune's Pareto front (docs/tune.md): each front member's
# smallest GPU against its predicted allocator time per pass, the recorded
# setting and the recommendation marked, the budget as a line.
#
#   gnuplot -c plots/tune.gp front.csv front.png ["title"] [BUDGET_GIB]
#
# front.csv (plots/tune_front.py writes it from tune --json): a header, then
# one row per point: role (front|recorded|recommended), gib, ms, label.
need = "role gib ms label"
script = ARG0; nargs = ARGC; datafile = ARG1; output = ARG2; title_text = ARG3
budget = (ARGC >= 4 && ARG4 ne "") ? real(ARG4) : 0
load system("dirname '".ARG0."'")."/common.gp"

set xlabel "smallest GPU it fits on (GiB; lower is better)"
set ylabel "predicted allocator time per pass (ms, log; lower is better)"
set logscale y
set key inside top right
set offsets graph 0.05, graph 0.4, graph 0.1, graph 0.1
if (budget > 0) set arrow from budget, graph 0 to budget, graph 1 nohead dt 2 lc rgb "#808080"; \
    set label "budget" at budget, graph 0.97 right offset -0.5, 0 tc rgb "#808080"
plot datafile using (strcol("role") eq "front" ? column("gib") : NaN):"ms" with linespoints pt 7 lc rgb "#1f77b4" title "front", \
     datafile using (strcol("role") eq "recommended" ? column("gib") : NaN):"ms" with points pt 9 ps 2.2 lc rgb "#2ca02c" title "recommended", \
     datafile using (strcol("role") eq "recorded" ? column("gib") : NaN):"ms" with points pt 5 ps 1.8 lc rgb "#d62728" title "recorded setting", \
     datafile using "gib":"ms":"label" with labels left offset 1, 0 font ",8" noenhanced notitle
