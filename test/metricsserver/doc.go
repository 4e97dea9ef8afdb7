// Package metricsserver is an in-process aggregated API server for e2e
// tests that serves the three metrics APIs the HPA reads, with values the
// test sets:
//
//   - metrics.k8s.io v1beta1 PodMetrics (per-pod, per-container usage),
//   - custom.metrics.k8s.io v1beta1 and v1beta2 (per-pod and per-object
//     metrics),
//   - external.metrics.k8s.io v1beta1 (external series with labels).
//
// It is not a mock of a controller's client: it runs behind the real
// aggregator with delegated authentication and authorization, so every
// controller under test (upstream kube-controller-manager's HPA controller
// and tidal's autoscaler) reads the same values through the same API.
//
// Custom and external metrics are served by sigs.k8s.io/custom-metrics-apiserver.
// metrics.k8s.io is installed on the same generic API server as a minimal
// API group (PodMetrics get and list), because custom-metrics-apiserver does
// not serve it and sigs.k8s.io/metrics-server's API package would add a
// module with its own dependency tree for two small REST storages.
//
// Per-pod values are keyed by rank, not by pod name, so two twin
// Deployments (one per controller) get the same numbers: see Rank.
package metricsserver
