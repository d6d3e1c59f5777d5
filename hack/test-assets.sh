#!/usr/bin/env bash
# Provide etcd and the Kubernetes binaries for the integration and real-node tests.
#
# Prints the folder that holds them (use it as KUBEBUILDER_ASSETS, envtest's convention).
# Where KUBEBUILDER_ASSETS is already set and holds them all, that folder is used as is.
# Otherwise each is built once from the Go module proxy, cached by module and version in
# ${TRAINOP_CACHE:-~/.cache/trainop}/go/MODULE@VERSION, and linked into one folder per
# combination of versions (${TRAINOP_CACHE}/assets/...), so later runs take a second:
#   from k8s.io/kubernetes: kube-apiserver and kubectl (every suite) and, for the real node,
#     kube-controller-manager, kube-scheduler, kubelet and kube-proxy;
#   from go.etcd.io/etcd/server/v3: etcd;
#   from github.com/containerd/containerd/v2, for the real node: containerd,
#     containerd-shim-runc-v2 and ctr (kubelets from 1.36 need containerd 2);
#   from github.com/kubeflow/training-operator: upstream's operator, as
#     training-operator-VERSION (the differential suite and bench/ run it beside trainop);
#   from sigs.k8s.io/controller-tools: controller-gen (upstream's CRD generator; `make crds`
#     and a test make the pod template's schema with it from the Kubernetes API types);
#   from sigs.k8s.io/kueue: Kueue's manager, as kueue-VERSION, its CLI, as
#     kueuectl-VERSION, and beside them
#     kueue-VERSION-config, the CRDs, webhook configuration and manager Configuration of
#     that release's config/
#     (the Kueue suite installs them on its API server);
#   from github.com/kubeflow/mpi-operator: mpi-operator, as mpi-operator-VERSION (it runs
#     v2beta1 MPIJobs beside trainop's, on trainop's CRD; its CRD is read from its module).
# k8s.io/kubernetes is not meant to be required by another module: a small go.mod made here
# requires it and replaces each k8s.io/* staging module with its v0.X.Y release (the way
# projects that embed Kubernetes build it). A cold build of everything (empty Go build and
# module caches) takes about 12 minutes on two cores.
#   TRAINOP_KUBE_VERSION        the Kubernetes release (default below)
#   TRAINOP_ETCD_VERSION        the etcd release (default below)
#   TRAINOP_CONTAINERD_VERSION  the containerd release (default below)
#   TRAINOP_UPSTREAM_VERSION    upstream's training-operator release (default below)
#   TRAINOP_CONTROLLER_TOOLS_VERSION  the controller-gen release (default below)
#   TRAINOP_KUEUE_VERSION       the Kueue release (default below)
#   TRAINOP_MPI_OPERATOR_VERSION  mpi-operator's release (default below)
#   TRAINOP_REAL_NODE=0         no real-node binaries (the real-node tests will skip)
set -euo pipefail

kube_version=${TRAINOP_KUBE_VERSION:-v1.37.2}
etcd_version=${TRAINOP_ETCD_VERSION:-v3.7.3}
containerd_version=${TRAINOP_CONTAINERD_VERSION:-v2.4.2}
upstream_version=${TRAINOP_UPSTREAM_VERSION:-v1.9.4}
controller_tools_version=${TRAINOP_CONTROLLER_TOOLS_VERSION:-v0.23.0}
kueue_version=${TRAINOP_KUEUE_VERSION:-v0.19.2}
mpi_operator_version=${TRAINOP_MPI_OPERATOR_VERSION:-v0.8.2}
real_node=${TRAINOP_REAL_NODE:-1}

log() { echo "test-assets: $*" >&2; }

kube=(kube-apiserver kubectl)
upstream=("training-operator-$upstream_version" "controller-gen-$controller_tools_version")
kueue_config="kueue-$kueue_version-config"
kueue=("kueue-$kueue_version" "kueuectl-$kueue_version" "$kueue_config/manager-config.yaml")
mpi_operator=("mpi-operator-$mpi_operator_version")
containerd=()
if [[ $real_node != 0 ]]; then
  kube+=(kube-controller-manager kube-scheduler kubelet kube-proxy)
  containerd=(containerd containerd-shim-runc-v2 ctr)
fi

# The names of $2... that are not executables in folder $1, one per line.
missing() {
  local dir=$1 b
  shift
  for b in "$@"; do
    # a binary, or a file of a release's manifests
    [[ -x "$dir/$b" || ($b == *.yaml && -f "$dir/$b") ]] || echo "$b"
  done
}

all=(etcd "${kube[@]}" "${upstream[@]}" "${kueue[@]}" "${mpi_operator[@]}" "${containerd[@]}")
if [[ -n "${KUBEBUILDER_ASSETS:-}" && -z "$(missing "$KUBEBUILDER_ASSETS" "${all[@]}")" ]]; then
  echo "$KUBEBUILDER_ASSETS"
  exit 0
fi

cache="${TRAINOP_CACHE:-$HOME/.cache/trainop}"
assets="$cache/assets/kubernetes-$kube_version-etcd-$etcd_version"
[[ $real_node == 0 ]] || assets+="-containerd-$containerd_version"
mkdir -p "$assets"
if [[ -z "$(missing "$assets" "${all[@]}")" ]]; then
  echo "$assets"
  exit 0
fi

command -v go >/dev/null || { log "go is not installed: it builds the Kubernetes binaries"; exit 1; }
# Module zips have no VCS data to stamp; the toolchain is the machine's own.
export GOFLAGS="${GOFLAGS:-} -buildvcs=false" GOTOOLCHAIN=local

# The name `go build` gives package $1's binary: its last path element, or the one before
# a major version suffix (go.etcd.io/etcd/server/v3 makes `server`).
go_binary_name() {
  local pkg=$1
  [[ ! ${pkg##*/} =~ ^v[0-9]+$ ]] || pkg=${pkg%/*}
  echo "${pkg##*/}"
}

# Build module MODULE at VERSION into $cache/go/MODULE@VERSION, then link its binaries into
# $assets. Arguments: MODULE VERSION LDFLAGS TAGS PACKAGE=BINARY...; extra go.mod lines (the
# replaces) on stdin. The go.mod is made in a fresh folder; one `go build` makes every binary
# (both cores share the work), and each is moved under its cached name only once all are
# built, so an interrupted build leaves nothing half-written there.
build_module() {
  local module=$1 version=$2 ldflags=$3 tags=$4
  shift 4
  local out="$cache/go/${module//\//_}@$version" dir pair todo=()
  mkdir -p "$out"
  for pair in "$@"; do
    [[ -x "$out/${pair#*=}" ]] || todo+=("$pair")
  done
  if (( ${#todo[@]} )); then
    dir=$(mktemp -d "$cache/build.XXXXXX")
    {
      printf 'module trainop.local/testassets\n\ngo %s\n\nrequire %s %s\n' \
        "$(go env GOVERSION | sed 's/^go//')" "$module" "$version"
      cat
    } >"$dir/go.mod"
    (
      cd "$dir"
      local pkgs=("${todo[@]%%=*}")
      # go.sum entries for every package the binaries import, then the build itself
      go get "${pkgs[@]/%/@$version}" >&2
      log "building ${pkgs[*]} at $version (cached in $out)"
      mkdir bin
      go build -trimpath -tags "$tags" -ldflags "$ldflags" -o bin/ "${pkgs[@]}" >&2
      for pair in "${todo[@]}"; do
        mv "bin/$(go_binary_name "${pair%%=*}")" "$out/${pair#*=}"
      done
    )
    rm -rf "$dir"
  fi
  for pair in "$@"; do
    ln -sfn "$out/${pair#*=}" "$assets/${pair#*=}"
  done
}

if [[ -n "$(missing "$assets" etcd)" ]]; then
  build_module go.etcd.io/etcd/server/v3 "$etcd_version" "-s -w" "" \
    go.etcd.io/etcd/server/v3=etcd </dev/null
fi

if [[ -n "$(missing "$assets" "${upstream[@]}")" ]]; then
  # its own go.mod pins every dependency; it replaces nothing
  build_module github.com/kubeflow/training-operator "$upstream_version" "-s -w" "" \
    "github.com/kubeflow/training-operator/cmd/training-operator.v1=${upstream[0]}" </dev/null
  build_module sigs.k8s.io/controller-tools "$controller_tools_version" "-s -w" "" \
    "sigs.k8s.io/controller-tools/cmd/controller-gen=${upstream[1]}" </dev/null
fi

if [[ -n "$(missing "$assets" "${kueue[@]}")" ]]; then
  # its own go.mod pins every dependency; it replaces nothing
  build_module sigs.k8s.io/kueue "$kueue_version" "-s -w" "" \
    "sigs.k8s.io/kueue/cmd/kueue=${kueue[0]}" "sigs.k8s.io/kueue/cmd/kueuectl=${kueue[1]}" \
    </dev/null
  # The manifests are in the module's zip, which `go get` above put in the module cache.
  # Copied, not linked: the module cache is read-only and may be cleaned.
  config="$cache/go/sigs.k8s.io_kueue@$kueue_version/config"
  if [[ ! -f $config/manager-config.yaml ]]; then
    src=$(cd "$cache" && go mod download -json "sigs.k8s.io/kueue@$kueue_version" \
      | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
    rm -rf "$config.tmp" "$config"
    mkdir -p "$config.tmp/crd"
    cp "$src"/config/components/crd/bases/*.yaml "$config.tmp/crd/"
    cp "$src/config/components/webhook/manifests.yaml" "$config.tmp/webhooks.yaml"
    # the release's Configuration as it ships (its integrations.frameworks)
    cp "$src/config/components/manager/controller_manager_config.yaml" \
      "$config.tmp/manager-config.yaml"
    chmod -R u+w "$config.tmp"
    mv "$config.tmp" "$config"
  fi
  ln -sfn "$config" "$assets/$kueue_config"
fi

if [[ -n "$(missing "$assets" "${mpi_operator[@]}")" ]]; then
  # its own go.mod pins every dependency (and asks for Go 1.26); it replaces nothing
  build_module github.com/kubeflow/mpi-operator "$mpi_operator_version" "-s -w" "" \
    "github.com/kubeflow/mpi-operator/cmd/mpi-operator=${mpi_operator[0]}" </dev/null
fi

if [[ -n "$(missing "$assets" "${containerd[@]}")" ]]; then
  # no btrfs snapshotter: it needs C headers, and the node uses overlayfs
  build_module github.com/containerd/containerd/v2 "$containerd_version" \
    "-s -w -X github.com/containerd/containerd/v2/version.Version=$containerd_version" \
    "no_btrfs urfave_cli_no_docs" \
    $(for b in "${containerd[@]}"; do echo "github.com/containerd/containerd/v2/cmd/$b=$b"; done) \
    </dev/null
fi

if [[ -n "$(missing "$assets" "${kube[@]}")" ]]; then
  # The staging modules that k8s.io/kubernetes replaces with its own folders, each mapped to
  # its published release: v1.X.Y of Kubernetes is v0.X.Y of each of them.
  gomod=$(cd "$cache" && go mod download -json "k8s.io/kubernetes@$kube_version" \
    | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
  staging_version="v0.${kube_version#v1.}"
  IFS=. read -r major minor _ <<<"${kube_version#v}"
  # what the release's own build stamps in, so that --version and /version tell the release
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  sed -n 's#^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/.*#replace \1 => \1 '"$staging_version"'#p' \
    "$gomod" | build_module k8s.io/kubernetes "$kube_version" "$ldflags" "" \
    $(for b in "${kube[@]}"; do echo "k8s.io/kubernetes/cmd/$b=$b"; done)
fi

echo "$assets"
