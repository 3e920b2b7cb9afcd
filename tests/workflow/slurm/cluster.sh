#!/usr/bin/env bash
# A single-node SLURM cluster on this machine, for the workflow's cluster test.
#   cluster.sh up    install (Debian packages) if needed, configure, start munged/slurmctld/slurmd;
#                    idempotent: does nothing when a cluster already answers.
#   cluster.sh down  stop exactly the daemons that `up` started (by PID).
# Needs root. State (PIDs, logs, config copy) lives in $SLURM_TEST_STATE (default /tmp/affhom-slurm).
set -euo pipefail
STATE=${SLURM_TEST_STATE:-/tmp/affhom-slurm}
mkdir -p "$STATE"

log() { echo "[slurm-test] $*" >&2; }

up() {
    if command -v scontrol >/dev/null 2>&1 && timeout 5 scontrol ping 2>/dev/null | grep -q "is UP"; then
        log "a SLURM controller already answers; using it"
        exit 0
    fi
    if ! command -v slurmctld >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
        log "installing munge and slurm (Debian packages)"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >/dev/null
        apt-get install -y -qq --no-install-recommends munge slurmctld slurmd slurm-client >/dev/null
    fi
    local host cpus mem
    host=$(hostname -s)
    cpus=$(nproc)
    mem=$(( $(awk '/MemTotal/ {print int($2/1024)}' /proc/meminfo) - 1024 ))
    mkdir -p /etc/munge /run/munge /var/lib/munge /var/log/munge /etc/slurm \
             /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
    if [ ! -s /etc/munge/munge.key ]; then
        dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
    fi
    chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge
    chmod 0700 /etc/munge; chmod 0400 /etc/munge/munge.key
    cat > /etc/slurm/slurm.conf <<CONF
ClusterName=affhom
SlurmctldHost=${host}(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdLogFile=$STATE/slurmd.log
JobCompType=jobcomp/filetxt
JobCompLoc=$STATE/jobcomp.log
MinJobAge=600
ReturnToService=2
DefMemPerCPU=1000
MpiDefault=none
NodeName=${host} NodeAddr=127.0.0.1 CPUs=${cpus} RealMemory=${mem} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
    cp /etc/slurm/slurm.conf "$STATE/slurm.conf"
    if ! pgrep -x munged >/dev/null; then
        runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid
        cat /run/munge/munged.pid > "$STATE/munged.started"
    fi
    /usr/sbin/slurmctld
    for _ in $(seq 50); do [ -s "$STATE/slurmctld.pid" ] && break; sleep 0.2; done
    cp "$STATE/slurmctld.pid" "$STATE/slurmctld.started"
    /usr/sbin/slurmd
    for _ in $(seq 50); do [ -s "$STATE/slurmd.pid" ] && break; sleep 0.2; done
    cp "$STATE/slurmd.pid" "$STATE/slurmd.started"
    for _ in $(seq 60); do
        if sinfo -h -o "%T" 2>/dev/null | grep -qE "^idle"; then
            log "cluster up: node ${host}, ${cpus} CPUs, ${mem} MB"
            exit 0
        fi
        scontrol update nodename="$host" state=resume >/dev/null 2>&1 || true
        sleep 0.5
    done
    log "the node did not become idle; see $STATE/slurmctld.log and $STATE/slurmd.log"
    sinfo >&2 || true
    exit 1
}

down() {
    for daemon in slurmd slurmctld munged; do
        if [ -s "$STATE/$daemon.started" ]; then
            pid=$(cat "$STATE/$daemon.started")
            kill "$pid" 2>/dev/null || true
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            rm -f "$STATE/$daemon.started"
        fi
    done
}

case "${1:-}" in
    up) up ;;
    down) down ;;
    *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
