#!/usr/bin/env bash
# Provide kube-apiserver and etcd for the integration tests, envtest style.
#
# Prints the folder that holds both binaries (use it as KUBEBUILDER_ASSETS).
# Where KUBEBUILDER_ASSETS is already set and holds both, that folder is used as is.
# Otherwise, on a Debian bookworm machine: etcd comes from the etcd-server package and
# kube-apiserver is built once from Debian's kubernetes source package (1.20), then cached
# in ${TRAINOP_CACHE:-~/.cache/trainop}/assets so later runs take seconds.
set -euo pipefail

log() { echo "test-assets: $*" >&2; }

if [[ -n "${KUBEBUILDER_ASSETS:-}" && -x "$KUBEBUILDER_ASSETS/kube-apiserver" && -x "$KUBEBUILDER_ASSETS/etcd" ]]; then
  echo "$KUBEBUILDER_ASSETS"
  exit 0
fi

cache="${TRAINOP_CACHE:-$HOME/.cache/trainop}"
assets="$cache/assets"
mkdir -p "$assets"
if [[ -x "$assets/kube-apiserver" && -x "$assets/etcd" ]]; then
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

if [[ ! -x "$assets/kube-apiserver" ]]; then
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
  log "building kube-apiserver in $tree (takes a few minutes)"
  # The Makefile generates files a plain `go build` would miss.
  (cd "$tree" && GOFLAGS=-mod=vendor GO111MODULE=on make WHAT=cmd/kube-apiserver >&2)
  cp "$tree/_output/bin/kube-apiserver" "$assets/kube-apiserver"
  rm -rf "$build"
fi

echo "$assets"
