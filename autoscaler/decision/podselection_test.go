package decision

import (
	"math"
	"reflect"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func TestDeletionCost(t *testing.T) {
	tests := []struct {
		name          string
		value, target int64
		want          int32
	}{
		{"idle", 0, 500, 0},
		{"at target", 500, 500, 1000},
		{"twice the target", 1000, 500, 2000},
		{"a thousandth rounds", 1, 2000, 1},                                  // 0.5 rounds away from zero
		{"below a half thousandth", 1, 3000, 0},                              // 0.33
		{"memory in bytes (milli) against 512Mi", 300 << 30, 512 << 30, 586}, // 300Mi/512Mi
		{"negative value", -250, 500, -500},
		{"clamped above", math.MaxInt64, 1, math.MaxInt32},
		{"clamped below", math.MinInt64, 1, math.MinInt32},
		{"zero target", 100, 0, 0},
		{"negative target", 100, -5, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DeletionCost(tt.value, tt.target); got != tt.want {
				t.Errorf("DeletionCost(%d, %d) = %d, want %d", tt.value, tt.target, got, tt.want)
			}
		})
	}
	// Higher load, higher cost.
	for v := int64(0); v < 5000; v += 7 {
		if DeletionCost(v, 700) > DeletionCost(v+7, 700) {
			t.Fatalf("not monotone at %d", v)
		}
	}
}

func TestCostPatches(t *testing.T) {
	s := func(v string) *string { return &v }
	pods := []string{"a", "b", "c", "d", "e"}
	current := map[string]string{"a": "100", "b": "7", "d": "42", "e": "+5"}
	costs := map[string]int32{"a": 100, "b": 250, "c": 0, "e": 5}
	got := CostPatches(pods, current, costs)
	want := []CostPatch{
		{Pod: "b", Value: s("250")}, // changed
		{Pod: "c", Value: s("0")},   // none yet
		{Pod: "d"},                  // no value this sync: removed
		{Pod: "e", Value: s("5")},   // not the canonical form
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("CostPatches = %s, want %s", patchesString(got), patchesString(want))
	}
	// Applied, nothing more to write.
	for _, p := range got {
		if p.Value == nil {
			delete(current, p.Pod)
		} else {
			current[p.Pod] = *p.Value
		}
	}
	if again := CostPatches(pods, current, costs); len(again) != 0 {
		t.Errorf("after applying: %s, want none", patchesString(again))
	}
	// A pod listed twice is written once.
	if got := CostPatches([]string{"x", "x"}, nil, map[string]int32{"x": 1}); len(got) != 1 {
		t.Errorf("duplicate pod: %s", patchesString(got))
	}
}

func patchesString(ps []CostPatch) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.Pod + "=")
		if p.Value == nil {
			b.WriteString("<remove> ")
		} else {
			b.WriteString(*p.Value + " ")
		}
	}
	return b.String()
}

func TestSelectionMetric(t *testing.T) {
	cpu := autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}}}
	rps := autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "rps"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("10"))}}}
	queue := autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "queue"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: ptr.To(resource.MustParse("10"))}}}
	metrics := []autoscalingv2.MetricSpec{queue, cpu, rps}
	tests := []struct {
		typ     autoscalingv2.MetricSourceType
		name    string
		want    int
		errHave []string
	}{
		{autoscalingv2.ResourceMetricSourceType, "cpu", 1, nil},
		{autoscalingv2.PodsMetricSourceType, "rps", 2, nil},
		{autoscalingv2.ResourceMetricSourceType, "memory", -1, []string{`Resource metric "memory" is not among spec.metrics`, "Resource cpu, Pods rps"}},
		{autoscalingv2.PodsMetricSourceType, "cpu", -1, []string{`Pods metric "cpu" is not among`}},
		{autoscalingv2.ExternalMetricSourceType, "queue", -1, []string{`metric type "External" cannot select pods`, "Resource or Pods"}},
		{autoscalingv2.ContainerResourceMetricSourceType, "cpu", -1, []string{`"ContainerResource" cannot select pods`}},
	}
	for _, tt := range tests {
		i, err := SelectionMetric(metrics, tt.typ, tt.name)
		if i != tt.want {
			t.Errorf("%s %s: index %d, want %d", tt.typ, tt.name, i, tt.want)
		}
		if (err != nil) != (tt.errHave != nil) {
			t.Errorf("%s %s: error %v", tt.typ, tt.name, err)
		}
		for _, h := range tt.errHave {
			if err == nil || !strings.Contains(err.Error(), h) {
				t.Errorf("%s %s: error %v, want it to contain %q", tt.typ, tt.name, err, h)
			}
		}
	}
	if _, err := SelectionMetric([]autoscalingv2.MetricSpec{queue}, autoscalingv2.PodsMetricSourceType, "rps"); err == nil || !strings.Contains(err.Error(), "no Resource or Pods metric") {
		t.Errorf("no per-pod metric: %v", err)
	}
}
