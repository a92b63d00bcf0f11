#!/bin/sh
# tests/slurm_cluster.sh - a real single-node Slurm for the tests, in a
# directory of its own: munged, slurmctld and slurmd (Debian's slurm-wlm and
# munge packages), configured and started there, stopped again at the end.
#
#   tests/slurm_cluster.sh start DIR   configure and start; prints the line
#                                      SLURM_CONF=DIR/slurm.conf once the node
#                                      takes jobs (exit 0), else the logs (1);
#                                      exit 77 when this machine cannot run one
#                                      (no slurm-wlm/munge, or not root)
#   tests/slurm_cluster.sh stop DIR    stop the daemons (and their jobs)
#
# Every Slurm command of the caller finds the cluster through the environment
# variable SLURM_CONF. Nothing outside DIR is touched: no system service, no
# file under /etc. The ports are picked free at start. slurmd has to run as
# root (it starts jobs as their users), so the cluster needs root; CI is root.
set -u
cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }

stop() {
  for d in slurmd slurmctld munged; do
    [ -f "$dir/$d.pid" ] || continue
    pid=$(cat "$dir/$d.pid" 2>/dev/null)
    [ -n "$pid" ] && kill "$pid" 2>/dev/null
  done
  # wait for them to go (slurmd kills its jobs first), then make sure
  for i in $(seq 50); do
    alive=0
    for d in slurmd slurmctld munged; do
      pid=$(cat "$dir/$d.pid" 2>/dev/null)
      [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && alive=1
    done
    [ $alive = 0 ] && break
    sleep 0.2
  done
  for d in slurmd slurmctld munged; do
    pid=$(cat "$dir/$d.pid" 2>/dev/null)
    [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
    rm -f "$dir/$d.pid"
  done
  # job processes slurmd left behind (it tracks them by process group/parent)
  pkill -9 -f "slurmstepd: \[" 2>/dev/null
  return 0
}

if [ "$cmd" = stop ]; then
  stop
  exit 0
fi
[ "$cmd" = start ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }

for b in munged slurmctld slurmd sbatch squeue scontrol; do
  command -v "$b" >/dev/null 2>&1 || [ -x "/usr/sbin/$b" ] || {
    echo "slurm_cluster: $b not found (Debian packages slurm-wlm and munge; make deps installs them)"
    exit 77
  }
done
if [ "$(id -u)" != 0 ]; then
  echo "slurm_cluster: slurmd must run as root to start jobs; run the tests as root (CI does)"
  exit 77
fi
PATH=$PATH:/usr/sbin
mkdir -p "$dir/state" "$dir/spool" "$dir/munge" || exit 1
dir=$(cd "$dir" && pwd)

# a free TCP port per daemon (asked of the kernel, then released)
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
p1=$(free_port) && p2=$(free_port) || exit 1
[ "$p1" != "$p2" ] || p2=$((p1 + 1))

# munge: its own key and socket
head -c 1024 /dev/urandom > "$dir/munge/munge.key" && chmod 400 "$dir/munge/munge.key"
munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.sock" \
  --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge/seed" \
  || { echo "slurm_cluster: munged did not start:"; cat "$dir/munged.log"; exit 1; }

cpus=$(nproc)
mem=$(awk '/MemTotal/ {print int($2 / 1024 / 2)}' /proc/meminfo)
host=$(hostname -s)
cat > "$dir/slurm.conf" <<EOF
# single-node test cluster of bcg's tests (tests/slurm_cluster.sh)
ClusterName=bcgtest
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$p1
SlurmdPort=$p2
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
MinJobAge=600
KillWait=10
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
export SLURM_CONF="$dir/slurm.conf"

slurmctld -c -f "$SLURM_CONF" || { echo "slurm_cluster: slurmctld did not start:"; cat "$dir/slurmctld.log"; stop; exit 1; }
slurmd -f "$SLURM_CONF" || { echo "slurm_cluster: slurmd did not start:"; cat "$dir/slurmd.log"; stop; exit 1; }

# wait until the node takes jobs
for i in $(seq 150); do
  st=$(sinfo -h -N -o %t 2>/dev/null | head -n 1)
  case "$st" in
    idle|mix|alloc) echo "SLURM_CONF=$SLURM_CONF"; exit 0 ;;
  esac
  sleep 0.2
done
echo "slurm_cluster: the node did not come up (state '$st'):"
tail -n 30 "$dir/slurmctld.log" "$dir/slurmd.log"
stop
exit 1
