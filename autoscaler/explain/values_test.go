package explain

import (
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func q(s string) *resource.Quantity { return ptr.To(resource.MustParse(s)) }

func TestTargetAndCurrent(t *testing.T) {
	memAvg := autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: corev1.ResourceMemory, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q("512Mi")}}}
	sidecar := autoscalingv2.MetricSpec{Type: autoscalingv2.ContainerResourceMetricSourceType, ContainerResource: &autoscalingv2.ContainerResourceMetricSource{
		Name: corev1.ResourceCPU, Container: "app", Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](70)}}}
	ingressValue := autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "hits"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: q("2k")}}}
	queueValue := autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "queue_length"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: q("100")}}}
	noUtilization := autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType}}}

	tests := []struct {
		name        string
		spec        autoscalingv2.MetricSpec
		status      *autoscalingv2.MetricStatus
		wantTarget  string
		wantCurrent string
	}{
		{name: "resource utilization with its average", spec: cpuSpec, status: &cpuStatus, wantTarget: "60%", wantCurrent: "113% (565m)"},
		{name: "resource utilization without its average", spec: cpuSpec,
			status: &autoscalingv2.MetricStatus{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{
				Name: corev1.ResourceCPU, Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr.To[int32](40)}}},
			wantTarget: "60%", wantCurrent: "40%"},
		{name: "resource average value", spec: memAvg,
			status: &autoscalingv2.MetricStatus{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{
				Name: corev1.ResourceMemory, Current: autoscalingv2.MetricValueStatus{AverageValue: q("300Mi")}}},
			wantTarget: "512Mi", wantCurrent: "300Mi"},
		{name: "container resource", spec: sidecar,
			status: &autoscalingv2.MetricStatus{Type: autoscalingv2.ContainerResourceMetricSourceType, ContainerResource: &autoscalingv2.ContainerResourceMetricStatus{
				Name: corev1.ResourceCPU, Container: "app", Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr.To[int32](80), AverageValue: q("400m")}}},
			wantTarget: "70%", wantCurrent: "80% (400m)"},
		{name: "pods average", spec: rpsSpec, status: &rpsStatus, wantTarget: "80", wantCurrent: "33900m"},
		{name: "object value", spec: ingressValue,
			status: &autoscalingv2.MetricStatus{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricStatus{
				Metric: autoscalingv2.MetricIdentifier{Name: "hits"}, Current: autoscalingv2.MetricValueStatus{Value: q("2500")}}},
			wantTarget: "2k", wantCurrent: "2500"},
		{name: "external average", spec: queueSpec,
			status: &autoscalingv2.MetricStatus{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricStatus{
				Metric: autoscalingv2.MetricIdentifier{Name: "queue_length"}, Current: autoscalingv2.MetricValueStatus{AverageValue: q("12")}}},
			wantTarget: "30 (avg)", wantCurrent: "12"},
		{name: "external value", spec: queueValue,
			status: &autoscalingv2.MetricStatus{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricStatus{
				Metric: autoscalingv2.MetricIdentifier{Name: "queue_length"}, Current: autoscalingv2.MetricValueStatus{Value: q("140")}}},
			wantTarget: "100", wantCurrent: "140"},
		{name: "failed metric: no status", spec: queueSpec, wantTarget: "30 (avg)", wantCurrent: "<unknown>"},
		{name: "failed metric: empty status entry", spec: cpuSpec, status: &autoscalingv2.MetricStatus{}, wantTarget: "60%", wantCurrent: "<unknown>"},
		{name: "utilization target without a value (bypassed validation)", spec: noUtilization, wantTarget: "<auto>", wantCurrent: "<unknown>"},
		{name: "type without its source", spec: autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType}, wantTarget: "<unknown>", wantCurrent: "<unknown>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Target(tt.spec); got != tt.wantTarget {
				t.Errorf("Target = %q, want %q", got, tt.wantTarget)
			}
			if got := Current(tt.spec, tt.status); got != tt.wantCurrent {
				t.Errorf("Current = %q, want %q", got, tt.wantCurrent)
			}
		})
	}
}
