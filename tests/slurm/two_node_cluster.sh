#!/usr/bin/env bash
# A throw-away two-node Slurm cluster on one machine, for multi-node runs (issue 27):
# `two_node_cluster.sh start DIR` prints the slurm.conf path (export it as SLURM_CONF);
# `two_node_cluster.sh stop DIR` stops it and removes its namespaces and links.
#
# Debian's slurmd is not built with --enable-multiple-slurmd, so two slurmd on one host would share
# one port, spool and pid file. Each node here is its own slurmd in its own network namespace
# (fdnode1 at 10.231.1.2, fdnode2 at 10.231.2.2, joined to the host by veth pairs, the host routing
# between them) and its own UTS namespace (hostname fdnode1/fdnode2), so a task sees its node's name
# and address as it would on a real cluster. slurmctld runs in the host's namespaces on its own
# ports (16827/16828), apart from cluster.sh's single-node cluster (16817/16818), so both can run.
# `nsenter --net`, not `ip netns exec`: the latter mounts a fresh /sys, hiding /sys/fs/cgroup.
# Needs root, iproute2, util-linux and Debian's slurmctld, slurmd, slurm-client and munge.
set -euo pipefail

cmd=${1:?usage: two_node_cluster.sh start|stop DIR}
dir=${2:?usage: two_node_cluster.sh start|stop DIR}
dir=$(realpath -m "$dir")
nodes=(fdnode1 fdnode2)

stop() {
    # Each node's slurmd (and anything its jobs left) is found by its network namespace.
    pids() {
        for i in 1 2; do ip netns pids "fdnode$i" 2>/dev/null || true; done
        pgrep -f "^slurmctld -f $dir/slurm.conf" || true
    }
    for pid in $(pids); do kill "$pid" 2>/dev/null || true; done
    for _ in $(seq 50); do
        alive=0
        for pid in $(pids); do kill -0 "$pid" 2>/dev/null && alive=1; done
        [ $alive = 0 ] && break
        sleep 0.2
    done
    for pid in $(pids); do kill -9 "$pid" 2>/dev/null || true; done
    for i in 1 2; do
        ip link del "fdveth$i" 2>/dev/null || true
        ip netns del "fdnode$i" 2>/dev/null || true
    done
}

if [ "$cmd" = stop ]; then
    stop
    exit 0
fi
[ "$cmd" = start ] || { echo "usage: two_node_cluster.sh start|stop DIR" >&2; exit 2; }

mkdir -p "$dir"/{state,log}
ctl=$(hostname -s)
for i in 1 2; do
    ns=fdnode$i
    ip netns del "$ns" 2>/dev/null || true
    ip link del "fdveth$i" 2>/dev/null || true
    ip netns add "$ns"
    ip link add "fdveth$i" type veth peer name "fdvpeer$i"
    ip link set "fdvpeer$i" netns "$ns"
    ip addr add "10.231.$i.1/24" dev "fdveth$i"
    ip link set "fdveth$i" up
    ip netns exec "$ns" ip addr add "10.231.$i.2/24" dev "fdvpeer$i"
    ip netns exec "$ns" ip link set "fdvpeer$i" up
    ip netns exec "$ns" ip link set lo up
    ip netns exec "$ns" ip route add default via "10.231.$i.1"
done
sysctl -qw net.ipv4.ip_forward=1

# munge: one key, run as the munge user, socket in /run/munge (shared by every namespace here).
if ! pgrep -x munged >/dev/null; then
    mkdir -p /run/munge /etc/munge /var/lib/munge /var/log/munge
    [ -s /etc/munge/munge.key ] || dd if=/dev/urandom of=/etc/munge/munge.key bs=1k count=1 status=none
    chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge
    chmod 0700 /etc/munge; chmod 0400 /etc/munge/munge.key
    su -s /bin/sh munge -c munged
fi

cat > "$dir/slurm.conf" <<CONF
ClusterName=firedup-two
SlurmctldHost=$ctl(10.231.1.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/node/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/node/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/node/slurmd.log
SlurmctldPort=16827
SlurmdPort=16828
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
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
NodeName=fdnode1 NodeAddr=10.231.1.2 NodeHostname=fdnode1 CPUs=4 RealMemory=2048 State=UNKNOWN
NodeName=fdnode2 NodeAddr=10.231.2.2 NodeHostname=fdnode2 CPUs=4 RealMemory=2048 State=UNKNOWN
PartitionName=two Nodes=fdnode1,fdnode2 Default=YES MaxTime=INFINITE State=UP
CONF

export SLURM_CONF="$dir/slurm.conf"
slurmctld -f "$SLURM_CONF"
# One slurm.conf for all, but each slurmd sees its own $dir/node (its pid file, spool and log:
# without the multiple-slurmd build those paths are not per node, and a second slurmd that finds
# the first one's pid file kills it) through a bind mount in its own mount namespace.
mkdir -p "$dir/node"
for node in "${nodes[@]}"; do
    mkdir -p "$dir/$node/spool"
    nsenter --net="/run/netns/$node" unshare --uts --mount --propagation private \
        sh -c "hostname $node && mount --bind '$dir/$node' '$dir/node' && exec slurmd -f '$SLURM_CONF' -N $node"
done
# Ready when both nodes are idle.
for _ in $(seq 150); do
    if [ "$(sinfo -h -o %t 2>/dev/null | sort -u)" = idle ]; then
        echo "$SLURM_CONF"
        exit 0
    fi
    sleep 0.2
done
echo "the two-node slurm did not come up; its logs are in $dir/log" >&2
tail -n 20 "$dir"/log/*.log "$dir"/fdnode*/slurmd.log >&2 || true
exit 1
