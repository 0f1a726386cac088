#!/usr/bin/env bash
# Builds the real orchestrator components make e2e drives, from the Go module proxy, pinned to
# exact versions (see /work/shared/E2E-RECIPES.md and DEPENDENCIES.md: the proxy is a filtered
# mirror, @latest and `go install pkg@version` fail for most of these). Each binary is built
# once into $CACHE/bin/NAME-VERSION and reused by later runs; the scratch modules live in
# $CACHE/src. Builds run one at a time, at the lowest CPU priority.
#
#   build-components.sh [NAME...]     NAME: etcd etcd-ledger kube-apiserver
#                                     kube-controller-manager csi-provisioner csi-attacher
#                                     nomad helm cert-manager-crds prometheus-operator-crds
#                                     mock-driver v0-mock-driver v0-sanity kube-scheduler kubelet
#                                     node-driver-registrar livenessprobe csi-resizer
#                                     csi-snapshotter snapshot-controller snapshot-crds
#                                     (default: all)
#   build-components.sh --path NAME   where NAME's binary (or directory) is
#
# Prints nothing for a cached binary; for a build, one line with its wall time.
set -euo pipefail

CACHE=${CSIGWTEST_E2E_CACHE:-${HOME}/.cache/csi-gateway-e2e}
GO=${GO:-go}
NICE=${NICE:-nice -n 19}

ETCD_VERSION=v3.5.17        # the Kubernetes control plane's (v1.31 is validated on 3.5)
ETCD_LEDGER_VERSION=v3.7.3  # the tenancy ledger's tests (make test): go.mod's etcd client
K8S_VERSION=v1.31.4
PROVISIONER_VERSION=v5.1.0
ATTACHER_VERSION=v4.13.0
NOMAD_VERSION=v1.9.3
NOMAD_API_VERSION=v0.0.0-20241111163541-d92bf1014886 # the commit of the v1.9.3 tag
HELM_VERSION=v3.16.3
CERT_MANAGER_VERSION=v1.16.2 # only its CRDs, for the server-side dry run of Certificates
PROMETHEUS_OPERATOR_VERSION=v0.85.0 # only its PodMonitor and ServiceMonitor CRDs, likewise
MOCK_DRIVER_VERSION=v4.1.0  # csi-test's mock CSI driver, for the tap's sanity test (make test)
# csi-test v0.3.5 (CSI v0: its mock driver and its sanity suite, for make test's v0 tests): the
# module proxy does not serve it, so it is built from its source on the shelf.
CSI_TEST_V0_VERSION=v0.3.5
CSI_TEST_V0_SRC=${CSIGWTEST_CSI_TEST_V0_SRC:-$(cd "$(dirname "$0")/../.." && pwd)/../shared/data/csi-test-$CSI_TEST_V0_VERSION}

# The kubernetes-csi sidecars the module proxy does not serve (403 for every version): built
# with -mod=vendor from `git archive` tarballs of upstream (with vendor/) in KUBERNETES_CSI_SRC,
# by default ../shared/data/kubernetes-csi next to the repository; named by upstream commit.
KUBERNETES_CSI_SRC=${KUBERNETES_CSI_SRC:-$(cd "$(dirname "$0")/../.." && pwd)/../shared/data/kubernetes-csi}
REGISTRAR_VERSION=3482d444   # node-driver-registrar, after v2.17.0
LIVENESSPROBE_VERSION=e60f18af # livenessprobe, after v2.19.0
RESIZER_VERSION=beef24d8       # external-resizer
SNAPSHOTTER_VERSION=v8.4.0     # csi-snapshotter and snapshot-controller (external-snapshotter/v8)

mkdir -p "$CACHE/bin" "$CACHE/src"
export GOFLAGS=-mod=mod
export CGO_ENABLED=0

# modfile MODULE VERSION: the path of the upstream go.mod in the module cache (downloading it).
modinfo() { $GO mod download -json "$1@$2" | sed -n "s/^\t\"$3\": \"\(.*\)\",\?$/\1/p"; }

# scratch NAME MODULE VERSION: a module of our own whose go.mod is the upstream one renamed,
# with the upstream module required, so its replace directives and pins apply to our build.
scratch() {
  local name=$1 mod=$2 ver=$3 dir=$CACHE/src/$1-$3
  mkdir -p "$dir"
  local gomod dir_up
  gomod=$(modinfo "$mod" "$ver" GoMod)
  dir_up=$(modinfo "$mod" "$ver" Dir)
  sed "s#^module .*#module ${name//-/}build#" "$gomod" >"$dir/go.mod"
  cp "$dir_up/go.sum" "$dir/go.sum" 2>/dev/null || true
  chmod u+w "$dir/go.mod" "$dir/go.sum"
  printf '\nrequire %s %s\n' "$mod" "$ver" >>"$dir/go.mod"
  echo "$dir"
}

timed() { # timed NAME VERSION CMD...: run CMD, say how long it took
  local start=$SECONDS
  "${@:3}" || { echo "build-components.sh: building $1 $2 failed" >&2; return 1; }
  echo "built $1 $2 in $((SECONDS - start))s"
}

build_etcd() { # build_etcd VERSION
  local out=$CACHE/bin/etcd-$1 dir=$CACHE/src/etcd-$1
  [[ -x $out ]] && return
  mkdir -p "$dir"
  printf 'module etcdbuild\n\ngo 1.23\n' >"$dir/go.mod"
  (cd "$dir" && $GO get "go.etcd.io/etcd/server/v3@$1" >/dev/null 2>&1 &&
    timed etcd "$1" $NICE $GO build -trimpath -o "$out.tmp" go.etcd.io/etcd/server/v3) && mv "$out.tmp" "$out"
}

# The Kubernetes module replaces its staging modules with ./staging/...; a scratch module
# replaces each with its published v0.X.Y instead.
k8s_module() {
  local dir=$CACHE/src/kubernetes-$K8S_VERSION
  if [[ ! -f $dir/go.mod ]]; then
    mkdir -p "$dir"
    local gomod minor=${K8S_VERSION#v1.}
    gomod=$(modinfo k8s.io/kubernetes "$K8S_VERSION" GoMod)
    {
      printf 'module kubernetesbuild\n\ngo 1.23\n\nrequire k8s.io/kubernetes %s\n\n' "$K8S_VERSION"
      grep '=> ./staging' "$gomod" | awk -v v="v0.$minor" '{print "replace " $1 " => " $1 " " v}'
    } >"$dir/go.mod"
  fi
  # Every command built from it; a cache made before kubelet and kube-scheduler were added is
  # tidied again.
  local tools
  tools=$(printf '//go:build tools\n\npackage tools\n\nimport (\n'; for c in kube-apiserver kube-controller-manager kube-scheduler kubelet; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' $c; done; printf ')')
  if [[ ! -f $dir/.ready || "$(cat "$dir/tools.go")" != "$tools" ]]; then
    rm -f "$dir/.ready"
    echo "$tools" >"$dir/tools.go"
    (cd "$dir" && $NICE $GO mod tidy >/dev/null) && touch "$dir/.ready"
  fi
  echo "$dir"
}

k8s_ldflags() {
  local minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  echo "-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
}

build_k8s() { # build_k8s kube-apiserver|kube-controller-manager|kube-scheduler|kubelet
  local out=$CACHE/bin/$1-$K8S_VERSION dir
  [[ -x $out ]] && return
  dir=$(k8s_module)
  (cd "$dir" && timed "$1" $K8S_VERSION $NICE $GO build -trimpath -ldflags "$(k8s_ldflags)" -o "$out.tmp" "k8s.io/kubernetes/cmd/$1") && mv "$out.tmp" "$out"
}

build_copy() { # build_copy NAME MODULE VERSION PACKAGE [LDFLAGS]
  local out=$CACHE/bin/$1-$3 dir
  [[ -x $out ]] && return
  dir=$(scratch "$1" "$2" "$3")
  (cd "$dir" && timed "$1" "$3" $NICE $GO build -trimpath -ldflags "-s -w ${5:-}" -o "$out.tmp" "$4") && mv "$out.tmp" "$out"
}

# What upstream's Makefile sets: the version, and the Kubernetes version `helm lint` and
# `helm template` assume (the client-go it is built with: 1.31 for helm 3.16).
helm_ldflags() {
  local p=helm.sh/helm/v3
  echo "-X $p/internal/version.version=$HELM_VERSION -X $p/pkg/lint/rules.k8sVersionMajor=1 -X $p/pkg/lint/rules.k8sVersionMinor=31 -X $p/pkg/chartutil.k8sVersionMajor=1 -X $p/pkg/chartutil.k8sVersionMinor=31"
}

build_nomad() {
  local out=$CACHE/bin/nomad-$NOMAD_VERSION dir
  [[ -x $out ]] && return
  dir=$(scratch nomad github.com/hashicorp/nomad "$NOMAD_VERSION")
  # The api module is nested in the nomad repository and not in its module zip.
  sed -i "s#github.com/hashicorp/nomad/api => ./api\$#github.com/hashicorp/nomad/api => github.com/hashicorp/nomad/api $NOMAD_API_VERSION#" "$dir/go.mod"
  # cgo: the exec driver's libcontainer (runc) needs it, as upstream's build does.
  (cd "$dir" && CGO_ENABLED=1 timed nomad $NOMAD_VERSION $NICE $GO build -trimpath -ldflags "-s -w" -o "$out.tmp" github.com/hashicorp/nomad) && mv "$out.tmp" "$out"
}

# csi-test's mock driver, built in a copy of its module: the module zip ships vendor/modules.txt
# but no vendored sources, so -mod=vendor cannot build it; without vendor/ it resolves its
# go.mod's pins from the proxy.
build_mock_driver() {
  local out=$CACHE/bin/mock-driver-$MOCK_DRIVER_VERSION dir=$CACHE/src/mock-driver-$MOCK_DRIVER_VERSION up
  [[ -x $out ]] && return
  up=$(modinfo github.com/kubernetes-csi/csi-test/v4 "$MOCK_DRIVER_VERSION" Dir)
  rm -rf "$dir"
  cp -r "$up" "$dir"
  chmod -R u+w "$dir"
  rm -rf "$dir/vendor"
  (cd "$dir" && timed mock-driver $MOCK_DRIVER_VERSION $NICE $GO build -trimpath -ldflags "-s -w" -o "$out.tmp" ./cmd/mock-driver) && mv "$out.tmp" "$out"
}

# csi-test v0.3.5's v0 mock driver (./mock) and its v0 sanity suite (./cmd/csi-sanity, a test
# binary: run it with -csi.endpoint), built in a copy of its source with its own go.mod's pins,
# never inside the gateway's module (two csi.v0 registrations in one binary would panic).
build_csi_test_v0() { # build_csi_test_v0 NAME
  local out dir=$CACHE/src/csi-test-$CSI_TEST_V0_VERSION
  out=$(path "$1")
  [[ -x $out ]] && return
  [[ -f $CSI_TEST_V0_SRC/go.mod ]] || {
    echo "build-components.sh: csi-test $CSI_TEST_V0_VERSION's source is not at $CSI_TEST_V0_SRC (set CSIGWTEST_CSI_TEST_V0_SRC)" >&2
    return 1
  }
  if [[ ! -f $dir/go.mod ]]; then
    rm -rf "$dir"
    cp -r "$CSI_TEST_V0_SRC" "$dir.tmp" && chmod -R u+w "$dir.tmp" && mv "$dir.tmp" "$dir"
  fi
  case $1 in
  v0-mock-driver) (cd "$dir" && timed "$1" $CSI_TEST_V0_VERSION $NICE $GO build -trimpath -ldflags "-s -w" -o "$out.tmp" ./mock) ;;
  v0-sanity) (cd "$dir" && timed "$1" $CSI_TEST_V0_VERSION $NICE $GO test -c -trimpath -o "$out.tmp" ./cmd/csi-sanity) ;;
  esac && mv "$out.tmp" "$out"
}

# build_snapshotter csi-snapshotter|snapshot-controller: the client module is nested in the
# repository (replaced by ./client upstream) and not in the module zip: its release instead.
build_snapshotter() {
  local out=$CACHE/bin/$1-$SNAPSHOTTER_VERSION dir
  [[ -x $out ]] && return
  dir=$(scratch "$1" github.com/kubernetes-csi/external-snapshotter/v8 "$SNAPSHOTTER_VERSION")
  sed -i "s#=> ./client\$#=> github.com/kubernetes-csi/external-snapshotter/client/v8 $SNAPSHOTTER_VERSION#" "$dir/go.mod"
  (cd "$dir" && timed "$1" $SNAPSHOTTER_VERSION $NICE $GO build -trimpath -ldflags "-s -w" -o "$out.tmp" "github.com/kubernetes-csi/external-snapshotter/v8/cmd/$1") && mv "$out.tmp" "$out"
}

# build_vendored NAME VERSION ARCHIVE PACKAGE: from a source archive in KUBERNETES_CSI_SRC.
build_vendored() {
  local out=$CACHE/bin/$1-$2 dir=$CACHE/src/$1-$2 archive=$KUBERNETES_CSI_SRC/$3
  [[ -x $out ]] && return
  [[ -f $archive ]] || { echo "build-components.sh: $1 needs its source archive $archive (the module proxy does not serve it)" >&2; return 1; }
  rm -rf "$dir" && mkdir -p "$dir"
  tar -xzf "$archive" -C "$dir" --strip-components=1
  (cd "$dir" && GOFLAGS=-mod=vendor timed "$1" "$2" $NICE $GO build -trimpath -ldflags "-s -w -X main.version=$2" -o "$out.tmp" "$4") && mv "$out.tmp" "$out"
}

# build_crds NAME MODULE VERSION COPY: the CRD manifests of a Go module, in
# $CACHE/crds/NAME-VERSION; COPY writes them there, given the module's directory and that one.
build_crds() {
  local out=$CACHE/crds/$1-$3 dir
  [[ -f $out/.ready ]] && return
  dir=$(modinfo "$2" "$3" Dir)
  mkdir -p "$out"
  "$4" "$dir" "$out"
  chmod u+w "$out"/*.yaml
  touch "$out/.ready"
}

# The VolumeSnapshot CRDs of external-snapshotter's client module, as it ships them.
copy_snapshot_crds() { cp "$1"/config/crd/snapshot.storage.k8s.io_*.yaml "$2/"; }

# cert-manager's CRDs as plain manifests: the module's deploy/crds sources carry Helm
# markers, in comments and in the label values, which are dropped.
copy_cert_manager_crds() {
  local f
  for f in certificates issuers clusterissuers; do
    grep -v "'{{" "$1/deploy/crds/crd-$f.yaml" >"$2/$f.yaml"
  done
}

# The Prometheus Operator's PodMonitor and ServiceMonitor CRDs, as the module ships them.
copy_prometheus_operator_crds() {
  local f
  for f in podmonitors servicemonitors; do
    cp "$1/example/prometheus-operator-crd/monitoring.coreos.com_$f.yaml" "$2/$f.yaml"
  done
}

build() {
  case $1 in
  etcd) build_etcd $ETCD_VERSION ;;
  etcd-ledger) build_etcd $ETCD_LEDGER_VERSION ;;
  kube-apiserver | kube-controller-manager | kube-scheduler | kubelet) build_k8s "$1" ;;
  csi-provisioner) build_copy csi-provisioner github.com/kubernetes-csi/external-provisioner/v5 $PROVISIONER_VERSION github.com/kubernetes-csi/external-provisioner/v5/cmd/csi-provisioner ;;
  csi-attacher) build_copy csi-attacher github.com/kubernetes-csi/external-attacher/v4 $ATTACHER_VERSION github.com/kubernetes-csi/external-attacher/v4/cmd/csi-attacher ;;
  nomad) build_nomad ;;
  cert-manager-crds) build_crds cert-manager github.com/cert-manager/cert-manager "$CERT_MANAGER_VERSION" copy_cert_manager_crds ;;
  prometheus-operator-crds) build_crds prometheus-operator github.com/prometheus-operator/prometheus-operator "$PROMETHEUS_OPERATOR_VERSION" copy_prometheus_operator_crds ;;
  helm) build_copy helm helm.sh/helm/v3 $HELM_VERSION helm.sh/helm/v3/cmd/helm "$(helm_ldflags)" ;;
  mock-driver) build_mock_driver ;;
  v0-mock-driver | v0-sanity) build_csi_test_v0 "$1" ;;
  node-driver-registrar) build_vendored node-driver-registrar $REGISTRAR_VERSION node-driver-registrar.tar.gz ./cmd/csi-node-driver-registrar ;;
  livenessprobe) build_vendored livenessprobe $LIVENESSPROBE_VERSION livenessprobe.tar.gz ./cmd/livenessprobe ;;
  csi-resizer) build_vendored csi-resizer $RESIZER_VERSION external-resizer.tar.gz ./cmd/csi-resizer ;;
  csi-snapshotter | snapshot-controller) build_snapshotter "$1" ;;
  snapshot-crds) build_crds external-snapshotter github.com/kubernetes-csi/external-snapshotter/client/v8 "$SNAPSHOTTER_VERSION" copy_snapshot_crds ;;
  *) echo "build-components.sh: unknown component $1" >&2; return 2 ;;
  esac
}

# path NAME: where the binary of NAME at its pinned version is (for the e2e harness).
path() {
  case $1 in
  etcd) echo "$CACHE/bin/etcd-$ETCD_VERSION" ;;
  etcd-ledger) echo "$CACHE/bin/etcd-$ETCD_LEDGER_VERSION" ;;
  kube-apiserver | kube-controller-manager | kube-scheduler | kubelet) echo "$CACHE/bin/$1-$K8S_VERSION" ;;
  csi-provisioner) echo "$CACHE/bin/csi-provisioner-$PROVISIONER_VERSION" ;;
  csi-attacher) echo "$CACHE/bin/csi-attacher-$ATTACHER_VERSION" ;;
  nomad) echo "$CACHE/bin/nomad-$NOMAD_VERSION" ;;
  helm) echo "$CACHE/bin/helm-$HELM_VERSION" ;;
  mock-driver) echo "$CACHE/bin/mock-driver-$MOCK_DRIVER_VERSION" ;;
  v0-mock-driver | v0-sanity) echo "$CACHE/bin/$1-$CSI_TEST_V0_VERSION" ;;
  node-driver-registrar) echo "$CACHE/bin/node-driver-registrar-$REGISTRAR_VERSION" ;;
  livenessprobe) echo "$CACHE/bin/livenessprobe-$LIVENESSPROBE_VERSION" ;;
  csi-resizer) echo "$CACHE/bin/csi-resizer-$RESIZER_VERSION" ;;
  csi-snapshotter | snapshot-controller) echo "$CACHE/bin/$1-$SNAPSHOTTER_VERSION" ;;
  snapshot-crds) echo "$CACHE/crds/external-snapshotter-$SNAPSHOTTER_VERSION" ;;
  cert-manager-crds) echo "$CACHE/crds/cert-manager-$CERT_MANAGER_VERSION" ;;
  prometheus-operator-crds) echo "$CACHE/crds/prometheus-operator-$PROMETHEUS_OPERATOR_VERSION" ;;
  esac
}

ALL=(cert-manager-crds prometheus-operator-crds helm etcd kube-apiserver kube-controller-manager csi-provisioner csi-attacher nomad v0-mock-driver)
if [[ ${1:-} == --path ]]; then path "$2"; exit; fi
for c in "${@:-${ALL[@]}}"; do build "$c"; done
