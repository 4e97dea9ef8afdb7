package status

import (
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/tidal-autoscaler/tidal/autoscaler/decision"
)

// Condition types of spec.scaleDownPodSelection and
// spec.holdScaleDownDuringRollout, each present only while its field is
// set.
const (
	// PodSelectionCondition is True while scale-downs set pod deletion
	// costs first, False (with why) when they cannot.
	PodSelectionCondition autoscalingv2.HorizontalPodAutoscalerConditionType = "PodSelection"
	// ScaleDownHeldCondition is True while a scale-down is held because
	// the target Deployment's rollout is in progress.
	ScaleDownHeldCondition autoscalingv2.HorizontalPodAutoscalerConditionType = "ScaleDownHeld"
)

// PodSelectionApplies is PodSelectionCondition=True: scale-downs of the
// target set pod-deletion-cost from metric (as upstream names it) first.
func PodSelectionApplies(metric string) decision.Condition {
	return decision.Condition{Type: PodSelectionCondition, Status: corev1.ConditionTrue, Reason: "Applies",
		Message: fmt.Sprintf("before a scale-down, pods get %s from their %s, so that the least loaded are removed first", decision.DeletionCostAnnotation, metric)}
}

// PodSelectionInvalid is PodSelectionCondition=False when the selection
// cannot be used: reason InvalidMetric (the metric is not a Resource or
// Pods metric of spec.metrics) or InvalidPodSelection (an unreadable
// annotation); problem says what to change.
func PodSelectionInvalid(reason, problem string) decision.Condition {
	return decision.Condition{Type: PodSelectionCondition, Status: corev1.ConditionFalse, Reason: reason, Message: problem}
}

// PodSelectionNotApplicable is PodSelectionCondition=False for a target
// that is not a Deployment or ReplicaSet (kind), whose controller does not
// read pod-deletion-cost.
func PodSelectionNotApplicable(kind string) decision.Condition {
	return decision.Condition{Type: PodSelectionCondition, Status: corev1.ConditionFalse, Reason: "NotApplicable",
		Message: fmt.Sprintf("pod selection does not apply to a %s: only the ReplicaSet controller (Deployments, ReplicaSets) removes pods by %s; remove scaleDownPodSelection", kind, decision.DeletionCostAnnotation)}
}

// ScaleDownHeld is ScaleDownHeldCondition=True: the scale-down from
// current to proposed is held, because the rollout is in progress
// (rollout says why) or, with reason RolloutUnknown, because its state is
// not known yet.
func ScaleDownHeld(current, proposed int32, rollout decision.Rollout, known bool) decision.Condition {
	c := decision.Condition{Type: ScaleDownHeldCondition, Status: corev1.ConditionTrue, Reason: "RolloutInProgress",
		Message: fmt.Sprintf("the scale-down %d→%d is held while the rollout is in progress: %s", current, proposed, rollout.Message)}
	if !known {
		c.Reason = "RolloutUnknown"
		c.Message = fmt.Sprintf("the scale-down %d→%d is held until the Deployment's rollout state is known", current, proposed)
	}
	return c
}

// ScaleDownNotHeld is ScaleDownHeldCondition=False: nothing is held (no
// rollout in progress, or no scale-down proposed during one).
func ScaleDownNotHeld(rollout decision.Rollout, known bool) decision.Condition {
	c := decision.Condition{Type: ScaleDownHeldCondition, Status: corev1.ConditionFalse, Reason: "RolloutComplete",
		Message: "scale-downs are not held: " + rollout.Message}
	switch {
	case !known:
		c.Reason, c.Message = "RolloutUnknown", "the Deployment's rollout state is not known yet; no scale-down is proposed"
	case rollout.InProgress:
		c.Reason, c.Message = "NoScaleDown", "the rollout is in progress ("+rollout.Message+"), and no scale-down is proposed"
	}
	return c
}

// ScaleDownHoldNotApplicable is ScaleDownHeldCondition=False for a target
// that is not a Deployment (kind).
func ScaleDownHoldNotApplicable(kind string) decision.Condition {
	return decision.Condition{Type: ScaleDownHeldCondition, Status: corev1.ConditionFalse, Reason: "NotApplicable",
		Message: fmt.Sprintf("holdScaleDownDuringRollout applies to Deployments only, the target is a %s: scale-downs are not held", kind)}
}

// WithProblem prefixes c's message with problem (an unreadable annotation
// taken as set); c is returned unchanged when problem is "".
func WithProblem(c decision.Condition, problem string) decision.Condition {
	if problem != "" {
		c.Message = problem + "; " + c.Message
	}
	return c
}
