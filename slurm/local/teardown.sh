#!/usr/bin/env bash
# Stop the one-node test cluster that slurm/local/setup.sh started, by the pids it recorded.
#
# Cancels the cluster's remaining jobs, stops slurmd, slurmctld, slurmdbd, MariaDB and munged
# (only those whose pid files are under $REPRO_SLURM_DIR), then removes that directory unless
# --keep is given, so that the next setup starts from a clean state. Idempotent.
set -uo pipefail

ROOT=${REPRO_SLURM_DIR:-/tmp/repro-slurm}
KEEP=0
[[ ${1:-} == --keep ]] && KEEP=1
say() { echo "slurm/local/teardown.sh: $*"; }

if [[ ! -d $ROOT ]]; then
    say "nothing to stop ($ROOT does not exist)"
    exit 0
fi
export SLURM_CONF=$ROOT/etc/slurm.conf

stop() {  # stop NAME COMM: TERM the pid in NAME.pid if it still runs COMM, wait up to 15 s, then KILL
    local pidfile=$ROOT/run/$1.pid pid
    [[ -s $pidfile ]] || return 0
    pid=$(cat "$pidfile")
    if [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "$2" ]]; then
        kill -TERM "$pid"
        for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
        say "stopped $1 (pid $pid)"
    fi
    rm -f "$pidfile"
}

if [[ -s $ROOT/run/slurmctld.pid && $(cat "/proc/$(cat "$ROOT/run/slurmctld.pid")/comm" 2>/dev/null) == slurmctld ]]; then
    scancel --full --user="$(id -un)" 2>/dev/null || true
    for _ in $(seq 50); do [[ -z $(squeue -h 2>/dev/null) ]] && break; sleep 0.2; done
fi
stop slurmd slurmd
stop slurmctld slurmctld
stop slurmdbd slurmdbd
stop mysqld mariadbd
stop munged munged
if (( KEEP )); then
    say "kept $ROOT"
else
    rm -rf "$ROOT"
    say "removed $ROOT"
fi
