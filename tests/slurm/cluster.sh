#!/usr/bin/env bash
# A throw-away single-node Slurm cluster for the tests: `cluster.sh start DIR` starts munged,
# slurmctld and slurmd with every state, spool, pid and log path under DIR and prints the
# slurm.conf path (export it as SLURM_CONF); `cluster.sh stop DIR` stops them. Needs root and
# Debian's slurmctld, slurmd, slurm-client and munge packages.
set -euo pipefail

cmd=${1:?usage: cluster.sh start|stop DIR}
dir=${2:?usage: cluster.sh start|stop DIR}
dir=$(realpath -m "$dir")

stop() {
    for d in slurmd slurmctld; do
        if [ -f "$dir/$d.pid" ]; then
            kill "$(cat "$dir/$d.pid")" 2>/dev/null || true
        fi
    done
    # slurmctld saves its state on SIGTERM; give both a moment, then make sure.
    for _ in $(seq 50); do
        alive=0
        for d in slurmd slurmctld; do
            if [ -f "$dir/$d.pid" ] && kill -0 "$(cat "$dir/$d.pid")" 2>/dev/null; then alive=1; fi
        done
        [ $alive = 0 ] && break
        sleep 0.2
    done
    for d in slurmd slurmctld; do
        if [ -f "$dir/$d.pid" ]; then kill -9 "$(cat "$dir/$d.pid")" 2>/dev/null || true; rm -f "$dir/$d.pid"; fi
    done
}

if [ "$cmd" = stop ]; then
    stop
    exit 0
fi
[ "$cmd" = start ] || { echo "usage: cluster.sh start|stop DIR" >&2; exit 2; }

mkdir -p "$dir"/{state,spool,log}
node=$(hostname -s)
cpus=8
mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2 ))

# munge: one key, run as the munge user, socket in /run/munge.
if ! pgrep -x munged >/dev/null; then
    mkdir -p /run/munge /etc/munge /var/lib/munge /var/log/munge
    [ -s /etc/munge/munge.key ] || dd if=/dev/urandom of=/etc/munge/munge.key bs=1k count=1 status=none
    chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge
    chmod 0700 /etc/munge; chmod 0400 /etc/munge/munge.key
    su -s /bin/sh munge -c munged
fi

cat > "$dir/cgroup.conf" <<CONF
ConstrainRAMSpace=yes
ConstrainSwapSpace=yes
CONF
cat > "$dir/slurm.conf" <<CONF
ClusterName=firedup-test
SlurmctldHost=$node
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldPort=16817
SlurmdPort=16818
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=256
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=300
SchedulerParameters=defer_batch=0
NodeName=$node CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF

export SLURM_CONF="$dir/slurm.conf"
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
# Ready when the node is idle.
for _ in $(seq 100); do
    if sinfo -h -o %t 2>/dev/null | grep -qx idle; then
        echo "$SLURM_CONF"
        exit 0
    fi
    sleep 0.1
done
echo "slurm did not come up; its logs are in $dir/log" >&2
tail -20 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2 || true
exit 1
