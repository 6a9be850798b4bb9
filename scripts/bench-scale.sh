#!/usr/bin/env bash
# bench-scale.sh - the suite at scale (make bench-scale): a 2-million-event
# PyTorch snapshot converted and replayed under five policies, 10 million
# trace events replayed, what --explain-oom adds to a replay, and the
# report of a 10-million-event replay. The inputs are grown from the
# committed transformer trace by tools/scale_gen.py into a scratch directory
# (removed at the end: several GB, never committed).
#
#   scripts/bench-scale.sh BUILD_DIR OUT_DIR [MACHINE]
#
# Writes OUT_DIR/scale.md (the table: step, events, seconds, peak RSS,
# target), OUT_DIR/logs/ (every command's output) and OUT_DIR/runs/ (the
# result directories). MACHINE names the machine in the table's header
# (default: the host's CPU model and core count). Times are wall-clock
# seconds of the whole command (/usr/bin/time), peak RSS the largest
# resident set of any of its processes. The converter runs under an 8 GiB
# address-space guard (ulimit -v), so a shared machine is not driven into
# swap: a step stopped by it is written as such, not timed.
# Environment: PYTHON (default python3), REPORT_PYTHON (default /usr/bin/python3), CHROMIUM (default: chromium on PATH),
# SCALE_TMP (scratch parent, default $TMPDIR or /tmp).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
cmb_dirs "[MACHINE]" "$@"
root=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python3}
report_py=${REPORT_PYTHON:-/usr/bin/python3} # the report needs matplotlib (Debian's python3-matplotlib)
machine=${3:-"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores"}
src=$root/traces/samples/torch_transformer_sweep.trace
scratch=$(mktemp -d "${SCALE_TMP:-${TMPDIR:-/tmp}}/cmb-scale.XXXXXX") || exit 2
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$out/logs" "$out/runs"
rm -rf "$out/runs/"*
rows=()
n_snap=${SCALE_SNAPSHOT_EVENTS:-2000000} # smaller for a quick check of the script itself
n_big=${SCALE_TRACE_EVENTS:-10000000}

# measure NAME CMD...: runs CMD, sets $secs and $rss_mib, logs to logs/NAME.log; 1 when it failed
measure() {
    local name=$1
    shift
    /usr/bin/time -f "%e %M %U %S" -o "$scratch/$name.time" "$@" >"$out/logs/$name.log" 2>&1
    local rc=$? user sys
    read -r secs kib user sys <"$scratch/$name.time" 2>/dev/null || { secs=?; kib=0; }
    [ "$secs" = "Command" ] && read -r secs kib user sys < <(tail -1 "$scratch/$name.time")
    rss_mib=$((kib / 1024))
    cpu=$("$py" -c "print(round(${user:-0} + ${sys:-0}, 2))" 2>/dev/null || echo ?)
    return $rc
}

row() { rows+=("| $1 | $2 | $3 | $4 | $5 |"); }

metric() { # RUN_DIR METRIC [ALLOCATOR]: the median over repetitions (counts as integers)
    "$py" - "$@" <<'EOF'
import csv, os, statistics, sys
run, metric = sys.argv[1], sys.argv[2]
alloc = sys.argv[3] if len(sys.argv) > 3 else None
v = [float(r["value"]) for r in csv.DictReader(open(os.path.join(run, "results.csv")))
     if r["metric"] == metric and r["repetition"] != "" and (alloc is None or r["allocator"] == alloc)]
m = statistics.median(v) if v else None
print("?" if m is None else f"{m:.0f}" if metric.endswith(("_allocs", "_events")) else f"{m:.3f}")
EOF
}

replay() { # NAME TRACE ALLOCATORS [cumembench args]: measures a replay run into runs/NAME
    local name=$1 trace=$2 allocs=$3
    shift 3
    measure "$name" "$bin" --mode sim --scenario replay --allocator "$allocs" --param trace="$trace" \
        --param find_min_capacity=false --param op_latency=false --out "$out/runs/$name" -q "$@"
}

load_start=$(cut -d' ' -f1-3 /proc/loadavg) # a shared machine: what else ran, for the table
echo "bench-scale: growing the inputs in $scratch" >&2
measure gen_snapshot "$py" "$root/tools/scale_gen.py" snapshot "$src" "$scratch/2m.pickle" --events "$n_snap" ||
    { echo "bench-scale: scale_gen.py snapshot failed: $(tail -2 "$out/logs/gen_snapshot.log")" >&2; exit 1; }
snap_bytes=$(stat -c %s "$scratch/2m.pickle")
row "grow a snapshot (input, not a target)" "$n_snap snapshot events, 24 frames each, $((snap_bytes >> 20)) MiB" \
    "$secs ($cpu)" "$rss_mib" ""
measure gen_trace_10m "$py" "$root/tools/scale_gen.py" trace "$src" "$scratch/10m.trace" --events "$n_big" ||
    { echo "bench-scale: scale_gen.py trace failed" >&2; exit 1; }
measure gen_trace_2m "$py" "$root/tools/scale_gen.py" trace "$src" "$scratch/2m-grown.trace" --events $((n_snap * 2 / 3)) ||
    { echo "bench-scale: scale_gen.py trace failed" >&2; exit 1; }

echo "bench-scale: converting a tenth of it (how the converter scales)" >&2
n_tenth=$((n_snap / 10))
measure gen_snapshot_tenth "$py" "$root/tools/scale_gen.py" snapshot "$src" "$scratch/tenth.pickle" --events "$n_tenth" ||
    exit 1
if measure convert_tenth "$py" "$root/traces/torch_snapshot_to_trace.py" "$scratch/tenth.pickle" "$scratch/tenth.trace"
then
    row "convert a snapshot a tenth as large (how it scales)" "$n_tenth" "$secs ($cpu)" "$rss_mib" ""
fi
rm -f "$scratch/tenth.pickle" "$scratch/tenth.trace"

echo "bench-scale: converting the snapshot" >&2
converted=$scratch/2m.trace
if measure convert bash -c "ulimit -v $((8 << 20)); exec \"$py\" \"$root/traces/torch_snapshot_to_trace.py\" \
        \"$scratch/2m.pickle\" \"$converted\""; then
    convert_s=$secs convert_rss=$rss_mib convert_cpu=$cpu
    row "convert the snapshot (traces/torch_snapshot_to_trace.py)" "$n_snap" "$secs ($cpu)" "$rss_mib" \
        "with the replays: < 60 s, < 4096 MiB"
else
    convert_s=
    row "convert the snapshot (traces/torch_snapshot_to_trace.py)" "$n_snap" \
        "stopped after $secs s by the 8 GiB guard ($(tail -1 "$out/logs/convert.log" | cut -c1-80))" "> 8192" \
        "with the replays: < 60 s, < 4096 MiB: **missed**"
    # the same traffic as a trace: the replays are measured on it
    converted=$scratch/2m-grown.trace
fi
n_conv=$(grep -c '^[afs] ' "$converted")

echo "bench-scale: replaying under five policies" >&2
five=torch-caching,torch-expandable,bfc,rmm-pool,cupy
replay replay5 "$converted" "$five" --repetitions 1
total=${convert_s:+$("$py" -c "print(round($convert_s + $secs, 2))")}
total_cpu=${convert_s:+$("$py" -c "print(round($convert_cpu + $cpu, 2))" 2>/dev/null)}
verdict=${total:+$("$py" -c "print('met' if $total < 60 and max($convert_rss, $rss_mib) < 4096 else '**missed**')")}
row "replay it under $five (one run, 5 cases)" "$n_conv trace events$([ -z "$convert_s" ] && echo \
    ", grown directly (the conversion did not finish)")" "$secs ($cpu)" "$rss_mib" \
    "convert + replay < 60 s$([ -n "$total" ] && echo ": $total s ($total_cpu s CPU)"), < 4096 MiB${verdict:+: $verdict}"

echo "bench-scale: 10 million events" >&2
replay replay10m "$scratch/10m.trace" torch-caching --repetitions 1
r10=$(metric "$out/runs/replay10m" time_s)
row "replay $n_big trace events (torch-caching; process wall)" "$n_big" "$secs ($cpu)" "$rss_mib" \
    "< 10 s (the replay itself, time_s: $r10 s)"

echo "bench-scale: what --explain-oom adds" >&2
replay explain_off "$scratch/10m.trace" torch-caching --repetitions 5 --capacity 11.5GiB
off=$(metric "$out/runs/explain_off" time_s)
replay explain_on "$scratch/10m.trace" torch-caching --repetitions 5 --capacity 11.5GiB --explain-oom
on=$(metric "$out/runs/explain_on" time_s)
fails=$(metric "$out/runs/explain_on" oom_failed_allocs)
added=$("$py" -c "print(f'{100 * ($on - $off) / $off:+.1f}%')" 2>/dev/null || echo "?")
row "replay $n_big events on 11.5 GiB (does not fit: $fails failed), time_s median of 5: without / with --explain-oom" \
    "$n_big" "$off / $on ($added)" "" "explanation adds <= 20%"

echo "bench-scale: the report of a 10-million-event replay" >&2
replay report10m "$scratch/10m.trace" torch-caching --repetitions 1 --timeline on --timeline-points 131072
row "replay $n_big events with the timeline (131072 points) and its segments (up to 512 moments); process wall" "$n_big" \
    "$secs ($cpu)" "$rss_mib" ""
tl_bytes=$(du -cb "$out/runs/report10m"/timelines/*.csv 2>/dev/null | tail -1 | cut -f1)
seg_bytes=$(du -cb "$out/runs/report10m"/timelines/*.segments 2>/dev/null | tail -1 | cut -f1)
measure report "$report_py" "$root/plots/report.py" "$out/runs/report10m" -o "$scratch/report.html" --no-gnuplot \
    --no-findings -q
html_bytes=$(stat -c %s "$scratch/report.html" 2>/dev/null || echo 0)
row "report of the $n_big-event replay (plots/report.py; timeline CSV $((tl_bytes / 1024)) KiB, segments $((seg_bytes / 1024)) KiB; the blocks read from the trace at the moments with segments)" "$n_big" \
    "$secs ($cpu)" "$rss_mib" "HTML $((html_bytes / 1024)) KiB (< 20 MB)"
chrome=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
if [ -n "$chrome" ]; then
    measure chromium timeout 120 "$chrome" --headless --no-sandbox --disable-gpu --no-first-run \
        --user-data-dir="$scratch/profile" --dump-dom "file://$scratch/report.html#tl=0,1,0.5"
    row "open the report in headless Chromium (--dump-dom, browser start included, a click at the middle shown: #tl=0,1,0.5; the timeline's own setup: $(grep -o 'data-ready="[^"]*"' "$out/logs/chromium.log" | head -1 | cut -d'"' -f2))" "$n_big" "$secs ($cpu)" \
        "$rss_mib" "< 3 s"
fi

{
    echo "# Scale benchmark"
    echo
    echo "Machine: $machine. Build: $(cd "$root" && git rev-parse --short HEAD 2>/dev/null || echo ?)," \
        "sim mode. Written by scripts/bench-scale.sh ($(date -u +%Y-%m-%d))."
    echo "Seconds are wall-clock seconds of the whole command, with the CPU seconds (user + system) of its"
    echo "processes in brackets (on a shared machine the wall clock includes waiting for a core); peak RSS"
    echo "(MiB) the largest resident set of any of its processes. Inputs grown from traces/samples/torch_transformer_sweep.trace by tools/scale_gen.py."
    echo "Load average (1, 5, 15 min) when it started: $load_start; when it ended: $(cut -d' ' -f1-3 /proc/loadavg)."
    echo
    echo "| step | events | seconds (CPU) | peak RSS (MiB) | target |"
    echo "|---|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
} >"$out/scale.md"
cat "$out/scale.md"
