#!/usr/bin/env bash
# A real one-node Slurm cluster on this host, for tests/scale/slurm.rs and for trying
# the Slurm engine without a cluster: Debian's slurmctld + slurmd + slurm-client with munge,
# one node (this host) with RATCHET_FAKE_GPUS (default 4) fake GPUs, started without systemd.
# Idempotent: a second run finds everything up and only checks it. Needs root and apt.
#
# The fake GPUs are character devices cloned from /dev/null (major 1, minor 3): slurmd only
# needs a device file per GPU to bind, and with Gres=gpu:N each job step gets its own
# CUDA_VISIBLE_DEVICES. Cgroups are not assumed (containers rarely delegate them), so tasks are
# tracked by process tree (proctrack/linuxproc) and not confined (task/none); scancel still
# signals every process of a step.
set -euo pipefail

GPUS="${RATCHET_FAKE_GPUS:-4}"
CONF_DIR=/etc/slurm
STATE=/var/spool/slurmctld
SPOOL=/var/spool/slurmd
LOGS=/var/log/slurm
t0=$(date +%s)

say() { echo "slurm-localhost: $*"; }
die() { echo "slurm-localhost: error: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "needs root (it installs packages and starts daemons)"

# 1. Packages (only what is missing; apt-get update only when an install fails without it).
need=()
for bin in slurmctld slurmd sbatch munged; do command -v "$bin" >/dev/null 2>&1 || need+=("$bin"); done
if [ "${#need[@]}" -gt 0 ]; then
  command -v apt-get >/dev/null 2>&1 || die "missing ${need[*]} and no apt-get to install them"
  say "installing slurmctld slurmd slurm-client munge (missing: ${need[*]})"
  pkgs=(slurmctld slurmd slurm-client munge)
  export DEBIAN_FRONTEND=noninteractive
  # policy-rc.d stops the packages' postinst from starting daemons through init scripts; this
  # script starts them itself with the right configuration.
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  apt-get install -y -q --no-install-recommends "${pkgs[@]}" >/tmp/slurm-apt.log 2>&1 ||
    { apt-get update -q >>/tmp/slurm-apt.log 2>&1 &&
      apt-get install -y -q --no-install-recommends "${pkgs[@]}" >>/tmp/slurm-apt.log 2>&1; } ||
    { rm -f /usr/sbin/policy-rc.d; die "apt-get install failed; see /tmp/slurm-apt.log"; }
  rm -f /usr/sbin/policy-rc.d
  say "installed in $(( $(date +%s) - t0 )) s"
fi

# 2. Munge: a key, then the daemon (slurm authenticates every RPC through it).
if [ ! -s /etc/munge/munge.key ]; then
  mkdir -p /etc/munge
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
mkdir -p /run/munge /var/lib/munge /var/log/munge
chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge 2>/dev/null || true
chmod 0700 /etc/munge && chmod 0400 /etc/munge/munge.key
if ! munge -n >/dev/null 2>&1; then
  say "starting munged"
  if id munge >/dev/null 2>&1; then
    runuser -u munge -- munged --force || munged --force
  else
    munged --force
  fi
  for _ in $(seq 50); do munge -n >/dev/null 2>&1 && break; sleep 0.1; done
  munge -n >/dev/null 2>&1 || die "munged did not start (see /var/log/munge/munged.log)"
fi

# 3. Fake GPUs and the configuration.
host="$(hostname -s)"
for k in $(seq 0 $((GPUS - 1))); do
  [ -c "/dev/fakegpu$k" ] || mknod "/dev/fakegpu$k" c 1 3
  chmod 0666 "/dev/fakegpu$k"
done
# At least one CPU per fake GPU, so that every GPU can run a task at once on a small machine
# (config_overrides below makes slurmd trust these figures instead of draining the node).
cpus="$(nproc)"
[ "$cpus" -ge "$GPUS" ] || cpus="$GPUS"
# RealMemory in MB, a little under the total so slurmd's own check passes.
mem_mb="$(awk '/MemTotal/ { printf "%d", $2 / 1024 * 0.9 }' /proc/meminfo)"
mkdir -p "$CONF_DIR" "$STATE" "$SPOOL" "$LOGS"
chown slurm:slurm "$STATE" "$LOGS" 2>/dev/null || true
conf="$(cat <<EOF
# Written by ratchet's scripts/slurm-localhost.sh: one node, this host, $GPUS fake GPUs.
ClusterName=ratchet-local
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$STATE
SlurmdSpoolDir=$SPOOL
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd.log
# No cgroups in a container: track a step's processes by their parent chain, confine nothing.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
ReturnToService=2
SlurmdParameters=config_overrides
MaxArraySize=10001
# Quick turnaround for tests: a cancelled step's processes get 2 s between SIGTERM and SIGKILL.
KillWait=2
MinJobAge=300
SlurmdTimeout=30
InactiveLimit=0
NodeName=$host CPUs=$cpus RealMemory=$mem_mb Gres=gpu:$GPUS State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
)"
gres="NodeName=$host Name=gpu File=/dev/fakegpu[0-$((GPUS - 1))]"
changed=0
if [ "$(cat "$CONF_DIR/slurm.conf" 2>/dev/null)" != "$conf" ]; then
  printf '%s\n' "$conf" >"$CONF_DIR/slurm.conf"; changed=1
fi
if [ "$(cat "$CONF_DIR/gres.conf" 2>/dev/null)" != "$gres" ]; then
  printf '%s\n' "$gres" >"$CONF_DIR/gres.conf"; changed=1
fi
# No cgroup.conf: slurmd (22.05) still loads a cgroup plugin at start and autodetects v1/v2;
# "CgroupPlugin=disabled" only exists from 23.x and makes 22.05's slurmd refuse to start.

# 4. The daemons (restarted only when the configuration changed or one is down).
running() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
if [ "$changed" = 1 ]; then
  for p in /run/slurmd.pid /run/slurmctld.pid; do
    if running "$p"; then kill "$(cat "$p")" 2>/dev/null || true; fi
  done
  sleep 1
fi
if ! running /run/slurmctld.pid; then
  say "starting slurmctld"
  slurmctld -i || die "slurmctld failed to start; see $LOGS/slurmctld.log"
fi
if ! running /run/slurmd.pid; then
  say "starting slurmd"
  if ! slurmd; then
    # Most often the cgroup plugin: cgroup v2 without systemd managing slurmd. Fall back once:
    # 24.05 and later can switch cgroups off; 22.05 to 23.11 can leave systemd out of cgroup v2
    # (cgroup.conf(5) of each version).
    tail -n 5 "$LOGS/slurmd.log" 2>/dev/null | grep -qi cgroup || die "slurmd failed to start; see $LOGS/slurmd.log"
    ver="$(slurmd -V | awk '{ print $2 }')"
    case "$ver" in
      2[0-3].*) printf 'IgnoreSystemd=yes\n' >"$CONF_DIR/cgroup.conf" ;;
      *) printf 'CgroupPlugin=disabled\n' >"$CONF_DIR/cgroup.conf" ;;
    esac
    say "slurmd $ver could not use cgroups; retrying with $(cat "$CONF_DIR/cgroup.conf")"
    slurmd || die "slurmd failed to start; see $LOGS/slurmd.log"
  fi
fi

# 5. Wait for the node to be idle (or mixed/allocated when jobs already run).
for _ in $(seq 120); do
  st="$(sinfo -h -N -n "$host" -o '%T' 2>/dev/null | head -1)"
  case "$st" in
    idle|mixed|allocated|completing) break ;;
    down*|drain*) scontrol update NodeName="$host" State=RESUME >/dev/null 2>&1 || true ;;
  esac
  sleep 0.5
done
st="$(sinfo -h -N -n "$host" -o '%T' 2>/dev/null | head -1)"
case "$st" in
  idle|mixed|allocated|completing) ;;
  *) die "node $host is '${st:-unknown}' after 60 s; see $LOGS/slurmctld.log and $LOGS/slurmd.log" ;;
esac
say "node $host $st with gpu:$GPUS, partition local; ready in $(( $(date +%s) - t0 )) s"
