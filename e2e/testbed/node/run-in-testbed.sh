#!/usr/bin/env bash
# Runs a command (the e2e suite) inside the test bed's own network namespace, with containerd
# running in it, and puts the host back exactly as it was found afterwards, also when the command
# fails or is interrupted.
#
#   bash e2e/testbed/node/run-in-testbed.sh <command> [args...]
#
# Inside, the command finds (environment):
#   PKO_TESTBED_NETNS        the namespace's name (under /run/netns)
#   PKO_TESTBED_DIR          the run's directory (containerd's root and state, kubelet dirs, logs)
#   PKO_TESTBED_NODE_IP      the node's address, on the namespace's lo (10.200.0.1)
#   PKO_TESTBED_CONTAINERD   containerd's socket
#   PKO_TESTBED_CGROUP_ROOT  the cgroup (in every v1 hierarchy) that kubelet puts pods under
#
# The namespace has no route out: every address a test reaches (API server, git and Flux servers,
# pods, Services, CoreDNS; the hooks on its loopback) exists only inside it. docs/testbed.md has
# the picture. Runs on one machine take turns (a lock in /tmp).
# PKO_TESTBED_KEEP=1 keeps the run's directory (logs) after cleanup.
set -uo pipefail

[ "$(id -u)" = 0 ] || { echo "run-in-testbed: the real node needs root" >&2; exit 2; }
[ $# -gt 0 ] || { echo "usage: run-in-testbed.sh <command> [args...]" >&2; exit 2; }
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

NAME="pko-e2e-$$"
NODE_IP=10.200.0.1
DIR=$(mktemp -d "/tmp/${NAME}.XXXX")
CGROUP_ROOT="/$NAME"
SOCK="$DIR/containerd/containerd.sock"
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

cgroup_dirs() { # every v1 hierarchy's copy of our cgroup root
  local h
  for h in /sys/fs/cgroup/*/; do
    [ -d "$h" ] && [ "$(basename "$h")" != unified ] && echo "${h%/}$CGROUP_ROOT"
  done
}

cleanup() {
  local rc=$? d p
  trap - EXIT INT TERM HUP
  # Pods first, while containerd still runs: stops their containers and removes their namespaces.
  if [ -S "$SOCK" ] && [ -x "$CRICTL" ]; then
    nsenter --net="/run/netns/$NAME" "$CRICTL" --runtime-endpoint "unix://$SOCK" --timeout 20s rmp -fa >/dev/null 2>&1
  fi
  # Then every process left: the namespace's own (containerd, shims, stray test-bed processes) and
  # every process in our cgroups (containers live in pod namespaces of their own).
  for _ in 1 2 3; do
    p=$( { ip netns pids "$NAME" 2>/dev/null; for d in $(cgroup_dirs); do find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null; done; } | sort -u)
    [ -n "$p" ] || break
    kill -9 $p 2>/dev/null
    sleep 0.5
  done
  # Mounts under the run's directory (overlay snapshots, pod volumes), deepest first.
  awk -v d="$DIR/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r | while read -r m; do
    umount -l "$m" 2>/dev/null
  done
  # Pod network namespaces that containerd made (cni-…), then ours.
  for d in $(ip netns list 2>/dev/null | awk '{print $1}'); do
    grep -qx "$d" <(sed -n '/^## netns$/,/^## /p' "$DIR/host-before") || [ "$d" = "$NAME" ] || ip netns del "$d" 2>/dev/null
  done
  ip netns del "$NAME" 2>/dev/null
  # Cgroups, depth first.
  for d in $(cgroup_dirs); do
    [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null
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

# --- the namespace -------------------------------------------------------------------------------
ip netns add "$NAME" || exit 1
ip -n "$NAME" link set lo up
# The node's address sits on lo: this kernel has no dummy link type. Pods reach it through the
# bridge's gateway and local delivery.
ip -n "$NAME" addr add "$NODE_IP/32" dev lo

# kubelet refuses to start unless its cgroup root exists in every v1 hierarchy.
for d in $(cgroup_dirs); do
  mkdir -p "$d"
  case "$d" in
    /sys/fs/cgroup/cpuset/*)
      cat /sys/fs/cgroup/cpuset/cpuset.cpus >"$d/cpuset.cpus"
      cat /sys/fs/cgroup/cpuset/cpuset.mems >"$d/cpuset.mems" ;;
  esac
done

# --- containerd ----------------------------------------------------------------------------------
mkdir -p "$DIR/containerd" "$DIR/cni/net.d" "$DIR/cni/ipam"
cat >"$DIR/cni/net.d/10-pko-e2e.conflist" <<EOF
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
        "dataDir": "$DIR/cni/ipam",
        "ranges": [[{ "subnet": "10.200.1.0/24", "gateway": "10.200.1.1" }]],
        "routes": [{ "dst": "0.0.0.0/0" }]
      }
    },
    { "type": "portmap", "capabilities": { "portMappings": true } }
  ]
}
EOF
PAUSE_IMAGE=${PKO_TESTBED_PAUSE_IMAGE:-localhost/pko-testbed/pause:1.0} # e2e/testbed/images/refs.ts: IMAGE_REFS.pause
cat >"$DIR/containerd/config.toml" <<EOF
version = 2
root = "$DIR/containerd/root"
state = "$DIR/containerd/state"
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$SOCK"
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
    conf_dir = "$DIR/cni/net.d"
EOF
# nsenter, not `ip netns exec`: the latter remounts /sys, which containerd then fails on.
nsenter --net="/run/netns/$NAME" containerd --config "$DIR/containerd/config.toml" >"$DIR/containerd.log" 2>&1 &
disown
for _ in $(seq 1 100); do
  [ -S "$SOCK" ] && ctr -a "$SOCK" version >/dev/null 2>&1 && break
  sleep 0.1
done
ctr -a "$SOCK" version >/dev/null 2>&1 || { echo "run-in-testbed: containerd did not start:" >&2; tail -20 "$DIR/containerd.log" >&2; exit 1; }

# --- the command ---------------------------------------------------------------------------------
nsenter --net="/run/netns/$NAME" env \
  PKO_TESTBED_NETNS="$NAME" PKO_TESTBED_DIR="$DIR" PKO_TESTBED_NODE_IP="$NODE_IP" \
  PKO_TESTBED_CONTAINERD="$SOCK" PKO_TESTBED_CGROUP_ROOT="$CGROUP_ROOT" \
  "$@" &
child=$!
wait "$child"
exit $?
