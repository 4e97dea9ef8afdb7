package controller

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tidal-autoscaler/tidal/autoscaler/decision"
	"github.com/tidal-autoscaler/tidal/autoscaler/status"
)

// spec.holdScaleDownDuringRollout: while the target Deployment's rollout
// is in progress (decision.DeploymentRollout, kubectl's definition), a
// decided scale-down keeps the current count instead; a scale-up goes
// through. The Deployment is read from the scale cache's informer
// (clustercache.ScaleCache.Deployment), never from the API server; until
// that cache can answer, the rollout state is unknown and a scale-down is
// held (the cautious reading, for at most the time the informer takes to
// sync).
//
// Note that kubectl counts a Deployment as rolling out until every updated
// replica is available, so for a moment after any change of spec.replicas
// (this autoscaler's own scale-up included) its rollout is in progress.

var deploymentsResource = schema.GroupResource{Group: "apps", Resource: "deployments"}

// holdScaleDown holds a decided scale-down of a Deployment whose rollout
// is in progress, and sets the ScaleDownHeld condition.
func (r *reconciler) holdScaleDown(s *step) {
	if !s.ext.HoldScaleDownDuringRollout {
		return
	}
	st := s.obj.HPAStatus()
	if s.ext.HoldProblem != "" {
		r.recorder.Event(s.obj.Runtime(), corev1.EventTypeWarning, "InvalidHoldScaleDownDuringRollout", s.ext.HoldProblem)
	}
	if s.resource != deploymentsResource {
		status.SetCondition(st, status.WithProblem(status.ScaleDownHoldNotApplicable(s.obj.HPASpec().ScaleTargetRef.Kind), s.ext.HoldProblem), s.now)
		return
	}
	var rollout decision.Rollout
	d, known := r.deployment(s.obj.GetNamespace(), s.obj.HPASpec().ScaleTargetRef.Name)
	if known {
		rollout = decision.DeploymentRollout(d)
	}
	proposed := s.d.DesiredReplicas
	if !s.d.Rescale || !decision.HoldsScaleDown(s.current, proposed, s.in.MaxReplicas, !known || rollout.InProgress) {
		status.SetCondition(st, status.WithProblem(status.ScaleDownNotHeld(rollout, known), s.ext.HoldProblem), s.now)
		return
	}
	s.held, s.heldFrom = true, proposed
	s.d.DesiredReplicas, s.d.Rescale = s.current, false
	c := status.ScaleDownHeld(s.current, proposed, rollout, known)
	status.SetCondition(st, status.WithProblem(c, s.ext.HoldProblem), s.now)
	r.recorder.Event(s.obj.Runtime(), corev1.EventTypeNormal, "ScaleDownHeld", c.Message)
}
