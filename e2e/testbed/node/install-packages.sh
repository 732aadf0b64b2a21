#!/usr/bin/env bash
# Installs the real node's pieces that come from Debian's packages (docs/testbed.md says why these
# and not the Go module proxy): containerd with its CRI plugin, runc, the CNI plugins, iptables and
# conntrack for kube-proxy, and buildah and mmdebstrap for the images. Skips what is installed.
set -euo pipefail
PACKAGES=(containerd runc containernetworking-plugins iptables conntrack buildah mmdebstrap uidmap gcc libc6-dev)
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
