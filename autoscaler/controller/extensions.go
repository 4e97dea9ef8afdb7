package controller

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/tidal-autoscaler/tidal/autoscaler/decision"
	"github.com/tidal-autoscaler/tidal/autoscaler/status"
)

// What tidal adds to upstream's reconcile, each opt-in (source.Extensions):
//
//   - dry run: the decision is made and recorded (status, the DryRun
//     condition, a DryRun event when the count would change, the
//     dry_run_desired_replicas gauge), and /scale is never written;
//   - fallback: after fallback.failureThreshold consecutive syncs in which
//     every metric failed, the fallback count replaces upstream's "no
//     change", until a sync computes a metric again;
//   - pod selection (podselection.go): before a scale-down, pods get
//     deletion costs from a metric so that the least loaded go first;
//   - rollout hold (rollouthold.go): no scale-down of a Deployment while
//     its rollout is in progress.
//
// With none set, none of this changes the status, the events or the
// decision.

// readExtensions reads the object's extensions and the persisted failure
// count, reports what cannot be used (a Warning event and, for fallback,
// its condition), and removes the conditions of features no longer set.
func (r *reconciler) readExtensions(s *step) {
	s.ext = s.obj.Extensions()
	s.failures = s.obj.MetricFailures()
	st := s.obj.HPAStatus()
	ns, name := s.obj.GetNamespace(), s.obj.GetName()
	if s.ext.DryRunProblem != "" {
		r.recorder.Event(s.obj.Runtime(), corev1.EventTypeWarning, "InvalidDryRun", s.ext.DryRunProblem)
	}
	if !s.ext.DryRun {
		status.RemoveCondition(st, status.DryRunCondition)
		r.monitor.ObserveDryRun(ns, name, -1)
	}
	switch {
	case s.ext.Fallback != nil:
		f := s.ext.Fallback
		s.fallback = &decision.Fallback{FailureThreshold: f.FailureThreshold, Replicas: f.Replicas, Behavior: decision.FallbackBehavior(f.Behavior)}
	case s.ext.FallbackProblem != "":
		r.recorder.Event(s.obj.Runtime(), corev1.EventTypeWarning, "InvalidFallback", s.ext.FallbackProblem)
		status.SetCondition(st, status.FallbackInvalid(s.ext.FallbackProblem), s.now)
		s.failures = 0
	default:
		status.RemoveCondition(st, status.FallbackCondition)
		s.failures = 0
	}
	if s.fallback == nil {
		r.monitor.ObserveFallback(ns, name, false, false)
	}
	if s.ext.PodSelection == nil && s.ext.PodSelectionProblem == "" {
		status.RemoveCondition(st, status.PodSelectionCondition)
	}
	if !s.ext.HoldScaleDownDuringRollout {
		status.RemoveCondition(st, status.ScaleDownHeldCondition)
	}
}

// health is what this reconcile learnt about the metrics, for fallback.
func (s *step) health() decision.SyncHealth {
	switch {
	case s.mr == nil:
		return decision.MetricsNotComputed
	case s.d.MetricsFailed && s.mr.combined.Invalid == len(s.mr.outcomes):
		// Every metric failed, or the selector was rejected (no outcomes).
		return decision.MetricsAllFailed
	case s.d.MetricsFailed || s.d.MetricsComputed:
		return decision.MetricsHealthy
	}
	return decision.MetricsNotComputed
}

// failingMetrics names the failed metrics with their errors.
func (s *step) failingMetrics() []string {
	var out []string
	if s.mr != nil {
		for i, o := range s.mr.outcomes {
			if o.Valid() {
				continue
			}
			name := decision.MetricName(s.metrics[i])
			if name == "" {
				name = fmt.Sprintf("metrics[%d]", i)
			}
			out = append(out, name+": "+o.Err.Error())
		}
	}
	if len(out) == 0 && s.d.Err != nil {
		out = append(out, s.d.Err.Error())
	}
	return out
}

// applyFallback counts the sync, sets the Fallback condition and, while
// fallback is active, replaces the decision with the fallback count.
func (r *reconciler) applyFallback(s *step) {
	f := s.fallback
	if f == nil {
		return
	}
	h := s.health()
	s.fb = f.Next(s.failures, h)
	s.failures = s.fb.Failures
	st := s.obj.HPAStatus()
	minR := int32(1)
	if s.in.MinReplicas != nil {
		minR = *s.in.MinReplicas
	}
	note := f.RangeNote(minR, s.in.MaxReplicas)
	switch {
	case h == decision.MetricsNotComputed:
		// Neither failed nor healthy: the condition stays as it is.
	case s.fb.Active:
		n, note := f.Count(s.current, minR, s.in.MaxReplicas)
		s.d.Rescale, s.d.DesiredReplicas, s.d.Reason = n != s.current, n, f.FallbackReason()
		c := status.FallbackActive(*f, s.failures, s.failingMetrics(), n, note)
		status.SetCondition(st, c, s.now)
		if s.fb.Entered {
			r.recorder.Event(s.obj.Runtime(), corev1.EventTypeWarning, "Fallback", c.Message)
		}
	case h == decision.MetricsAllFailed:
		status.SetCondition(st, status.FallbackPending(*f, s.failures, s.failingMetrics(), note), s.now)
	default:
		status.SetCondition(st, status.FallbackInactive(*f, note), s.now)
		if s.fb.Left {
			r.recorder.Event(s.obj.Runtime(), corev1.EventTypeNormal, "FallbackEnded", "a metric was computed again: fallback ends and the metrics decide")
		}
	}
	r.monitor.ObserveFallback(s.obj.GetNamespace(), s.obj.GetName(), true, hasCondition(st, status.FallbackCondition, corev1.ConditionTrue))
}

// recordDryRun records, for an autoscaler in dry run, what it would do:
// the DryRun condition, the gauge, and a DryRun event when the count would
// change. The event is not repeated for an unchanged count: the event
// recorder folds identical events into one with a count, so a decision
// that stays the same over many syncs is one event.
func (r *reconciler) recordDryRun(s *step, desired int32, reason string) {
	if !s.ext.DryRun {
		return
	}
	if desired == s.current {
		reason = ""
	}
	status.SetCondition(s.obj.HPAStatus(), status.DryRun(s.current, desired, reason, s.ext.DryRunProblem), s.now)
	if desired != s.current {
		r.recorder.Event(s.obj.Runtime(), corev1.EventTypeNormal, "DryRun", status.DryRunMessage(s.current, desired, reason))
	}
	r.monitor.ObserveDryRun(s.obj.GetNamespace(), s.obj.GetName(), desired)
}
