#!/usr/bin/env bash
# Installs the Debian packages the kubelet node of the e2e needs (TestKubeletNode,
# node_host_test.go): containerd and runc (the container runtime; no systemd unit is used, the
# test starts containerd itself), the CNI plugins (bridge, host-local, portmap, loopback),
# busybox-static (the workload pods' image) and iptables (the Service IP's DNAT inside the
# node's network namespace). Only what is missing, with apt-get, as root; as another user it
# says so and installs nothing (the test then skips).
set -euo pipefail
PACKAGES=(containerd runc containernetworking-plugins busybox-static iptables)

if [[ $(id -u) != 0 ]]; then
  echo "install-node-packages.sh: skipped: installing ${PACKAGES[*]} needs root (so does the node e2e)"
  exit 0
fi
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
[[ ${#missing[@]} == 0 ]] && exit 0
echo "install-node-packages.sh: apt-get install ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q "${missing[@]}" >/dev/null ||
  { apt-get update -q >/dev/null && apt-get install -y -q "${missing[@]}" >/dev/null; }
