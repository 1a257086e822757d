#!/usr/bin/env bash
# Start a one-node SLURM cluster (Debian's Slurm 22.05) on this machine for the cluster tests.
#
# Installs slurmctld, slurmd, slurm-client, munge, slurmdbd and mariadb-server when missing,
# writes every config, state, pid and log file under $REPRO_SLURM_DIR (default
# /tmp/repro-slurm), starts munged, MariaDB, slurmdbd, slurmctld and slurmd there, registers
# the cluster with sacctmgr and waits until the node is idle. Idempotent: daemons already
# running from an earlier call are left alone. Clients need SLURM_CONF, which this script
# prints and writes to $REPRO_SLURM_DIR/env.sh; slurm/local/teardown.sh stops everything.
#
# Chosen for a container without systemd or cgroups (see slurm/README.md):
#   proctrack/linuxproc, task/none, select/cons_tres with CR_Core, SlurmUser=root;
#   accounting on slurmdbd (submitit needs sacct to see a cancelled job);
#   cred_expire=10 (a requeued job restarts after ~11 s instead of 120 s);
#   fast scheduler intervals; EnforcePartLimits=ALL (impossible requests fail at sbatch).
set -euo pipefail

ROOT=${REPRO_SLURM_DIR:-/tmp/repro-slurm}
CLUSTER=${REPRO_SLURM_CLUSTER:-repro}
PARTITION=${REPRO_SLURM_PARTITION:-local}
CTLD_PORT=${REPRO_SLURM_CTLD_PORT:-16817}
SLURMD_PORT=${REPRO_SLURM_SLURMD_PORT:-16818}
DBD_PORT=${REPRO_SLURM_DBD_PORT:-16819}
DB_PORT=${REPRO_SLURM_DB_PORT:-13306}
WAIT_S=${REPRO_SLURM_WAIT_S:-60}
PACKAGES=(slurmctld slurmd slurm-client munge slurmdbd mariadb-server)

T0=$(date +%s.%N)
step() {  # step NAME: print the time since the start
    printf 'slurm/local/setup.sh: %-28s %6.1f s\n' "$1" "$(echo "$(date +%s.%N) - $T0" | bc)"
}
die() { echo "slurm/local/setup.sh: error: $*" >&2; exit 1; }
alive() {  # alive PIDFILE COMM: the recorded pid runs COMM (a stale file's pid may be reused)
    [[ -s $1 ]] && [[ $(cat "/proc/$(cat "$1")/comm" 2>/dev/null) == "$2" ]]
}
wait_for() {  # wait_for WHAT COMMAND...: retry COMMAND for up to WAIT_S seconds
    local what=$1; shift
    local deadline=$(( $(date +%s) + WAIT_S ))
    until "$@" >/dev/null 2>&1; do
        (( $(date +%s) < deadline )) || die "$what not ready after ${WAIT_S}s (logs in $ROOT/log)"
        sleep 0.2
    done
}

[[ $(id -u) == 0 ]] || die "must run as root (it installs packages and runs the daemons as SlurmUser=root)"
command -v bc >/dev/null || PACKAGES+=(bc)

# --- 1. packages --------------------------------------------------------------------------
missing=()
for pkg in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
done
if (( ${#missing[@]} )); then
    # Keep the packages' own init scripts from starting system-wide daemons.
    added_policy=0
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
        added_policy=1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" > "/tmp/repro-slurm-apt.log" 2>&1 \
        || { tail -20 /tmp/repro-slurm-apt.log; die "apt-get install ${missing[*]} failed"; }
    (( added_policy )) && rm -f /usr/sbin/policy-rc.d
fi
step "packages"

# --- 2. configuration ---------------------------------------------------------------------
mkdir -p "$ROOT"/{etc,log,run,state/ctld,state/d,munge,mysql}
chmod 700 "$ROOT/munge" "$ROOT/run"
NODE=$(hostname -s)
# The node line as slurmd detects it (CPUs, sockets, cores, threads, RealMemory).
NODE_HW=$(slurmd -C | head -1 | sed -E 's/^NodeName=[^ ]+ //')
CONF=$ROOT/etc/slurm.conf
# The default munge socket: Slurm 22.05's accounting client ignores AuthInfo=socket=.
MUNGE_SOCK=/run/munge/munge.socket.2
AUTH="cred_expire=10"

cat > "$CONF.tmp" <<EOF
# Written by slurm/local/setup.sh: one-node test cluster for repro's tests.
ClusterName=$CLUSTER
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/munge
CredType=cred/munge
AuthInfo=$AUTH
StateSaveLocation=$ROOT/state/ctld
SlurmdSpoolDir=$ROOT/state/d
SlurmctldPidFile=$ROOT/run/slurmctld.pid
SlurmdPidFile=$ROOT/run/slurmd.pid
SlurmctldLogFile=$ROOT/log/slurmctld.log
SlurmdLogFile=$ROOT/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$DBD_PORT
JobCompType=jobcomp/none
MailProg=/bin/true
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=1,bf_resolution=60,default_queue_depth=200
EnforcePartLimits=ALL
ReturnToService=2
JobRequeue=1
MinJobAge=600
KillWait=5
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=$NODE NodeAddr=127.0.0.1 $NODE_HW State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
mv "$CONF.tmp" "$CONF"

# No cgroups in the container: nothing may try to mount or use them.
cat > "$ROOT/etc/cgroup.conf" <<EOF
CgroupAutomount=no
ConstrainCores=no
ConstrainRAMSpace=no
EOF

# slurmdbd.conf must be private to SlurmUser; it sits beside slurm.conf, where slurmdbd looks.
umask 077
cat > "$ROOT/etc/slurmdbd.conf" <<EOF
AuthType=auth/munge
AuthInfo=$AUTH
DbdHost=localhost
DbdPort=$DBD_PORT
SlurmUser=root
PidFile=$ROOT/run/slurmdbd.pid
LogFile=$ROOT/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=repro
StorageLoc=slurm_acct_db
EOF
umask 022
printf 'export SLURM_CONF=%s\n' "$CONF" > "$ROOT/env.sh"
export SLURM_CONF=$CONF
step "configuration"

# --- 3. munge -----------------------------------------------------------------------------
KEY=/etc/munge/munge.key
if [[ ! -s $KEY ]]; then
    mkdir -p /etc/munge
    dd if=/dev/urandom of="$KEY" bs=1 count=1024 status=none
    chmod 600 "$KEY"
fi
mkdir -p "$(dirname "$MUNGE_SOCK")"
if ! alive "$ROOT/run/munged.pid" munged && ! munge --socket="$MUNGE_SOCK" -n >/dev/null 2>&1; then
    munged --force --socket="$MUNGE_SOCK" --key-file="$KEY" \
        --pid-file="$ROOT/run/munged.pid" --log-file="$ROOT/log/munged.log" \
        --seed-file="$ROOT/munge/munged.seed" 2>>"$ROOT/log/munged.log"
fi
wait_for munged munge --socket="$MUNGE_SOCK" -n
step "munged"

# --- 4. MariaDB (the accounting database) -------------------------------------------------
DB_SOCK=$ROOT/run/mysqld.sock
if [[ ! -d $ROOT/mysql/mysql ]]; then
    mariadb-install-db --user=root --datadir="$ROOT/mysql" --auth-root-authentication-method=socket \
        --skip-test-db > "$ROOT/log/mariadb-install.log" 2>&1 \
        || { tail -20 "$ROOT/log/mariadb-install.log"; die "mariadb-install-db failed"; }
fi
if ! alive "$ROOT/run/mysqld.pid" mariadbd; then
    setsid nohup mariadbd --user=root --datadir="$ROOT/mysql" --socket="$DB_SOCK" \
        --port="$DB_PORT" --bind-address=127.0.0.1 --pid-file="$ROOT/run/mysqld.pid" \
        --log-error="$ROOT/log/mariadb.log" --skip-log-bin \
        --innodb-buffer-pool-size=128M --innodb-lock-wait-timeout=900 \
        > /dev/null 2>&1 < /dev/null &
fi
wait_for MariaDB mariadb-admin --socket="$DB_SOCK" ping
mariadb --socket="$DB_SOCK" <<'EOF'
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'repro';
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'repro';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
EOF
step "mariadb"

# --- 5. slurmdbd and the cluster's registration -------------------------------------------
if ! alive "$ROOT/run/slurmdbd.pid" slurmdbd; then
    slurmdbd
fi
wait_for slurmdbd sacctmgr -n list cluster
if [[ -z $(sacctmgr -n -P list cluster "$CLUSTER" format=cluster) ]]; then
    sacctmgr -i add cluster "$CLUSTER" > /dev/null
fi
step "slurmdbd"

# --- 6. slurmctld and slurmd --------------------------------------------------------------
if ! alive "$ROOT/run/slurmctld.pid" slurmctld; then
    slurmctld
fi
wait_for slurmctld scontrol ping
if ! alive "$ROOT/run/slurmd.pid" slurmd; then
    slurmd -N "$NODE"
fi
node_idle() { sinfo -h -n "$NODE" -o %t | grep -Eq '^(idle|mix|alloc)'; }
wait_for "node $NODE" node_idle
step "node $NODE $(sinfo -h -n "$NODE" -o %t)"

echo "slurm/local/setup.sh: cluster '$CLUSTER' up; clients need:"
echo "export SLURM_CONF=$CONF"
