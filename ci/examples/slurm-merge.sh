#!/usr/bin/env bash
# slurm-merge.sh - merges the runs of one slurm-suite.sbatch job: the index,
# the by-GPU links and one report with every finished run side by side.
# The job's batch script calls it when its steps end; call it again after
# continuing a job's interrupted runs (CMB_RESUME, docs/cluster.md).
#
#   ci/examples/slurm-merge.sh JOB_DIR
#
# Writes JOB_DIR/index.tsv (slug, node, GPU, status, dir; status is the run's
# exit status, `interrupted` for a run that began and never ended or was
# killed by a signal, `not-started` for one that never began), JOB_DIR/by-gpu/<gpu-slug>/<node>-gpu<N> links to
# the finished runs, and JOB_DIR/report.html (plots/report.py --fleet: nodes,
# GPUs, drivers and CUDA versions side by side, mixed ones flagged, missing
# runs named). CMB_REPORT_ARGS: more report.py options (e.g. --no-gnuplot);
# PYTHON: the report's interpreter (default /usr/bin/python3).
# Exit status: 0 every run of every node ended; 1 runs are missing (named on
# stderr with the command that continues them); 2 JOB_DIR is not a job's.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
python=${PYTHON:-/usr/bin/python3}
if [ $# -ne 1 ]; then
    echo "usage: ci/examples/slurm-merge.sh JOB_DIR" >&2
    exit 2
fi
dest=${1%/}
if [ ! -f "$dest/args" ] || [ ! -d "$dest/runs" ]; then
    echo "slurm-merge: $dest: no args and runs/ there: not a job directory of slurm-suite.sbatch" >&2
    exit 2
fi

# The nodes the job ran on: as it recorded them, else those that left a count.
nodes=()
if [ -f "$dest/nodes" ]; then
    mapfile -t nodes <"$dest/nodes"
else
    for f in "$dest"/runs/*.gpus; do
        [ -f "$f" ] && nodes+=("$(basename "$f" .gpus)")
    done
fi
if [ ${#nodes[@]} -eq 0 ]; then
    echo "slurm-merge: $dest: no nodes recorded (nodes, runs/*.gpus): the job never ran" >&2
    exit 2
fi

finished=() missing=() again=()
index=$dest/index.tsv.tmp
printf 'slug\tnode\tgpu\tstatus\tdir\n' >"$index"
rm -rf "$dest/by-gpu"

# Records one run of a node: its row, its link, or why it is missing.
merge_run() { # NODE GPU
    local node=$1 i=$2 name=$1-gpu$2 run status slug=- how="it began and never ended"
    run=$dest/runs/$name
    if [ -f "$run.status" ]; then
        status=$(cat "$run.status")
    elif [ -f "$run/results.csv" ]; then
        status=interrupted
    else
        status=not-started
    fi
    # killed, with the shell around it still alive to write the status; or
    # a status left half written (by a script older than its atomic write)
    if [[ $status =~ ^[0-9]+$ ]] && ((status > 128)); then
        how="killed by signal $((status - 128))"
        status=interrupted
    elif ! [[ $status =~ ^[0-9]+$|^interrupted$|^not-started$ ]]; then
        how="its status file holds '$status'"
        status=interrupted
    fi
    case $status in
    0 | 1)
        if [ -f "$run/results.json" ]; then
            slug=$("$root/tools/cumembench-compare" --print-slug "$run" 2>/dev/null || echo unknown)
            mkdir -p "$dest/by-gpu/$slug"
            ln -sfn "../../runs/$name" "$dest/by-gpu/$slug/$name"
        fi
        finished+=("$run")
        ;;
    interrupted) missing+=("$name (interrupted: $how)") ;;
    not-started) missing+=("$name (never started)") ;;
    *) missing+=("$name (exit status $status: $run.log)") ;;
    esac
    case $status in 0 | 1) ;; *) again+=("$node") ;; esac
    printf '%s\t%s\t%s\t%s\t%s\n' "$slug" "$node" "$i" "$status" "$run" >>"$index"
}

for node in "${nodes[@]}"; do
    if [ ! -f "$dest/runs/$node.gpus" ]; then
        missing+=("$node (its step never started)")
        again+=("$node")
        printf '%s\t%s\t%s\t%s\t%s\n' - "$node" - not-started - >>"$index"
        continue
    fi
    n=$(cat "$dest/runs/$node.gpus")
    for ((i = 0; i < n; i++)); do merge_run "$node" "$i"; done
done
mv "$index" "$dest/index.tsv"
column -t -s $'\t' "$dest/index.tsv" >&2 || cat "$dest/index.tsv" >&2

if [ ${#finished[@]} -gt 0 ]; then
    # shellcheck disable=SC2086 # CMB_REPORT_ARGS is a list of options
    "$python" "$root/plots/report.py" --quiet --fleet "$dest" -o "$dest/report.html" ${CMB_REPORT_ARGS:-} \
        "${finished[@]}" || echo "slurm-merge: the report could not be made (the runs are in $dest/runs)" >&2
    [ ! -f "$dest/report.html" ] || echo "slurm-merge: report: $dest/report.html (${#finished[@]} runs)" >&2
fi
echo "slurm-merge: results in $dest (index.tsv; by-gpu/<gpu-slug>/ per GPU model)" >&2

if [ ${#missing[@]} -gt 0 ]; then
    list=$(printf '%s\n' "${again[@]}" | LC_ALL=C sort -u | paste -sd, -)
    opts=
    [ ! -f "$dest/sbatch-options" ] || opts=$(paste -sd' ' "$dest/sbatch-options")
    echo "slurm-merge: ${#missing[@]} run(s) missing: $(printf '%s; ' "${missing[@]}")" >&2
    echo "slurm-merge: continue them on their nodes: CMB_RESUME=$dest sbatch --nodes=$(tr ',' '\n' <<<"$list" | wc -l)" \
        "--nodelist=$list ${opts:+$opts }$root/ci/examples/slurm-suite.sbatch" >&2
    exit 1
fi
echo "slurm-merge: to make a run its GPU's baseline: mkdir -p results/<gpu-slug> &&" \
    "cp -r <run> results/<gpu-slug>/baseline && cp $dest/args results/<gpu-slug>/baseline/" >&2
exit 0
