package status

import (
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/autoscaler/decision"
)

func TestFormatTargets(t *testing.T) {
	cpu := autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](60)},
	}}
	cpuStatus := autoscalingv2.MetricStatus{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{
		Name: corev1.ResourceCPU, Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr.To[int32](45)},
	}}
	rps := autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "rps"},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("80"))},
	}}
	for _, tc := range []struct {
		name     string
		specs    []autoscalingv2.MetricSpec
		statuses []autoscalingv2.MetricStatus
		want     string
	}{
		{"no metrics", nil, nil, "<none>"},
		{"current known", []autoscalingv2.MetricSpec{cpu}, []autoscalingv2.MetricStatus{cpuStatus}, "cpu: 45%/60%"},
		{"current unknown", []autoscalingv2.MetricSpec{cpu, rps}, nil, "cpu: <unknown>/60%, <unknown>/80"},
		{"more than two", []autoscalingv2.MetricSpec{cpu, rps, rps}, nil, "cpu: <unknown>/60%, <unknown>/80 + 1 more..."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := formatTargets(tc.specs, tc.statuses); got != tc.want {
				t.Errorf("formatTargets = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestSetCondition: lastTransitionTime moves only when the status flips.
func TestSetCondition(t *testing.T) {
	t0, t1 := metav1.NewTime(time.Unix(100, 0)), metav1.NewTime(time.Unix(200, 0))
	st := &autoscalingv2.HorizontalPodAutoscalerStatus{}
	SetCondition(st, decision.Condition{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionTrue, Reason: "A"}, t0)
	SetCondition(st, decision.Condition{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionTrue, Reason: "B"}, t1)
	if c := st.Conditions[0]; len(st.Conditions) != 1 || c.Reason != "B" || !c.LastTransitionTime.Equal(&t0) {
		t.Fatalf("conditions = %+v", st.Conditions)
	}
	SetCondition(st, decision.Condition{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionFalse, Reason: "C"}, t1)
	if c := st.Conditions[0]; !c.LastTransitionTime.Equal(&t1) {
		t.Errorf("after a flip: %+v", c)
	}
	RemoveCondition(st, autoscalingv2.AbleToScale)
	if len(st.Conditions) != 0 {
		t.Errorf("after removal: %+v", st.Conditions)
	}
}
