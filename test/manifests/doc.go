// Package manifests tests Tidal's deployment files: the plain manifests
// (kubectl apply -k manifests/ and its components), the Helm chart
// manifests/charts/tidal, and the Dockerfile.
//
// Static tests render with the helm and kubectl binaries of `make tools` and
// assert on the decoded objects. Cluster tests install the chart on the
// real control plane of test/harness (one for the package, started by the
// first test that needs it): the apiserver validates every rendered object,
// `helm upgrade` keeps the generated certificate, and `tidal adapter` and
// `tidal autoscaler` run with nothing but the chart's RBAC.
//
// Run: TIDAL_TOOLS_DIR=$(readlink -f _output/tools) go test ./test/manifests/
package manifests
