#!/usr/bin/env bash
# Installs the real node's pieces that come from Debian's packages (docs/testbed.md says why these
# and not the Go module proxy): containerd with its CRI plugin, runc, the CNI plugins, iptables and
# conntrack for kube-proxy, buildah and mmdebstrap for the images, and openssh-server for the SSH git
# server of the tests (e2e/testbed/sshd-git-server.ts runs its own sshd; on a host with systemd,
# Debian's package also enables and starts its ssh.service, which the tests do not use: docs/testbed.md).
# Skips what is installed.
set -euo pipefail
PACKAGES=(containerd runc containernetworking-plugins iptables conntrack buildah mmdebstrap uidmap gcc libc6-dev openssh-server)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "installed already: ${PACKAGES[*]}"
  exit 0
fi
[ "$(id -u)" = 0 ] || { echo "install-packages: needs root to install ${missing[*]}" >&2; exit 1; }
echo "installing: ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
