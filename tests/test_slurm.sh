#!/usr/bin/env bash
# test_slurm.sh - ci/examples/slurm-suite.sbatch under a real Slurm, on this
# one machine: munged, slurmctld and three slurmd (nodes n1, n2, n3, each on
# its own port of 127.0.0.1, each with two stand-in GPUs so that Slurm sets
# CUDA_VISIBLE_DEVICES) in a private directory with their own slurm.conf.
#
#   tests/test_slurm.sh [BUILD_DIR]          (default: build)
#
# 1. submits the real sbatch (sim mode, churn and replay) on the three nodes;
# 2. while the runs are under way, cancels n2's job step and takes n3 down:
#    n1's runs finish whole, the merge exits 1 naming n2's and n3's runs as
#    interrupted with the command that continues them, the report says so,
#    and no process of the job outlives it;
# 3. brings n3 back and submits that command (CMB_RESUME, --nodelist=n2,n3):
#    the four runs continue with --resume (their finished cases kept, every
#    case once), n1's files are untouched, and the merged report has all six
#    runs side by side.
# Every daemon it started is stopped and its directory removed, whatever the
# outcome. Installs Debian's slurm-wlm and munge where they are missing (as
# root). Where Slurm cannot be installed or run it skips (exit 77) with the
# reason, unless CMB_SLURM_REQUIRED=1 (CI), where that is a failure.
# CMB_SLURM_KEEP=1 keeps the directory (logs, results) for a look afterwards.
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src/build}" 2>/dev/null && pwd) || build=${1:-$src/build}
bin=$build/cumembench
required=${CMB_SLURM_REQUIRED:-0}
python=${PYTHON:-/usr/bin/python3}
start=$SECONDS
tmp=
daemons=()
NODES=(n1 n2 n3)
GPUS=2 # stand-in GPUs per node
# Short runs (a few seconds each) that are still cut in the middle; four
# allocators keep the report's figures few.
ARGS=(--scenario "churn,replay" --allocator "cuda,torch-caching,rmm-pool,bfc" --repetitions 5 --seed 42)

say() { echo "test_slurm: $* (at $((SECONDS - start)) s)" >&2; }

skip() {
    if [ "$required" = 1 ]; then
        echo "test_slurm: FAIL: $* (CMB_SLURM_REQUIRED=1: Slurm must run here)" >&2
        exit 1
    fi
    echo "test_slurm: SKIP: $*" >&2
    exit 77
}

fail() {
    echo "test_slurm: FAIL: $*" >&2
    if [ -n "$tmp" ]; then
        for f in "$tmp"/job-*.out "$tmp"/log/*.log; do
            [ -f "$f" ] && { echo "--- $f (last 25 lines)" >&2; tail -n 25 "$f" >&2; }
        done
    fi
    exit 1
}

[ -x "$bin" ] || fail "$bin is not built (make build)"

# --- Slurm and munge ----------------------------------------------------------------------

install_slurm() {
    local cmds=(slurmctld slurmd slurmstepd sbatch srun squeue scancel scontrol sinfo munged) c missing=()
    for c in "${cmds[@]}"; do command -v "$c" >/dev/null || missing+=("$c"); done
    [ ${#missing[@]} -eq 0 ] && return 0
    [ "$(id -u)" = 0 ] || skip "${missing[*]} missing, and installing slurm-wlm and munge needs root"
    command -v apt-get >/dev/null || skip "${missing[*]} missing, and no apt-get to install slurm-wlm and munge"
    say "installing slurm-wlm and munge (missing: ${missing[*]})"
    local apt=(apt-get -o DPkg::Lock::Timeout=300 -y -q --no-install-recommends)
    if ! DEBIAN_FRONTEND=noninteractive "${apt[@]}" install slurm-wlm munge >"${TMPDIR:-/tmp}/test_slurm-apt.log" 2>&1; then
        apt-get -o DPkg::Lock::Timeout=300 -q update >/dev/null 2>&1 || true
        DEBIAN_FRONTEND=noninteractive "${apt[@]}" install slurm-wlm munge >"${TMPDIR:-/tmp}/test_slurm-apt.log" 2>&1 ||
            skip "apt-get could not install slurm-wlm and munge (${TMPDIR:-/tmp}/test_slurm-apt.log)"
    fi
    for c in "${cmds[@]}"; do command -v "$c" >/dev/null || skip "slurm-wlm and munge installed, but no $c"; done
}

# A listening TCP port of this machine (hex, as /proc/net/tcp writes it)?
port_used() {
    local hex
    hex=$(printf '%04X' "$1")
    awk -v p=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == p { found = 1 } END { exit !found }' \
        /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# Four free ports in a row, somewhere in 20000-59999: the controller's and one per node.
pick_ports() {
    local tries base p ok
    for ((tries = 0; tries < 10; tries++)); do
        base=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
        ok=1
        for ((p = base; p < base + 4; p++)); do port_used "$p" && ok=0; done
        [ $ok = 1 ] && { echo "$base"; return 0; }
    done
    fail "no four free TCP ports found"
}

write_config() { # BASE_PORT
    local port=$1 host i node
    host=$(hostname -s)
    mkdir -p "$tmp"/{munge,state,spool,log,run,dev}
    chmod 755 "$tmp" "$tmp/munge"
    # Stand-in GPUs: gres needs character devices; Slurm only stats them here (no cgroup).
    ln -s /dev/null "$tmp/dev/gpu0"
    ln -s /dev/zero "$tmp/dev/gpu1"
    cat >"$tmp/slurm.conf" <<EOF
# cumembench's tests/test_slurm.sh: a private cluster on 127.0.0.1
ClusterName=cmbtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$tmp/munge/munge.socket
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool/%n
SlurmctldPidFile=$tmp/run/slurmctld.pid
SlurmdPidFile=$tmp/run/slurmd-%n.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd-%n.log
# containers: no cgroups; processes tracked through their parents
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
MailProg=/bin/true
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# the nodes share this machine's $(nproc) CPUs: take the configured counts as they are
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=5
MinJobAge=600
GresTypes=gpu
EOF
    i=1
    for node in "${NODES[@]}"; do
        echo "NodeName=$node NodeHostname=$host NodeAddr=127.0.0.1 Port=$((port + i)) CPUs=$(nproc) Gres=gpu:$GPUS State=UNKNOWN" \
            >>"$tmp/slurm.conf"
        i=$((i + 1))
        mkdir -p "$tmp/spool/$node"
    done
    echo "PartitionName=cmb Nodes=$(IFS=,; echo "${NODES[*]}") Default=YES MaxTime=INFINITE State=UP" >>"$tmp/slurm.conf"
    echo "Name=gpu File=$tmp/dev/gpu[0-1]" >"$tmp/gres.conf"
}

# The Slurm commands against this cluster only.
sl() { SLURM_CONF=$tmp/slurm.conf "$@"; }

start_daemons() {
    dd if=/dev/urandom of="$tmp/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$tmp/munge/munge.key"
    munged -F -f --key-file="$tmp/munge/munge.key" --socket="$tmp/munge/munge.socket" \
        --pid-file="$tmp/run/munged.pid" --log-file="$tmp/log/munged.log" --seed-file="$tmp/munge/seed" \
        >"$tmp/log/munged.out" 2>&1 &
    daemons+=($!)
    wait_for 10 "munged" test -S "$tmp/munge/munge.socket"
    # (not through sl: $! must be the daemon itself, not a subshell)
    SLURM_CONF=$tmp/slurm.conf slurmctld -D -c >"$tmp/log/slurmctld.out" 2>&1 &
    daemons+=($!)
    wait_for 30 "slurmctld" sl scontrol ping
    local node
    for node in "${NODES[@]}"; do
        SLURM_CONF=$tmp/slurm.conf slurmd -D -N "$node" >"$tmp/log/slurmd-$node.out" 2>&1 &
        daemons+=($!)
    done
    wait_for 60 "three idle nodes" nodes_idle
}

nodes_idle() { [ "$(sl sinfo -h -N -o '%N %T' | awk '$2 == "idle"' | sort -u | wc -l)" = "${#NODES[@]}" ]; }

wait_for() { # SECONDS WHAT COMMAND...
    local limit=$1 what=$2 t
    shift 2
    for ((t = 0; t < limit * 5; t++)); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    fail "$what not ready after $limit s"
}

# Stops what this test started, by process id: the jobs first (their steps
# end with them), then the daemons, then anything that still carries this
# cluster's slurm.conf in its environment (a step left behind).
cleanup() {
    local rc=$? pid t left
    trap - EXIT INT TERM
    if [ -n "$tmp" ] && [ -f "$tmp/slurm.conf" ] && [ ${#daemons[@]} -gt 0 ]; then
        sl scancel --quiet --user="$(id -un)" >/dev/null 2>&1 || true
        for ((t = 0; t < 50; t++)); do
            [ -z "$(sl squeue -h 2>/dev/null)" ] && break
            sleep 0.2
        done
    fi
    for pid in "${daemons[@]}"; do kill "$pid" 2>/dev/null || true; done
    for ((t = 0; t < 50; t++)); do
        left=0
        for pid in "${daemons[@]}"; do kill -0 "$pid" 2>/dev/null && left=1; done
        [ $left = 0 ] && break
        sleep 0.2
    done
    for pid in "${daemons[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
    if [ -n "$tmp" ]; then
        for pid in $(stray_pids); do kill -KILL "$pid" 2>/dev/null || true; done
        if [ "${CMB_SLURM_KEEP:-0}" = 1 ]; then
            say "kept $tmp (CMB_SLURM_KEEP=1)"
        else
            rm -rf "$tmp"
        fi
    fi
    say "stopped ${#daemons[@]} daemons"
    exit $rc
}

stray_pids() {
    grep -lxzF "SLURM_CONF=$tmp/slurm.conf" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 | grep -vx "$$" || true
}

# --- checks -------------------------------------------------------------------------------

job_state() { sl scontrol show job "$1" -o 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }

wait_job() { # JOB SECONDS
    local t
    for ((t = 0; t < $2 * 2; t++)); do
        case $(job_state "$1") in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY) return 0 ;; esac
        sleep 0.5
    done
    fail "job $1 did not end within $2 s (state $(job_state "$1"))"
}

cases_of() { tail -n +2 "$1/results.csv" | cut -d, -f4 | sort -u; }

# Every case once: no (case, repetition, metric, status) row twice.
no_duplicates() {
    local dup
    dup=$(tail -n +2 "$1/results.csv" | cut -d, -f4,9,10,11 | sort | uniq -d | head -n 3)
    [ -z "$dup" ] || fail "$1: rows twice after the resume: $dup"
}

status_of() { awk -F'\t' -v n="$1" -v g="$2" '$2 == n && $3 == g { print $4 }' "$dest/index.tsv"; }

sums() { (cd "$dest/runs" && sha256sum n1-gpu*/results.* n1-gpu*.status); }

# Waits until RUN has finished two cases, while it runs.
under_way() {
    local t
    for ((t = 0; t < 600; t++)); do
        [ "$(cases_of "$1" 2>/dev/null | wc -l)" -ge 2 ] && return 0
        [ -f "$1.status" ] && fail "$1 ended before the test could stop it"
        sleep 0.2
    done
    fail "$1 did not finish two cases within 120 s"
}

# Processes that carry this cluster's slurm.conf, other than the daemons and
# their own helpers (slurmctld keeps a child to start scripts from): those of
# jobs (slurmstepd is no daemon's child).
job_processes() {
    local pid ppid d
    for pid in $(stray_pids); do
        ppid=$(awk '$1 == "PPid:" { print $2 }' "/proc/$pid/status" 2>/dev/null)
        for d in "${daemons[@]}"; do [ "$pid" = "$d" ] || [ "$ppid" = "$d" ] && continue 2; done
        echo "$pid"
    done
}

# --- the test -----------------------------------------------------------------------------

install_slurm
[ "$(id -u)" = 0 ] || skip "the daemons run as root here (SlurmUser=root, SlurmdUser=root): run as root"
[ -d /proc/self ] || skip "no /proc: cannot find free ports"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cmb-slurm.XXXXXX")
trap cleanup EXIT
trap 'exit 130' INT TERM
write_config "$(pick_ports)"
start_daemons
say "cluster up: ${NODES[*]}, $GPUS stand-in GPUs each ($(sl sinfo -h -o '%P %D %T'))"

dest_root=$tmp/results
submit() { # sbatch options and script [suite options...]
    (cd "$src" && SLURM_CONF=$tmp/slurm.conf CMB_BIN=$bin CMB_MODE=sim CMB_DEST=$dest_root PYTHON=$python \
        CMB_REPORT_ARGS="--no-gnuplot --no-findings" sbatch --parsable --output="$tmp/job-%j.out" "$@")
}

# 1. The suite on three nodes; once their runs are under way, n2's step is
#    cancelled and n3 is taken down (--no-kill: the job goes on without it).
job=$(submit --nodes=3 --gpus-per-node=$GPUS ci/examples/slurm-suite.sbatch "${ARGS[@]}")
dest=$dest_root/$job
say "job $job submitted"
under_way "$dest/runs/n2-gpu0"
step=$(sl squeue -h -s -j "$job" -o '%i %N' | awk '$2 == "n2" { sub(/.*\./, "", $1); if ($1 ~ /^[0-9]+$/) print $1 }')
[ -n "$step" ] || fail "no job step on n2 ($(sl squeue -h -s -j "$job" -o '%i %N' | tr '\n' ' '))"
sl scancel "$job.$step"
say "cancelled step $job.$step (n2) after $(cases_of "$dest/runs/n2-gpu0" | wc -l) cases of n2-gpu0"
under_way "$dest/runs/n3-gpu0"
sl scontrol update NodeName=n3 State=DOWN Reason="cumembench test: a node lost"
say "took n3 down after $(cases_of "$dest/runs/n3-gpu0" | wc -l) cases of n3-gpu0"
wait_job "$job" 400
out=$tmp/job-$job.out
say "job $job ended: $(job_state "$job")"

[ "$(job_state "$job")" = FAILED ] || fail "job $job: state $(job_state "$job"), expected FAILED (runs missing)"
# (a daemon may run a helper a moment longer; a step's processes end within KillWait)
for ((t = 0; t < 50; t++)); do [ -z "$(job_processes)" ] && break; sleep 0.2; done
left=$(for pid in $(job_processes); do
    ppid=$(awk '$1 == "PPid:" { print $2 }' "/proc/$pid/status" 2>/dev/null)
    printf '%s (%s, parent %s: %s); ' "$pid" "$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" "$ppid" \
        "$(tr '\0' ' ' <"/proc/$ppid/cmdline" 2>/dev/null)"
done)
[ -z "$left" ] || fail "processes of job $job outlived it: $left"
full=$(cases_of "$dest/runs/n1-gpu0" | wc -l)
[ "$full" = 16 ] || fail "n1-gpu0 holds $full cases, expected 16 (2 churn and 2 replay cases x 4 allocators)"
for g in 0 1; do
    run=$dest/runs/n1-gpu$g
    [ "$(status_of n1 "$g")" = 0 ] || fail "n1-gpu$g: status '$(status_of n1 "$g")' in index.tsv, expected 0"
    [ "$(cases_of "$run")" = "$(cases_of "$dest/runs/n1-gpu0")" ] || fail "n1-gpu$g: other cases than n1-gpu0"
    [ -L "$dest/by-gpu/sim/n1-gpu$g" ] || fail "by-gpu/sim/n1-gpu$g: no link"
done
for run in n2-gpu0 n2-gpu1 n3-gpu0 n3-gpu1; do
    [ "$(status_of "${run%-gpu*}" "${run#*-gpu}")" = interrupted ] ||
        fail "$run: status '$(status_of "${run%-gpu*}" "${run#*-gpu}")', expected interrupted"
    [ ! -e "$dest/by-gpu/sim/$run" ] || fail "by-gpu/sim/$run: an interrupted run is linked"
    part=$(cases_of "$dest/runs/$run" | wc -l)
    [ "$part" -lt "$full" ] || fail "$run holds all $full cases: it was stopped too late"
    head -n "$(($(wc -l <"$dest/runs/$run/results.csv") - 1))" "$dest/runs/$run/results.csv" >"$tmp/$run-kept.csv"
done
grep -q 'slurm-merge: 4 run(s) missing: n2-gpu0 (interrupted.*n2-gpu1 (interrupted.*n3-gpu0 (interrupted.*n3-gpu1 (interrupted' \
    "$out" || fail "the merge does not name n2's and n3's runs as interrupted"
cmd=$(sed -n 's/^slurm-merge: continue them on their nodes: //p' "$out" | head -n 1)
[[ $cmd == "CMB_RESUME=$dest sbatch --nodes=2 --nodelist=n2,n3 --partition=cmb --gpus-per-node=$GPUS "* ]] ||
    fail "the merge does not give the command that continues n2's and n3's runs (it gives: $cmd)"
report=$dest/report.html
[ -f "$report" ] || fail "no merged report after job $job"
grep -q '4 of 6 runs missing' "$report" || fail "the report does not say that 4 of 6 runs are missing"
grep -qF "<code>$cmd</code>" "$report" || fail "the report lacks the merge's command"
before=$(sums)
say "job $job: n1 whole ($full cases a run), n2 and n3 interrupted, the merge names their four runs"

# 2. n3 back; the command the merge gave: n2's and n3's runs continue where they stopped.
sl scontrol update NodeName=n3 State=RESUME 2>/dev/null || true
wait_for 60 "n3 back" nodes_idle
read -r -a words <<<"$cmd"
job2=$(CMB_RESUME=$dest submit "${words[@]:2}")
say "job $job2 submitted: $cmd"
wait_job "$job2" 400
out2=$tmp/job-$job2.out
[ "$(job_state "$job2")" = COMPLETED ] || fail "job $job2: state $(job_state "$job2"), expected COMPLETED"
for run in n2-gpu0 n2-gpu1 n3-gpu0 n3-gpu1; do
    [ "$(status_of "${run%-gpu*}" "${run#*-gpu}")" = 0 ] || fail "$run: status after the resume, expected 0"
    [ "$(cases_of "$dest/runs/$run")" = "$(cases_of "$dest/runs/n1-gpu0")" ] || fail "$run: other cases than n1-gpu0"
    no_duplicates "$dest/runs/$run"
    grep -q "resuming $dest/runs/$run" "$dest/runs/$run.log" || fail "$run was not continued with --resume"
    cmp -s "$tmp/$run-kept.csv" <(head -n "$(wc -l <"$tmp/$run-kept.csv")" "$dest/runs/$run/results.csv") ||
        fail "$run: the rows finished before it was stopped changed"
done
[ "$before" = "$(sums)" ] || fail "the resume changed n1's results"
[ "$(find "$dest/by-gpu/sim" -type l | wc -l)" = 6 ] || fail "by-gpu/sim: expected 6 links"
grep -q 'slurm-merge: report: .* (6 runs)' "$out2" || fail "the merge after the resume did not report 6 runs"
grep -q "Every run of the job ended: 6 runs on 3 node(s)" "$report" || fail "the report still misses runs"
grep -q "Across GPUs: side by side" "$report" || fail "the report lacks the runs side by side"
for node in n1 n2 n3; do
    for g in 0 1; do
        grep -q "sim ($node-gpu$g)" "$report" || fail "the report has no column for $node-gpu$g"
    done
done
say "job $job2: n2's and n3's runs continued to $full cases, every case once, n1 untouched, report of 6 runs"
say "PASS"
