#!/usr/bin/env bash
# Bring up a single-node Slurm cluster on localhost, from Debian 12's packages, with accounting.
#
#   scripts/slurm/up.sh STATE_DIR        (as root; no systemd needed)
#
# Starts, each with its own files under STATE_DIR (nothing in /etc is changed, nothing shared is
# reused, so it can run beside a site's own daemons):
#   munged      own key + socket                      -> STATE_DIR/munge/
#   mariadbd    own datadir, 127.0.0.1:<free port>    -> STATE_DIR/mysql/
#   slurmdbd    accounting, so that `sacct` works     -> STATE_DIR/slurmdbd.conf
#   slurmctld   controller                            -> STATE_DIR/slurm.conf
#   slurmd -N localhost   one node with this machine's CPUs and memory
# and registers cluster / account / user with sacctmgr. Every daemon's pid is written to
# STATE_DIR/pids/<name>.pid; scripts/slurm/down.sh STATE_DIR stops exactly those.
#
# On success prints the environment the clients need (also in STATE_DIR/env.sh):
#   SLURM_CONF=STATE_DIR/slurm.conf  PMCFLOW_SLURM_PARTITION=...  PMCFLOW_SLURM_ACCOUNT=...
#
# Env: PMCFLOW_SLURM_PARTITION (default pmctest)  PMCFLOW_SLURM_ACCOUNT (default pmcflow)
#      PMCFLOW_SLURM_CLUSTER (default pmcflowtest) PMCFLOW_SLURM_INSTALL=0 to never apt-get install
#      PMCFLOW_SLURM_MEM_RESERVE_MB memory kept back from the node (default 512)
#      PMCFLOW_SLURM_NODE_CPUS / PMCFLOW_SLURM_NODE_MEM_MB  declare more CPUs / memory than the
#        machine has (SlurmdParameters=config_overrides), so that jobs written for a production
#        node (e.g. mem_mb=8000, threads=8) can be scheduled on a small CI machine. Memory is not
#        enforced here (no cgroups), so this only changes what Slurm accepts, not what jobs get.
#      PMCFLOW_SLURM_GPUS=N  declare N GPUs as generic resources (GresTypes=gpu, Gres=gpu:N, a
#        gres.conf whose device files are placeholders) and a second partition <partition>-gpu
#        on the node, so jobs go through the real --gpus / GRES path; they see no CUDA device.
set -euo pipefail

STATE=${1:?usage: up.sh STATE_DIR}
PARTITION=${PMCFLOW_SLURM_PARTITION:-pmctest}
ACCOUNT=${PMCFLOW_SLURM_ACCOUNT:-pmcflow}
CLUSTER=${PMCFLOW_SLURM_CLUSTER:-pmcflowtest}
RESERVE_MB=${PMCFLOW_SLURM_MEM_RESERVE_MB:-512}

log() { echo "slurm-up: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (daemons run as root in this test cluster)"

# ---------------------------------------------------------------- packages
PKGS=(slurmctld slurmd slurmdbd slurm-client munge mariadb-server)
need_install=0
for bin in /usr/sbin/slurmctld /usr/sbin/slurmd /usr/sbin/slurmdbd /usr/bin/sbatch /usr/bin/sacct \
  /usr/sbin/munged /usr/sbin/mariadbd /usr/bin/mariadb-install-db; do
  [ -x "$bin" ] || need_install=1
done
if [ "$need_install" = 1 ]; then
  [ "${PMCFLOW_SLURM_INSTALL:-1}" = 1 ] || die "Slurm/munge/MariaDB missing and PMCFLOW_SLURM_INSTALL=0"
  log "installing ${PKGS[*]} (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  # Package scripts must not start services (there is no init here anyway).
  apt-get update -q >&2
  apt-get install -y -q --no-install-recommends "${PKGS[@]}" >&2
fi

# ---------------------------------------------------------------- layout
mkdir -p "$STATE"
STATE=$(cd "$STATE" && pwd)
if [ -d "$STATE/pids" ] && ls "$STATE"/pids/*.pid >/dev/null 2>&1; then
  die "$STATE already has pid files: run scripts/slurm/down.sh $STATE first"
fi
mkdir -p "$STATE"/{pids,log,munge,mysql,spool/ctld,spool/d,tmp}
chmod 700 "$STATE/munge"

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
CTLD_PORT=$(free_port); SLURMD_PORT=$(free_port); DBD_PORT=$(free_port); DB_PORT=$(free_port)
# free_port may hand out the same port twice in a row on some kernels: make them distinct.
while [ "$SLURMD_PORT" = "$CTLD_PORT" ]; do SLURMD_PORT=$(free_port); done
while [ "$DBD_PORT" = "$CTLD_PORT" ] || [ "$DBD_PORT" = "$SLURMD_PORT" ]; do DBD_PORT=$(free_port); done
while [ "$DB_PORT" = "$CTLD_PORT" ] || [ "$DB_PORT" = "$SLURMD_PORT" ] || [ "$DB_PORT" = "$DBD_PORT" ]; do
  DB_PORT=$(free_port)
done

CPUS=$(nproc)
MEM_MB=$(awk '/^MemTotal:/ {print int($2/1024)}' /proc/meminfo)
NODE_MEM=$((MEM_MB > RESERVE_MB * 2 ? MEM_MB - RESERVE_MB : MEM_MB))
OVERRIDES=""
GPUS=${PMCFLOW_SLURM_GPUS:-0}
GPU_PARTITION=""
NODE_GRES=""
GPU_PARTITION_LINE=""
if [ "$GPUS" -gt 0 ]; then
  GPU_PARTITION="${PARTITION}-gpu"
  NODE_GRES="Gres=gpu:$GPUS"
  GPU_PARTITION_LINE="PartitionName=$GPU_PARTITION Nodes=localhost Default=NO MaxTime=INFINITE State=UP"
fi
if [ -n "${PMCFLOW_SLURM_NODE_CPUS:-}" ] && [ "$PMCFLOW_SLURM_NODE_CPUS" -gt "$CPUS" ]; then
  CPUS=$PMCFLOW_SLURM_NODE_CPUS; OVERRIDES="SlurmdParameters=config_overrides"
fi
if [ -n "${PMCFLOW_SLURM_NODE_MEM_MB:-}" ] && [ "$PMCFLOW_SLURM_NODE_MEM_MB" -gt "$NODE_MEM" ]; then
  NODE_MEM=$PMCFLOW_SLURM_NODE_MEM_MB; OVERRIDES="SlurmdParameters=config_overrides"
fi

wait_for() {  # wait_for SECONDS DESCRIPTION CMD...
  local secs=$1 what=$2; shift 2
  local deadline=$((SECONDS + secs))
  while [ "$SECONDS" -lt "$deadline" ]; do
    if timeout 10 "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  die "timed out after ${secs}s waiting for $what (logs in $STATE/log)"
}

# ---------------------------------------------------------------- munge
MUNGE_SOCK="$STATE/munge/munge.socket"
dd if=/dev/urandom of="$STATE/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$STATE/munge/munge.key"
/usr/sbin/munged --force --key-file="$STATE/munge/munge.key" --socket="$MUNGE_SOCK" \
  --pid-file="$STATE/pids/munged.pid" --log-file="$STATE/log/munged.log" \
  --seed-file="$STATE/munge/munged.seed"
wait_for 10 munged bash -c "munge -S '$MUNGE_SOCK' -n | unmunge -S '$MUNGE_SOCK'"
log "munged up (socket $MUNGE_SOCK)"

# ---------------------------------------------------------------- MariaDB
DB_SOCK="$STATE/mysql/mysqld.sock"
DB_PASS=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
mariadb-install-db --no-defaults --user=root --datadir="$STATE/mysql/data" --auth-root-authentication-method=socket \
  --skip-test-db >"$STATE/log/mariadb-install.log" 2>&1 || die "mariadb-install-db failed: $STATE/log/mariadb-install.log"
# mariadbd writes its own pid file; started in the background, detached from this shell.
nohup /usr/sbin/mariadbd --no-defaults --user=root --datadir="$STATE/mysql/data" --socket="$DB_SOCK" \
  --port="$DB_PORT" --bind-address=127.0.0.1 --pid-file="$STATE/pids/mariadbd.pid" \
  --log-error="$STATE/log/mariadbd.log" --innodb-buffer-pool-size=64M --innodb-log-file-size=16M \
  --skip-name-resolve </dev/null >/dev/null 2>&1 &
wait_for 60 mariadbd mariadb --no-defaults -S "$DB_SOCK" -uroot -e "select 1"
mariadb --no-defaults -S "$DB_SOCK" -uroot <<SQL
CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$DB_PASS';
CREATE DATABASE slurm_acct_db;
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
FLUSH PRIVILEGES;
SQL
log "mariadbd up (127.0.0.1:$DB_PORT)"

# ---------------------------------------------------------------- Slurm configuration
cat >"$STATE/slurmdbd.conf" <<EOF
# Written by pmcflow scripts/slurm/up.sh
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCK
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=root
PidFile=$STATE/pids/slurmdbd.pid
LogFile=$STATE/log/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$DB_PASS
StorageLoc=slurm_acct_db
EOF
chmod 600 "$STATE/slurmdbd.conf"

cat >"$STATE/slurm.conf" <<EOF
# Written by pmcflow scripts/slurm/up.sh: single node on localhost, $CPUS CPUs, $NODE_MEM MB.
ClusterName=$CLUSTER
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCK
CredType=cred/munge
StateSaveLocation=$STATE/spool/ctld
SlurmdSpoolDir=$STATE/spool/d
SlurmctldPidFile=$STATE/pids/slurmctld.pid
SlurmdPidFile=$STATE/pids/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
TmpFS=$STATE/tmp
MpiDefault=none
# No cgroups (containers / CI machines often have none writable): plain process tracking.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=5
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$DBD_PORT
# With munge, this names the munged socket used to talk to slurmdbd (AuthInfo is not used there).
AccountingStoragePass=$MUNGE_SOCK
# Jobs must name an existing account (like on a real site).
AccountingStorageEnforce=associations
# Account GPUs (AllocTRES gres/gpu=N in sacct) like a site that bills them.
AccountingStorageTRES=gres/gpu
# Keep sbatch --comment (the Snakemake plugin puts rule and wildcards there) for sacct.
AccountingStoreFlags=job_comment
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
ReturnToService=2
# Short timers so that time limits and failures show up in seconds, not minutes.
KillWait=5
OverTimeLimit=0
MinJobAge=300
$OVERRIDES
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=30
MessageTimeout=20
GresTypes=gpu
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$NODE_MEM $NODE_GRES State=UNKNOWN
PartitionName=$PARTITION Nodes=localhost Default=YES MaxTime=INFINITE State=UP
$GPU_PARTITION_LINE
EOF
# GPUs as GRES without GPUs: Slurm drops file-less GPUs, so each is a placeholder file under
# $STATE/dev (nothing is bound: no cgroups here). Slurm allocates and accounts them as on a site.
if [ "$GPUS" -gt 0 ]; then
  mkdir -p "$STATE/dev"
  for i in $(seq 0 $((GPUS - 1))); do : >"$STATE/dev/gpu$i"; done
  printf "AutoDetect=off\nNodeName=localhost Name=gpu File=%s/dev/gpu[0-%s]\n" "$STATE" "$((GPUS - 1))" >"$STATE/gres.conf"
else
  : >"$STATE/gres.conf"
fi
echo "# no cgroup plugins in use (proctrack/linuxproc, task/none)" >"$STATE/cgroup.conf"
export SLURM_CONF="$STATE/slurm.conf"

# ---------------------------------------------------------------- daemons
/usr/sbin/slurmdbd  # reads slurmdbd.conf next to $SLURM_CONF; daemonizes, writes its pid file
wait_for 30 slurmdbd bash -c "sacctmgr -n list cluster >/dev/null"
sacctmgr -i add cluster "$CLUSTER" >/dev/null
sacctmgr -i add account "$ACCOUNT" cluster="$CLUSTER" description=pmcflow-test organization=pmcflow >/dev/null
sacctmgr -i add user root account="$ACCOUNT" cluster="$CLUSTER" >/dev/null
log "slurmdbd up (port $DBD_PORT); cluster $CLUSTER, account $ACCOUNT"

/usr/sbin/slurmctld
wait_for 30 slurmctld scontrol ping
/usr/sbin/slurmd -N localhost
wait_for 60 "node localhost idle" bash -c "sinfo -h -N -n localhost -o %t | grep -Eq '^(idle|mix|alloc)'"
log "slurmctld + slurmd up: partition $PARTITION, node localhost ($CPUS CPUs, $NODE_MEM MB, $GPUS GPUs as GRES)"

# Client wrappers. Inside a job the Snakemake jobstep plugin removes every SLURM_* variable,
# SLURM_CONF included, from the environment of the `srun` it starts; on a real cluster srun then
# finds /etc/slurm/slurm.conf (or configless slurmd). This cluster keeps its files out of /etc,
# so jobs get PATH with these wrappers first (PATH is passed through).
mkdir -p "$STATE/bin"
for tool in srun sbatch scancel squeue sacct sinfo scontrol; do
  printf '#!/bin/sh\nSLURM_CONF=%s/slurm.conf exec /usr/bin/%s "$@"\n' "$STATE" "$tool" >"$STATE/bin/$tool"
  chmod 755 "$STATE/bin/$tool"
done

cat >"$STATE/env.sh" <<EOF
export SLURM_CONF=$STATE/slurm.conf
export PATH=$STATE/bin:\$PATH
export PMCFLOW_SLURM_BIN=$STATE/bin
export PMCFLOW_SLURM_PARTITION=$PARTITION
export PMCFLOW_SLURM_ACCOUNT=$ACCOUNT
export PMCFLOW_SLURM_CLUSTER=$CLUSTER
export PMCFLOW_SLURM_CPUS=$CPUS
export PMCFLOW_SLURM_GPUS=$GPUS
export PMCFLOW_SLURM_GPU_PARTITION=$GPU_PARTITION
export PMCFLOW_SLURM_MEM_MB=$NODE_MEM
EOF
grep -v '^export PATH=' "$STATE/env.sh" | sed 's/^export //'
