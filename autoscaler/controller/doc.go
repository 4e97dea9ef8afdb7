// Package controller is the tidal autoscaler's reconciler: it decides and
// acts exactly as kube-controller-manager's HorizontalPodAutoscaler
// controller does, over either tidal's HorizontalAutoscaler resources or
// autoscaling/v2 HorizontalPodAutoscalers (native mode).
//
// The split follows upstream's: Controller (queue, workers, informers) ->
// reconciler (scale subresource, status, conditions, events) -> metric
// computation (package replicas arithmetic over a pod lister and a
// metrics.Client) -> package decision (branching, combination,
// normalization). Package monitor is the controller's own Prometheus
// metrics.
//
// Both modes share the reconciler through source.Source (list, get and
// write the objects of one kind) and source.Object (spec and status of one
// object).
//
// Its API is New, which builds the Controller from the clients and
// informers in Options; package app builds those for a real cluster, as
// kube-controller-manager's startHPAController does, and tests build them
// from fakes.
//
// Where tidal reads the cluster differently from upstream, the decisions
// stay the same and the API traffic drops: scales of the built-in kinds
// come from informers (clustercache.ScaleCache), a namespace's PodMetrics
// are listed once for all its autoscalers and their identical custom and
// external metrics requests are made once (package metrics), and the
// stabilization history goes with the status write
// (source.HistoryAnnotation).
package controller
