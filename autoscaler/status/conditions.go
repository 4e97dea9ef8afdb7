package status

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tidal-autoscaler/tidal/autoscaler/decision"
)

// SetCondition sets c in st as upstream does: a condition of a new type is
// appended, an existing one is updated in place, and lastTransitionTime
// changes only when the status flips.
func SetCondition(st *autoscalingv2.HorizontalPodAutoscalerStatus, c decision.Condition, now metav1.Time) {
	var existing *autoscalingv2.HorizontalPodAutoscalerCondition
	for i := range st.Conditions {
		if st.Conditions[i].Type == c.Type {
			existing = &st.Conditions[i]
			break
		}
	}
	if existing == nil {
		st.Conditions = append(st.Conditions, autoscalingv2.HorizontalPodAutoscalerCondition{Type: c.Type})
		existing = &st.Conditions[len(st.Conditions)-1]
	}
	if existing.Status != c.Status {
		existing.LastTransitionTime = now
	}
	existing.Status = c.Status
	existing.Reason = c.Reason
	existing.Message = c.Message
}

// SetConditions sets each of cs (SetCondition).
func SetConditions(st *autoscalingv2.HorizontalPodAutoscalerStatus, cs []decision.Condition, now metav1.Time) {
	for _, c := range cs {
		SetCondition(st, c, now)
	}
}

// RemoveCondition removes the condition of type t.
func RemoveCondition(st *autoscalingv2.HorizontalPodAutoscalerStatus, t autoscalingv2.HorizontalPodAutoscalerConditionType) {
	kept := st.Conditions[:0]
	for _, c := range st.Conditions {
		if c.Type != t {
			kept = append(kept, c)
		}
	}
	st.Conditions = kept
}

// ScaledToZero reports whether st has ScaledToZero=True.
func ScaledToZero(st *autoscalingv2.HorizontalPodAutoscalerStatus) bool {
	for _, c := range st.Conditions {
		if c.Type == autoscalingv2.ScaledToZero {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
