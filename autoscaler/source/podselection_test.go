package source

import (
	"reflect"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
)

// TestPodSelectionAndHoldAnnotations: native mode's annotations for
// spec.scaleDownPodSelection and spec.holdScaleDownDuringRollout.
func TestPodSelectionAndHoldAnnotations(t *testing.T) {
	cpu := &v1alpha1.ScaleDownPodSelection{Metric: v1alpha1.PodSelectionMetric{Type: autoscalingv2.ResourceMetricSourceType, Name: "cpu"}}
	for _, tc := range []struct {
		name                  string
		annotations           map[string]string
		want                  Extensions
		selectionHas, holdHas string
	}{
		{name: "pod selection", annotations: map[string]string{ScaleDownPodSelectionAnnotation: `{"metric":{"type":"Resource","name":"cpu"}}`},
			want: Extensions{PodSelection: cpu}},
		{name: "pod selection of an External metric is read (the reconcile refuses it)", annotations: map[string]string{ScaleDownPodSelectionAnnotation: `{"metric":{"type":"External","name":"q"}}`},
			want: Extensions{PodSelection: &v1alpha1.ScaleDownPodSelection{Metric: v1alpha1.PodSelectionMetric{Type: "External", Name: "q"}}}},
		{name: "pod selection not JSON", annotations: map[string]string{ScaleDownPodSelectionAnnotation: `cpu`}, selectionHas: "invalid character"},
		{name: "pod selection unknown field", annotations: map[string]string{ScaleDownPodSelectionAnnotation: `{"metricName":"cpu"}`}, selectionHas: `unknown field "metricName"`},
		{name: "pod selection without a name", annotations: map[string]string{ScaleDownPodSelectionAnnotation: `{"metric":{"type":"Pods"}}`}, selectionHas: "metric.name is empty"},
		{name: "hold", annotations: map[string]string{HoldScaleDownDuringRolloutAnnotation: "true"}, want: Extensions{HoldScaleDownDuringRollout: true}},
		{name: "hold off", annotations: map[string]string{HoldScaleDownDuringRolloutAnnotation: "false"}, want: Extensions{}},
		{name: "hold unreadable is taken as true", annotations: map[string]string{HoldScaleDownDuringRolloutAnnotation: "yes"}, want: Extensions{HoldScaleDownDuringRollout: true}, holdHas: `"yes"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &autoscalingv2.HorizontalPodAutoscaler{}
			h.Annotations = tc.annotations
			got := ObjectOfHPA(h).Extensions()
			selection, hold := got.PodSelectionProblem, got.HoldProblem
			got.PodSelectionProblem, got.HoldProblem = "", ""
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Extensions = %+v, want %+v", got, tc.want)
			}
			for _, c := range []struct{ problem, has, annotation string }{
				{selection, tc.selectionHas, ScaleDownPodSelectionAnnotation}, {hold, tc.holdHas, HoldScaleDownDuringRolloutAnnotation},
			} {
				if c.has == "" && c.problem != "" || c.has != "" && (!strings.Contains(c.problem, c.has) || !strings.Contains(c.problem, c.annotation)) {
					t.Errorf("problem %q, want one naming %s with %q", c.problem, c.annotation, c.has)
				}
			}
		})
	}
}

// TestPodSelectionAndHoldSpec: the HorizontalAutoscaler's spec fields.
func TestPodSelectionAndHoldSpec(t *testing.T) {
	ha := &v1alpha1.HorizontalAutoscaler{}
	if got := ObjectOfHA(ha).Extensions(); !reflect.DeepEqual(got, Extensions{}) {
		t.Errorf("unset: %+v", got)
	}
	ha.Spec.HoldScaleDownDuringRollout = true
	ha.Spec.ScaleDownPodSelection = &v1alpha1.ScaleDownPodSelection{Metric: v1alpha1.PodSelectionMetric{Type: autoscalingv2.PodsMetricSourceType, Name: "rps"}}
	got := ObjectOfHA(ha).Extensions()
	if !got.HoldScaleDownDuringRollout || got.PodSelection == nil || got.PodSelection.Metric.Name != "rps" || got.PodSelection == ha.Spec.ScaleDownPodSelection {
		t.Errorf("set: %+v (want a copy of the selection)", got)
	}
}
