// Package conformance checks that `tidal autoscaler` decides exactly as
// upstream kube-controller-manager's HPA controller does, in both of its
// modes.
//
// One control plane runs all three: the upstream HPA controller (a second
// kube-controller-manager with only that controller) reconciles a native
// autoscaling/v2 HorizontalPodAutoscaler on Deployment "oracle"; tidal in
// crd mode, as a process with its own identity and RBAC, reconciles an
// identical HorizontalAutoscaler on the twin Deployment "tidal"; tidal in
// native mode, another process with the RBAC of the native-mode component,
// reconciles an identical HorizontalPodAutoscaler on the twin "native".
// All read the same values from one test metrics server (package
// test/metricsserver) through the aggregator; each scenario walks through
// a sequence of metric values and compares, after each step, the
// replicas, conditions and current metrics each tidal settles on with
// upstream's, then the events each recorded. Annotations are not
// compared: native mode keeps its history in them.
//
// Upstream and native-mode tidal both reconcile every HPA of the cluster,
// so each is allowed to write only its own twin: update on
// horizontalpodautoscalers/status and */scale is taken out of upstream's
// bootstrap ClusterRole (system:controller:horizontal-pod-autoscaler,
// annotated autoupdate "false") and out of native tidal's, and granted
// back by name, "oracle" to upstream and "native" to tidal. Each still
// reads and decides for the other's HPA; its writes there are refused and
// it records warnings about them (FailedRescale, FailedUpdateStatus, and
// tidal's OtherStatusWriter on seeing upstream's status writes), which are
// expected and logged: events are compared by who wrote them
// (managedFields), and every scenario checks that each HPA's status and
// its target's scale were written by its own controller only.
// TIDAL_CONFORMANCE_MODES=crd or =native runs one mode.
//
// The tests live in the package's _test files; run them with
// TIDAL_TOOLS_DIR set (see test/harness).
package conformance
