// Package behavior normalizes a replica proposal the way the upstream
// kube-controller-manager HPA controller does after the metrics produced a
// proposal: down-scale stabilization and the legacy scale-up limit when
// spec.behavior is nil, and stabilization windows plus Pods/Percent rate
// policies (selectPolicy Max/Min/Disabled) when it is set. It also applies the
// autoscaling/v2 API defaulting of spec.behavior.
//
// Nothing here does I/O or reads the clock: the caller passes now and owns
// the History (recommendations and scale events of one autoscaler), which
// upstream keeps in memory per object and forgets when the object is deleted
// or the controller restarts.
package behavior
