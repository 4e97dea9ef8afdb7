package controller

import (
	"strings"

	"github.com/tidal-autoscaler/tidal/autoscaler/decision"
	"github.com/tidal-autoscaler/tidal/autoscaler/monitor"
	"github.com/tidal-autoscaler/tidal/autoscaler/source"
)

// observeObject records an object's spec and status, as this reconcile
// left them, in the tidal_autoscaler_hpa_* series.
func (r *reconciler) observeObject(obj source.Object) {
	r.monitor.ObserveAutoscaler(obj.GetNamespace(), obj.GetName(), obj.HPASpec(), obj.HPAStatus())
}

// observeScale counts a successful write of /scale from s.current to
// desired.
func (r *reconciler) observeScale(s *step, desired int32) {
	dir := monitor.DirectionDown
	if desired > s.current {
		dir = monitor.DirectionUp
	}
	r.monitor.ObserveScale(s.obj.GetNamespace(), s.obj.GetName(), dir, scaleReason(s))
}

// scaleReason is the bounded reason label of a rescale (the decision's
// reason names the metric, which the label does not).
func scaleReason(s *step) string {
	switch {
	case s.fb.Active:
		return monitor.ScaleReasonFallback
	case s.d.Reason == decision.ReasonAboveMax:
		return monitor.ScaleReasonAboveMax
	case s.d.Reason == decision.ReasonBelowMin:
		return monitor.ScaleReasonBelowMin
	case s.d.Reason == decision.ReasonAllBelowTarget:
		return monitor.ScaleReasonAllBelowTarget
	case strings.HasSuffix(s.d.Reason, " above target"):
		return monitor.ScaleReasonMetric
	}
	return "other"
}
