#!/usr/bin/env bash
# Runs a command (the e2e suite) inside the test bed's own network namespace, with containerd
# running in it, and puts the host back exactly as it was found afterwards, also when the command
# fails or is interrupted.
#
#   bash e2e/testbed/node/run-in-testbed.sh [--beds N] <command> [args...]
#
# With --beds N (default 1) it makes N such beds, each a namespace with its own containerd, and runs
# the command once in each, all at once (e2e/lanes.ts shares the suite's files between them); its
# exit status is the first non-zero one of theirs. Inside, each finds (environment):
#   PKO_TESTBED_NETNS        the namespace's name (under /run/netns)
#   PKO_TESTBED_DIR          the bed's directory (containerd's root and state, kubelet dirs, logs)
#   PKO_TESTBED_NODE_IP      the node's address, on the namespace's lo (10.200.0.1)
#   PKO_TESTBED_CONTAINERD   containerd's socket
#   PKO_TESTBED_CGROUP_ROOT  the cgroup (in every v1 hierarchy) that kubelet puts pods under
#   PKO_TESTBED_LANE, PKO_TESTBED_LANES   which bed this is (1..N), and N
#   PKO_TESTBED_RUN_DIR      the run's directory, shared by its beds
#
# The namespace has no route out: every address a test reaches (API server, git and Flux servers,
# pods, Services, CoreDNS; the hooks on its loopback) exists only inside it. docs/testbed.md has
# the picture. Runs on one machine take turns (a lock in /tmp).
# PKO_TESTBED_KEEP=1 keeps the run's directory (logs) after cleanup.
set -uo pipefail

[ "$(id -u)" = 0 ] || { echo "run-in-testbed: the real node needs root" >&2; exit 2; }
BEDS=1
if [ "${1:-}" = --beds ]; then BEDS=${2:-}; shift 2 || true; fi
[[ $BEDS =~ ^[1-4]$ ]] || { echo "run-in-testbed: --beds takes 1 to 4" >&2; exit 2; }
[ $# -gt 0 ] || { echo "usage: run-in-testbed.sh [--beds N] <command> [args...]" >&2; exit 2; }
for tool in ip nsenter containerd runc iptables-save; do
  command -v "$tool" >/dev/null || { echo "run-in-testbed: $tool is missing (.ci/run installs the node's Debian packages)" >&2; exit 2; }
done

# One test bed at a time on a machine: a run's cleanup and its check of the host would take another
# run's namespaces, links and mounts for its own leftovers.
LOCK=/tmp/pko-testbed.lock
exec 9>"$LOCK"
if ! flock -n 9; then
  echo "run-in-testbed: another test bed runs on this machine; waiting for it ($LOCK)" >&2
  flock 9
fi

# crictl (from the toolchain) removes the pods at cleanup.
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CRICTL="$(bash "$HERE/../../toolchain/build.sh" --print-env | sed -n 's/^export PKO_TOOLCHAIN_CRICTL_BIN=//p')/crictl"

# Bed i: namespace and cgroup root pko-e2e-<pid>-<i>, directory $DIR/bed-<i>. Each bed is its own
# network, so every bed's node has the same address.
RUN="pko-e2e-$$"
NODE_IP=10.200.0.1
DIR=$(mktemp -d "/tmp/${RUN}.XXXX")
bed_name() { echo "$RUN-$1"; }
bed_dir() { echo "$DIR/bed-$1"; }
bed_sock() { echo "$(bed_dir "$1")/containerd/containerd.sock"; }
SYSCTLS=(vm.overcommit_memory kernel.panic kernel.panic_on_oops)
IMAGE_STORAGE="${PKO_TOOLCHAIN_DIR:-$HOME/.cache/pko-toolchain}/images/storage"

# --- the host as found ---------------------------------------------------------------------------
host_state() {
  echo "## netns"; ip netns list 2>/dev/null | awk '{print $1}' | sort
  echo "## links"; ip -o link show | sed -E 's/^[0-9]+: //; s/ (qlen|state|mode|group) [^ ]+//g' | awk '{print $1, $2}' | sort
  echo "## iptables"; iptables-save 2>/dev/null | grep -v '^#' | sed -E 's/\[[0-9]+:[0-9]+\]//' | sort
  # The image builder's own overlay mounts (npm run testbed:images, maybe running beside this run
  # from another checkout) come and go outside the test network; the builder removes its own.
  echo "## mounts"; awk '{print $5}' /proc/self/mountinfo | grep -v "^$IMAGE_STORAGE/" | sort
  echo "## sysctls"; for s in "${SYSCTLS[@]}"; do echo "$s=$(sysctl -n "$s")"; done
}
host_state >"$DIR/host-before"
declare -A SYSCTL_BEFORE
for s in "${SYSCTLS[@]}"; do SYSCTL_BEFORE[$s]=$(sysctl -n "$s"); done
NETNS_MOUNTED_BEFORE=false
mountpoint -q /run/netns 2>/dev/null && NETNS_MOUNTED_BEFORE=true

cgroup_dirs() { # every v1 hierarchy's copy of bed $1's cgroup root
  local h
  for h in /sys/fs/cgroup/*/; do
    [ -d "$h" ] && [ "$(basename "$h")" != unified ] && echo "${h%/}/$(bed_name "$1")"
  done
}

# Bed $1's pods and processes.
bed_down() {
  local name sock p
  name=$(bed_name "$1") sock=$(bed_sock "$1")
  # Pods first, while containerd still runs: stops their containers and removes their namespaces.
  if [ -S "$sock" ] && [ -x "$CRICTL" ]; then
    nsenter --net="/run/netns/$name" "$CRICTL" --runtime-endpoint "unix://$sock" --timeout 20s rmp -fa >/dev/null 2>&1
  fi
  # Then every process left: the namespace's own (containerd, shims, stray test-bed processes) and
  # every process in the bed's cgroups (containers live in pod namespaces of their own).
  for _ in 1 2 3; do
    p=$( { ip netns pids "$name" 2>/dev/null; for d in $(cgroup_dirs "$1"); do find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null; done; } | sort -u)
    [ -n "$p" ] || break
    kill -9 $p 2>/dev/null
    sleep 0.5
  done
}

cleanup() {
  local rc=$? d
  trap - EXIT INT TERM HUP
  for i in $(seq 1 "$BEDS"); do bed_down "$i"; done
  # Mounts under the run's directory (overlay snapshots, pod volumes), deepest first.
  awk -v d="$DIR/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r | while read -r m; do
    umount -l "$m" 2>/dev/null
  done
  # Pod network namespaces that containerd made (cni-…), then ours.
  for d in $(ip netns list 2>/dev/null | awk '{print $1}'); do
    grep -qx "$d" <(sed -n '/^## netns$/,/^## /p' "$DIR/host-before") || [[ $d == "$RUN"-* ]] || ip netns del "$d" 2>/dev/null
  done
  for i in $(seq 1 "$BEDS"); do
    ip netns del "$(bed_name "$i")" 2>/dev/null
    # Cgroups, depth first.
    for d in $(cgroup_dirs "$i"); do
      [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null
    done
  done
  for s in "${SYSCTLS[@]}"; do sysctl -qw "$s=${SYSCTL_BEFORE[$s]}"; done
  if ! $NETNS_MOUNTED_BEFORE && mountpoint -q /run/netns 2>/dev/null; then umount /run/netns 2>/dev/null; fi
  host_state >"$DIR/host-after"
  if ! diff -u "$DIR/host-before" "$DIR/host-after" >"$DIR/host-diff"; then
    echo "run-in-testbed: the host is not as it was found:" >&2
    cat "$DIR/host-diff" >&2
    [ "$rc" = 0 ] && rc=3
  fi
  if [ "${PKO_TESTBED_KEEP:-}" = 1 ]; then
    echo "run-in-testbed: kept $DIR" >&2
  else
    rm -rf "$DIR" 2>/dev/null || echo "run-in-testbed: could not remove $DIR" >&2
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

# --- the beds ------------------------------------------------------------------------------------
PAUSE_IMAGE=${PKO_TESTBED_PAUSE_IMAGE:-localhost/pko-testbed/pause:1.0} # e2e/testbed/images/refs.ts: IMAGE_REFS.pause

# Bed $1: its namespace (the node's address on its lo: this kernel has no dummy link type; pods reach
# it through the bridge's gateway and local delivery), the cgroup root kubelet wants in every v1
# hierarchy, and its containerd.
bed_up() {
  local name dir sock d
  name=$(bed_name "$1") dir=$(bed_dir "$1") sock=$(bed_sock "$1")
  ip netns add "$name" || return 1
  ip -n "$name" link set lo up
  ip -n "$name" addr add "$NODE_IP/32" dev lo
  for d in $(cgroup_dirs "$1"); do
    mkdir -p "$d"
    case "$d" in
      /sys/fs/cgroup/cpuset/*)
        cat /sys/fs/cgroup/cpuset/cpuset.cpus >"$d/cpuset.cpus"
        cat /sys/fs/cgroup/cpuset/cpuset.mems >"$d/cpuset.mems" ;;
    esac
  done
  mkdir -p "$dir/containerd" "$dir/cni/net.d" "$dir/cni/ipam"
  cat >"$dir/cni/net.d/10-pko-e2e.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "pko-e2e",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "hairpinMode": true,
      "ipMasq": false,
      "ipam": {
        "type": "host-local",
        "dataDir": "$dir/cni/ipam",
        "ranges": [[{ "subnet": "10.200.1.0/24", "gateway": "10.200.1.1" }]],
        "routes": [{ "dst": "0.0.0.0/0" }]
      }
    },
    { "type": "portmap", "capabilities": { "portMappings": true } }
  ]
}
EOF
  cat >"$dir/containerd/config.toml" <<EOF
version = 2
root = "$dir/containerd/root"
state = "$dir/containerd/state"
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # root here lacks CAP_SYS_RESOURCE: containers keep the runtime's oom_score_adj floor
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni/net.d"
EOF
  # nsenter, not `ip netns exec`: the latter remounts /sys, which containerd then fails on.
  nsenter --net="/run/netns/$name" containerd --config "$dir/containerd/config.toml" >"$dir/containerd.log" 2>&1 &
  disown
  for _ in $(seq 1 100); do
    [ -S "$sock" ] && ctr -a "$sock" version >/dev/null 2>&1 && break
    sleep 0.1
  done
  ctr -a "$sock" version >/dev/null 2>&1 || { echo "run-in-testbed: containerd did not start:" >&2; tail -20 "$dir/containerd.log" >&2; return 1; }
}
for i in $(seq 1 "$BEDS"); do bed_up "$i" || exit 1; done

# --- the command, once per bed -------------------------------------------------------------------
pids=()
for i in $(seq 1 "$BEDS"); do
  nsenter --net="/run/netns/$(bed_name "$i")" env \
    PKO_TESTBED_NETNS="$(bed_name "$i")" PKO_TESTBED_DIR="$(bed_dir "$i")" PKO_TESTBED_NODE_IP="$NODE_IP" \
    PKO_TESTBED_CONTAINERD="$(bed_sock "$i")" PKO_TESTBED_CGROUP_ROOT="/$(bed_name "$i")" \
    PKO_TESTBED_LANE="$i" PKO_TESTBED_LANES="$BEDS" PKO_TESTBED_RUN_DIR="$DIR" \
    "$@" &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do
  wait "$p"
  rc=$?
  [ "$status" = 0 ] && status=$rc
done
exit "$status"
