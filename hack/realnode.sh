#!/usr/bin/env bash
# realnode.sh installs, as root and from Debian's packages, what the real-node tests
# (test/kubelet) need besides the Kubernetes binaries of hack/testbin.sh: containerd and its
# client ctr, runc, the CNI plugins (bridge, host-local, loopback under /usr/lib/cni), iptables
# and iproute2. It installs nothing that is already there, and nothing when not root: the tests
# then skip, saying why (or fail, with REQUIRE_KUBELET_TEST=1 as in CI).
#
# It only installs: containerd is not started as a service (the tests run their own, with every
# folder in a temporary one). Debian's package starts no daemon where there is no init system;
# where there is one, this script stops and disables the service it started.
set -euo pipefail

want=()
command -v containerd >/dev/null 2>&1 || want+=(containerd)
command -v runc >/dev/null 2>&1 || want+=(runc)
[[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local && -x /usr/lib/cni/loopback ]] || want+=(containernetworking-plugins)
command -v iptables >/dev/null 2>&1 || want+=(iptables)
command -v ip >/dev/null 2>&1 || want+=(iproute2)
((${#want[@]})) || exit 0

if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
  echo "realnode: the real-node tests need ${want[*]} (as root: apt-get install ${want[*]}); they skip without" >&2
  exit 0
fi
echo "realnode: installing ${want[*]} from Debian's packages" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null
if [[ " ${want[*]} " == *" containerd "* ]] && command -v systemctl >/dev/null 2>&1 && systemctl is-active -q containerd 2>/dev/null; then
  systemctl disable --now containerd >/dev/null 2>&1 || true
fi
