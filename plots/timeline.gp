# timeline.gp - memory over time for one parameter set: requested bytes
# (gray, dashed) and reserved bytes (colored) per allocator against the
# allocator operation index. The gap between them is fragmentation.
#
#   gnuplot -c plots/timeline.gp timeline.csv timeline.png ["title"]
need = "series op requested_bytes reserved_bytes"
script = ARG0; nargs = ARGC; datafile = ARG1; output = ARG2; title_text = ARG3
load system("dirname '".ARG0."'")."/common.gp"

S = distinct("series")
set xlabel "allocator operations (count)"
set ylabel "memory (GiB)"
plot for [i = 1:words(S)] datafile using (strcol("series") eq word(S, i) ? column("op") : NaN):(gib(column("reserved_bytes"))) \
         with lines lc i lw 1.5 title word(S, i)." reserved", \
     for [i = 1:words(S)] datafile using (strcol("series") eq word(S, i) ? column("op") : NaN):(gib(column("requested_bytes"))) \
         with lines lc rgb "#404040" dt 2 title (i == 1 ? "requested" : "")
