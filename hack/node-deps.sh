#!/usr/bin/env bash
# Debian packages the real-node tests need: runc (containerd 2 is built by
# hack/test-assets.sh: Debian's 1.6 is too old for current kubelets), CNI plugins (bridge,
# host-local, loopback, portmap), iptables and conntrack for kube-proxy,
# dnsmasq for cluster DNS, gcc to build the pause and nslookup programs, busybox for the
# tools image, debootstrap and buildah (no daemon) to build the manager image from the
# Dockerfile, and sshd for the SSH example. Nothing is started here: the tests start and
# stop every process themselves.
set -euo pipefail
# TRAINOP_REAL_NODE=0: no real-node tests here (they skip and say so); nothing to install.
[[ "${TRAINOP_REAL_NODE:-1}" != 0 ]] || exit 0
if [[ $(id -u) -ne 0 ]] && ! command -v sudo >/dev/null; then
  echo "node-deps: not root and no sudo: the real-node tests will skip" >&2
  exit 0
fi
need=()
for cmd in runc iptables conntrack dnsmasq gcc busybox debootstrap buildah ssh-keygen; do
  command -v "$cmd" >/dev/null || need+=("$cmd")
done
[[ -x /usr/lib/cni/bridge ]] || need+=(cni)
[[ -x /usr/sbin/sshd ]] || need+=(sshd)
(( ${#need[@]} )) || exit 0
source "$(dirname "$0")/apt.sh"
apt_get update -qq >&2
# A policy-rc.d that refuses keeps the packages from starting sshd on the host
# (pods run sshd from the host's /usr for MPI's SSH design; nothing else needs it).
policy=/usr/sbin/policy-rc.d
own_policy=""
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\nexit 101\n' | $apt_sudo tee "$policy" >/dev/null
  $apt_sudo chmod 0755 "$policy"
  own_policy=1
fi
status=0
apt_get install -y -qq --no-install-recommends runc containernetworking-plugins \
  iptables conntrack dnsmasq-base gcc libc6-dev busybox-static debootstrap buildah \
  openssh-server openssh-client >&2 || status=$?
[[ -z $own_policy ]] || $apt_sudo rm -f "$policy"
exit "$status"
