// Package replicas is the replica calculator of the Tidal autoscaler: the pure
// arithmetic that turns one metric of a HorizontalPodAutoscaler into a replica
// count proposal, exactly as the upstream kube-controller-manager HPA
// controller (k8s.io/kubernetes pkg/controller/podautoscaler, v1.36/v1.37)
// does it.
//
// The package does no I/O and never reads the clock. Every input is a plain Go
// value that a controller fills from its listers and from the metrics APIs:
//
//   - pods matched by the scale target's selector ([]Pod, see FromV1Pod),
//   - per-pod metric samples in milli-units (PodSamples, see ResourceSamples
//     for the metrics.k8s.io aggregation),
//   - object and external metric values in milli-units,
//   - the current time, the tolerances and the controller configuration.
//
// Outputs are the proposal (replica count plus the values upstream writes into
// status.currentMetrics) or an error whose text is the one upstream's
// calculator produces. Errors produced while fetching data (the I/O side) are
// not made here; the controller formats them as documented on each function.
//
// Float and integer rounding follow upstream expression by expression
// (int64 utilization truncation, float64 ratios, math.Ceil, int32
// conversion), so results agree bit for bit on the same architecture.
package replicas
