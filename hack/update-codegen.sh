#!/usr/bin/env bash
# Regenerates the autoscaler API's deepcopy code and its CRD.
#
#   hack/update-codegen.sh
#
# controller-gen is run from the Go module proxy at a pinned version, so no
# tool needs installing. The CRD is then completed by hack/crd-schema with
# the apiserver's HPA validation and defaulting, which controller-gen cannot
# derive from the reused autoscaling/v2 types.
set -o errexit -o nounset -o pipefail

CONTROLLER_TOOLS_VERSION="${CONTROLLER_TOOLS_VERSION:-v0.23.0}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"

controller_gen() {
	go run "sigs.k8s.io/controller-tools/cmd/controller-gen@${CONTROLLER_TOOLS_VERSION}" "$@"
}

API=./autoscaler/apis/...
CRD_DIR=manifests/crd
CRD="${CRD_DIR}/autoscaling.tidal.dev_horizontalautoscalers.yaml"

controller_gen object paths="${API}"
controller_gen crd:crdVersions=v1 paths="${API}" output:crd:artifacts:config="${CRD_DIR}"
go run ./hack/crd-schema "${CRD}"
