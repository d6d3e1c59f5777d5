#!/usr/bin/env bash
# Provide etcd and the Kubernetes binaries for the integration and real-node tests.
#
# Prints the folder that holds them (use it as KUBEBUILDER_ASSETS).
# Where KUBEBUILDER_ASSETS is already set and holds them all, that folder is used as is.
# Otherwise, on a Debian bookworm machine: etcd comes from the etcd-server package and
# kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and kube-proxy are built
# once from Debian's kubernetes source package (1.20), then cached in
# ${TRAINOP_CACHE:-~/.cache/trainop}/assets so later runs take seconds (the first build
# takes about 15 minutes on two cores).
#   TRAINOP_REAL_NODE=0  build kube-apiserver only (no real-node tests will run)
set -euo pipefail

log() { echo "test-assets: $*" >&2; }

binaries=(kube-apiserver)
if [[ "${TRAINOP_REAL_NODE:-1}" != 0 ]]; then
  binaries+=(kube-controller-manager kube-scheduler kubelet kube-proxy)
fi

# The binaries missing from folder $1 (etcd included), one per line.
missing() {
  local b
  for b in etcd "${binaries[@]}"; do
    [[ -x "$1/$b" ]] || echo "$b"
  done
}

if [[ -n "${KUBEBUILDER_ASSETS:-}" && -z "$(missing "$KUBEBUILDER_ASSETS")" ]]; then
  echo "$KUBEBUILDER_ASSETS"
  exit 0
fi

cache="${TRAINOP_CACHE:-$HOME/.cache/trainop}"
assets="$cache/assets"
mkdir -p "$assets"
if [[ -z "$(missing "$assets")" ]]; then
  echo "$assets"
  exit 0
fi

source "$(dirname "$0")/apt.sh"
sudo=$apt_sudo

# Debian's source entries: same archive and key as the binary entries of bookworm main.
src=/etc/apt/sources.list.d/trainop-debian-src.sources
if [[ ! -f $src ]]; then
  log "adding a deb-src entry for bookworm main"
  $sudo tee "$src" >/dev/null <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
fi
log "installing build tools and etcd (apt)"
apt_get update -qq >&2
apt_get install -y -qq --no-install-recommends golang-go rsync etcd-server dpkg-dev make \
  golang-github-modern-go-reflect2-dev golang-github-json-iterator-go-dev >&2

if [[ ! -x "$assets/etcd" ]]; then
  cp "$(command -v etcd || echo /usr/bin/etcd)" "$assets/etcd"
fi

mapfile -t build_these < <(missing "$assets" | grep -v '^etcd$' || true)
if (( ${#build_these[@]} )); then
  build="$cache/build"
  rm -rf "$build"
  mkdir -p "$build"
  log "fetching Debian's kubernetes source package"
  (cd "$build" && apt-get source -qq kubernetes >&2)
  tree=$(find "$build" -maxdepth 1 -mindepth 1 -type d -name 'kubernetes-*' | head -1)
  [[ -n "$tree" ]] || { log "kubernetes source tree not found in $build"; exit 1; }
  # Kubernetes 1.20 vendors reflect2 1.0.1, whose map iteration crashes the API server
  # (SIGSEGV in aeshashbody) when built with Go >= 1.18. Debian ships the fixed releases
  # (reflect2 1.0.2, json-iterator 1.1.12): put them in place of the vendored copies.
  gocode=/usr/share/gocode/src/github.com
  for dep in modern-go/reflect2 json-iterator/go; do
    rm -rf "$tree/vendor/github.com/$dep"
    cp -r "$gocode/$dep" "$tree/vendor/github.com/$dep"
    find "$tree/vendor/github.com/$dep" -name '*_test.go' -delete
  done
  what=$(printf 'cmd/%s ' "${build_these[@]}")
  log "building ${build_these[*]} in $tree (takes minutes: about 15 for all five)"
  # The Makefile generates files a plain `go build` would miss.
  (cd "$tree" && GOFLAGS=-mod=vendor GO111MODULE=on make WHAT="${what% }" >&2)
  for b in "${build_these[@]}"; do
    cp "$tree/_output/bin/$b" "$assets/$b"
  done
  rm -rf "$build"
fi

echo "$assets"
