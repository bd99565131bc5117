#!/usr/bin/env bash
# A one-node SLURM cluster on this machine (munged, slurmctld, slurmd on localhost), for the
# test that runs the pipeline through Snakemake's SLURM executor (tests/cpu/pipeline/test_slurm_executor.py).
# Needs root and Debian's slurm-wlm and munge packages. Idempotent: returns once `sinfo` shows
# the node idle; a cluster already running is left as it is.
set -euo pipefail

PARTITION=debug
CONF=/etc/slurm/slurm.conf

node_idle() { sinfo --noheader --partition "$PARTITION" --format %t 2>/dev/null | grep -qx "idle\|mix\|alloc"; }

if node_idle; then
    echo "start_slurm: a SLURM node is already up:"; sinfo; exit 0
fi

# munge: the key Debian's package made, the daemon run as its own user
install -d -o munge -g munge -m 0755 /run/munge
install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
[ -s /etc/munge/munge.key ] || { mungekey --create --force; chown munge:munge /etc/munge/munge.key; }
if ! munge -n >/dev/null 2>&1; then
    runuser -u munge -- /usr/sbin/munged
fi

# slurm.conf: this node as slurmd -C sees it (CPUs, memory), reached on 127.0.0.1
host=$(hostname -s)
node_line=$(slurmd -C | head -1 | sed "s/^NodeName=[^ ]*/NodeName=$host NodeAddr=127.0.0.1/")
install -d /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
cat > "$CONF" <<CONF
ClusterName=tmastudy
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
# squeue answers for finished jobs this long (the executor's status queries; no slurmdbd here)
MinJobAge=600
ReturnToService=2
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
$node_line State=UNKNOWN
PartitionName=$PARTITION Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF

pgrep -x slurmctld >/dev/null || slurmctld
pgrep -x slurmd >/dev/null || slurmd

for _ in $(seq 60); do
    if node_idle; then echo "start_slurm: up"; sinfo; exit 0; fi
    scontrol update nodename="$host" state=resume >/dev/null 2>&1 || true
    sleep 1
done
echo "start_slurm: the node did not come up; logs follow" >&2
tail -n 30 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2 || true
sinfo >&2 || true
exit 1
