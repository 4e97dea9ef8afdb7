// Package status is what the autoscaler writes in an object's status
// beside the numbers: the conditions, set as upstream sets them, and
// tidal's status block (status.tidal: the printed columns and the decision
// explained). Pure functions over the API types, no I/O.
package status

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/autoscaler/source"
)

// Set replaces the status as upstream's setStatus does, keeping
// lastScaleTime (unless scaledAt is set) and the conditions.
func Set(obj source.Object, current, desired int32, statuses []autoscalingv2.MetricStatus, scaledAt *metav1.Time) {
	st := obj.HPAStatus()
	last := st.LastScaleTime
	if scaledAt != nil {
		last = scaledAt.DeepCopy()
	}
	*st = autoscalingv2.HorizontalPodAutoscalerStatus{
		ObservedGeneration: ptr.To(obj.GetGeneration()),
		LastScaleTime:      last,
		CurrentReplicas:    current,
		DesiredReplicas:    desired,
		CurrentMetrics:     statuses,
		Conditions:         st.Conditions,
	}
}
