# tune.gp - cumembench tune's Pareto front (docs/tune.md): each front member's
# smallest GPU against its predicted allocator time per pass, the recorded
# setting and the recommendation marked, the budget as a line.
#
#   gnuplot -c plots/tune.gp front.tsv front.png [BUDGET_GIB] ["title"]
#
# front.tsv: a header, then one line per setting, tab-separated:
#   role (front|recorded|recommended)  gib  ms  label
datafile = ARG1; output = ARG2; budget = (ARGC >= 3 && ARG3 ne "") ? real(ARG3) : 0
title_text = ARGC >= 4 ? ARG4 : "cumembench tune: the Pareto front"
set terminal pngcairo size 1000, 620 font ",10" noenhanced
set output output
set datafile separator "\t"
set title title_text
set xlabel "smallest GPU it fits on (GiB; lower is better)"
set ylabel "predicted allocator time per pass (ms, log; lower is better)"
set logscale y
set grid
set key top right
set offsets graph 0.05, graph 0.4, graph 0.1, graph 0.1
if (budget > 0) set arrow from budget, graph 0 to budget, graph 1 nohead dt 2 lc rgb "#808080"; \
    set label "budget" at budget, graph 0.97 right offset -0.5, 0 tc rgb "#808080"
plot datafile using (strcol(1) eq "front" ? $2 : NaN):3 every ::1 with linespoints pt 7 lc rgb "#1f77b4" title "front", \
     datafile using (strcol(1) eq "recommended" ? $2 : NaN):3 every ::1 with points pt 9 ps 2.2 lc rgb "#2ca02c" title "recommended", \
     datafile using (strcol(1) eq "recorded" ? $2 : NaN):3 every ::1 with points pt 5 ps 1.8 lc rgb "#d62728" title "recorded setting", \
     datafile using 2:3:4 every ::1 with labels left offset 1, 0 font ",8" notitle
