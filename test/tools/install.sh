#!/usr/bin/env bash
# install.sh builds (once) and installs the real servers Tidal's tests start:
# etcd, kube-apiserver, kube-controller-manager, kubectl (from test/tools/go.mod),
# kwok and helm (pinned versions from the Go module proxy), Prometheus
# (Debian's package, with promtool) and the peers (prometheus-adapter from test/bench/peer).
# Binaries land in a cache folder keyed by everything that decides their
# content, so a second run is instant and a version bump rebuilds.
#
# Usage: test/tools/install.sh        prints the tools folder on its last line.
# Env:   TIDAL_TOOLS_CACHE  cache root (default: $XDG_CACHE_HOME/tidal or ~/.cache/tidal)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "${here}/../.." && pwd)"

KWOK_VERSION="v0.8.0"
HELM_VERSION="v3.22.0"
# The Kubernetes version stamped into the binaries must match test/tools/go.mod,
# or kubectl and helm refuse the server as v0.0.0-master.
KUBE_VERSION="$(cd "${here}" && go list -m -f '{{.Version}}' k8s.io/kubernetes)"
if [ -z "${KUBE_VERSION}" ]; then echo "tools: cannot read k8s.io/kubernetes' version from ${here}/go.mod" >&2; exit 1; fi
KUBE_MINOR="$(echo "${KUBE_VERSION}" | cut -d. -f2)"

log() { echo "tools: $*" >&2; }

cache_root="${TIDAL_TOOLS_CACHE:-${XDG_CACHE_HOME:-${HOME}/.cache}/tidal}"
# BUILD_REVISION: bump when a change here changes what gets built.
BUILD_REVISION=1
key="$( (cat "${here}/go.mod" "${here}/go.sum"; echo "${KWOK_VERSION} ${HELM_VERSION} ${BUILD_REVISION}") | sha256sum | cut -c1-16)"
dir="${cache_root}/tools-${KUBE_VERSION}-${key}"
mkdir -p "${dir}"

# Prometheus: Debian's package; its service is not started here, tests run the binary.
if ! command -v prometheus >/dev/null 2>&1; then
  log "installing Debian's prometheus package"
  sudo_cmd=""
  if [ "$(id -u)" != "0" ]; then sudo_cmd="sudo"; fi
  ${sudo_cmd} apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive ${sudo_cmd} apt-get install -y -qq --no-install-recommends prometheus >&2
fi
ln -sf "$(command -v prometheus)" "${dir}/prometheus"
# promtool (the same package) checks and unit-tests the chart's alerts.
if ! command -v promtool >/dev/null 2>&1; then
  echo "tools: promtool not found beside prometheus ($(command -v prometheus)); Debian's prometheus package ships it" >&2
  exit 1
fi
ln -sf "$(command -v promtool)" "${dir}/promtool"

if [ -f "${dir}/.complete" ]; then
  log "cached in ${dir}"
else
  export CGO_ENABLED=0
  kube_ldflags="-s -w -X k8s.io/component-base/version.gitVersion=${KUBE_VERSION}
    -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${KUBE_MINOR}
    -X k8s.io/component-base/version.gitTreeState=clean"
  build() { # build OUT PKG [LDFLAGS]: one binary from the tools module
    if [ -x "${dir}/$1" ]; then return; fi
    log "building $1 (a cold build takes minutes on 2 cores)"
    (cd "${here}" && go build -trimpath -ldflags "${3:-}" -o "${dir}/$1.tmp" "$2")
    mv "${dir}/$1.tmp" "${dir}/$1"
  }
  build etcd go.etcd.io/etcd/server/v3 "-s -w"
  build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "${kube_ldflags}"
  build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "${kube_ldflags}"
  build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "${kube_ldflags}"
  build kubectl k8s.io/kubernetes/cmd/kubectl "${kube_ldflags}"

  # kwok and helm build from their own modules at pinned versions (checksum-verified),
  # so their dependency graphs never fight Kubernetes' in the tools module.
  if [ ! -x "${dir}/kwok" ]; then
    log "building kwok ${KWOK_VERSION}"
    GOBIN="${dir}" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}"
  fi
  if [ ! -x "${dir}/helm" ]; then
    log "building helm ${HELM_VERSION}"
    GOBIN="${dir}" go install -trimpath -ldflags "-s -w
      -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION}
      -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1
      -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=${KUBE_MINOR}" "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}"
  fi

  # kwok has no built-in stages: give it the "fast" node and pod stages from its module.
  kwok_src="$(go env GOMODCACHE)/sigs.k8s.io/kwok@${KWOK_VERSION}/kustomize/stage"
  {
    for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
      pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
      echo "---"
      cat "${kwok_src}/${f}"
    done
  } > "${dir}/kwok-stages.yaml"
  touch "${dir}/.complete"
  log "built into ${dir}"
fi

# Peers: other projects' servers the tests run beside Tidal, each built from a
# module of its own (so their Kubernetes libraries never meet Tidal's or the
# tools module's), cached by that module's go.sum and linked into the tools folder.
build_peer() { # build_peer NAME MODULE_DIR PKG
  local key out
  key="$( (cat "${repo}/$2/go.mod" "${repo}/$2/go.sum") | sha256sum | cut -c1-16)"
  out="${cache_root}/peer-$1-${key}"
  if [ ! -x "${out}/$1" ]; then
    log "building $1 from $2"
    mkdir -p "${out}"
    (cd "${repo}/$2" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${out}/$1.tmp" "$3")
    mv "${out}/$1.tmp" "${out}/$1"
  fi
  ln -sfn "${out}/$1" "${dir}/$1"
}
build_peer prometheus-adapter test/bench/peer sigs.k8s.io/prometheus-adapter/cmd/adapter

# A stable path for the harness, the Makefile and people: _output/tools.
mkdir -p "${repo}/_output"
ln -sfn "${dir}" "${repo}/_output/tools"
echo "${dir}"
