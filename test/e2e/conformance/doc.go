// Package conformance checks that `tidal autoscaler` decides exactly as
// upstream kube-controller-manager's HPA controller does.
//
// One control plane runs both: the upstream HPA controller (a second
// kube-controller-manager with only that controller) reconciles a native
// autoscaling/v2 HorizontalPodAutoscaler on one Deployment, and tidal, as a
// process in crd mode with its own identity and RBAC, reconciles an
// identical HorizontalAutoscaler on a twin Deployment. Both read the same
// values from one test metrics server (package test/metricsserver) through
// the aggregator; each scenario walks through a sequence of metric values
// and compares, after each step, the replicas, conditions and current
// metrics both controllers settle on.
//
// The tests live in the package's _test files; run them with
// TIDAL_TOOLS_DIR set (see test/harness).
package conformance
