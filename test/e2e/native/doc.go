// Package native checks `tidal autoscaler --mode=native` end to end, as
// users run it: on a cluster whose kube-controller-manager runs without
// its HPA controller, granted the RBAC that `kubectl kustomize` renders
// from manifests/ with the native-mode component, it reconciles an
// autoscaling/v2 HorizontalPodAutoscaler on a Deployment of kwok pods from
// a metric of the test metrics server: it scales up and down, it alone
// writes the HPA's status and the Deployment's scale (managedFields), its
// events name kube-controller-manager's HPA component, and `tidal explain
// hpa/NAME` prints the metric's value and target and the conditions. A
// restart in the middle of a downscale stabilization window continues the
// window from the history annotation instead of starting a new one.
//
// Run it with TIDAL_TOOLS_DIR set (see test/harness).
package native
