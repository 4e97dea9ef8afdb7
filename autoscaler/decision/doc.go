// Package decision is the decision core of one HPA reconcile, as upstream's
// kube-controller-manager HorizontalController.reconcileAutoscaler makes it,
// without any I/O: which branch applies (maintenance mode at zero replicas,
// above max, below min, metrics), how the per-metric proposals combine (the
// maximum; no scale-down while any metric is invalid), the rescale reason,
// normalization (package behavior), scale from zero and the status
// conditions with upstream's exact reasons and messages.
//
// A controller drives it like this for each reconcile, after reading the
// scale subresource (current = scale.spec.replicas):
//
//	in := decision.Input{Now: now, CurrentReplicas: current, ...}
//	var combined *decision.Combined
//	if cfg.NeedsMetrics(in) {
//	    // validate the selector; per metric: decision.Plan(spec), fetch,
//	    // call the package replicas calculator, then decision.Succeeded or
//	    // decision.Failed; finally c := decision.Combine(specReplicas, outcomes)
//	    combined = &c
//	}
//	d := cfg.Decide(in, combined, &history)
//	// d.MetricsFailed: write status, event FailedComputeMetricsReplicas, stop.
//	// d.Rescale: update the scale to d.DesiredReplicas; on success
//	//   cfg.Rescaled(in, d.DesiredReplicas, &history), else RescaleFailed.
//
// History is the caller's per-object state (package behavior); forget it when
// the object is deleted.
package decision
