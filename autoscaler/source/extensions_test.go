package source

import (
	"reflect"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
)

func TestAnnotationExtensions(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        Extensions
		// problemHas are in DryRunProblem or FallbackProblem.
		dryRunHas, fallbackHas string
	}{
		{name: "none", want: Extensions{}},
		{name: "dry run", annotations: map[string]string{DryRunAnnotation: "true"}, want: Extensions{DryRun: true}},
		{name: "dry run off", annotations: map[string]string{DryRunAnnotation: "false"}, want: Extensions{}},
		{name: "dry run unreadable is taken as true", annotations: map[string]string{DryRunAnnotation: "True "}, want: Extensions{DryRun: true}, dryRunHas: `"True "`},
		{name: "fallback", annotations: map[string]string{FallbackAnnotation: `{"failureThreshold":3,"replicas":5,"behavior":"currentReplicasIfLower"}`},
			want: Extensions{Fallback: &v1alpha1.Fallback{FailureThreshold: 3, Replicas: 5, Behavior: v1alpha1.FallbackCurrentReplicasIfLower}}},
		{name: "fallback behavior defaults to static", annotations: map[string]string{FallbackAnnotation: `{"failureThreshold":1,"replicas":0}`},
			want: Extensions{Fallback: &v1alpha1.Fallback{FailureThreshold: 1, Replicas: 0, Behavior: v1alpha1.FallbackStatic}}},
		{name: "fallback not JSON", annotations: map[string]string{FallbackAnnotation: `3`}, fallbackHas: "cannot unmarshal"},
		{name: "fallback with trailing data", annotations: map[string]string{FallbackAnnotation: `{"failureThreshold":1,"replicas":1} {}`}, fallbackHas: "more than one JSON value"},
		{name: "fallback unknown field", annotations: map[string]string{FallbackAnnotation: `{"threshold":1,"replicas":1}`}, fallbackHas: `unknown field "threshold"`},
		{name: "fallback negative replicas", annotations: map[string]string{FallbackAnnotation: `{"failureThreshold":1,"replicas":-1}`}, fallbackHas: "replicas must not be negative"},
		{name: "fallback unknown behavior", annotations: map[string]string{FallbackAnnotation: `{"failureThreshold":1,"replicas":1,"behavior":"Static"}`}, fallbackHas: `"Static"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ObjectOfHPA(&autoscalingv2.HorizontalPodAutoscaler{}).Extensions()
			if tc.annotations != nil {
				h := &autoscalingv2.HorizontalPodAutoscaler{}
				h.Annotations = tc.annotations
				got = ObjectOfHPA(h).Extensions()
			}
			problems := got.DryRunProblem + got.FallbackProblem
			got.DryRunProblem, got.FallbackProblem = "", ""
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Extensions = %+v, want %+v", got, tc.want)
			}
			for _, has := range []string{tc.dryRunHas, tc.fallbackHas} {
				if has != "" && !strings.Contains(problems, has) {
					t.Errorf("problems %q do not contain %q", problems, has)
				}
			}
			if tc.dryRunHas == "" && tc.fallbackHas == "" && problems != "" {
				t.Errorf("problems %q, want none", problems)
			}
			if tc.fallbackHas != "" && !strings.Contains(problems, FallbackAnnotation) {
				t.Errorf("problem %q does not name the annotation", problems)
			}
		})
	}
}

// TestMetricFailuresPersisted: the count goes into status.tidal or the
// annotation, is removed at 0, and makes the status differ.
func TestMetricFailuresPersisted(t *testing.T) {
	objs := map[string]func() Object{
		// The controller always writes a status.tidal.
		"crd": func() Object {
			return ObjectOfHA(&v1alpha1.HorizontalAutoscaler{Status: v1alpha1.HorizontalAutoscalerStatus{Tidal: &v1alpha1.TidalStatus{Reference: "Deployment/web"}}})
		},
		"native": func() Object { return ObjectOfHPA(&autoscalingv2.HorizontalPodAutoscaler{}) },
	}
	for name, newObj := range objs {
		t.Run(name, func(t *testing.T) {
			o := newObj()
			before := o.DeepCopy()
			o.SetMetricFailures(0)
			if !o.StatusEqual(before) || len(o.GetAnnotations()) != 0 {
				t.Errorf("0 changed the object: %+v", o.Runtime())
			}
			o.SetMetricFailures(2)
			if o.MetricFailures() != 2 || o.StatusEqual(before) {
				t.Errorf("MetricFailures %d, StatusEqual %v after setting 2", o.MetricFailures(), o.StatusEqual(before))
			}
			o.SetMetricFailures(0)
			if o.MetricFailures() != 0 || !o.StatusEqual(before) {
				t.Errorf("after removing: %d", o.MetricFailures())
			}
		})
	}
}

// TestMetricFailuresOfAnnotation: the annotation's count, 0 for anything
// but a non-negative int32; reading an object without it allocates
// nothing (it is read several times a reconcile).
func TestMetricFailuresOfAnnotation(t *testing.T) {
	tests := []struct {
		name  string
		value *string
		want  int32
	}{
		{name: "absent", want: 0},
		{name: "a count", value: ptr.To("3"), want: 3},
		{name: "empty", value: ptr.To(""), want: 0},
		{name: "negative", value: ptr.To("-3"), want: 0},
		{name: "not a number", value: ptr.To("three"), want: 0},
		{name: "beyond int32", value: ptr.To("4294967296"), want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &autoscalingv2.HorizontalPodAutoscaler{}
			h.Annotations = map[string]string{"other": "x"}
			if tt.value != nil {
				h.Annotations[MetricFailuresAnnotation] = *tt.value
			}
			if n := ObjectOfHPA(h).MetricFailures(); n != tt.want {
				t.Errorf("MetricFailures = %d, want %d", n, tt.want)
			}
		})
	}
	h := ObjectOfHPA(&autoscalingv2.HorizontalPodAutoscaler{})
	if n := testing.AllocsPerRun(100, func() { h.MetricFailures() }); n != 0 {
		t.Errorf("reading an absent count allocated %v times, want 0", n)
	}
}
