package autoscale

import (
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/utils/ptr"
)

func qty(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

func TestParseMetric(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    autoscalingv2.MetricSpec
		wantErr string
	}{{
		name: "pods average value",
		in:   "pods:http_requests_per_second:avg=100",
		want: autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "http_requests_per_second"},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: qty("100")}}},
	}, {
		name: "pods with selector and a quantity suffix",
		in:   "pods:rps:avg=500m,selector=tier=front",
		want: autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "rps", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "front"}}},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: qty("500m")}}},
	}, {
		name: "external average value with selector",
		in:   "external:queue_depth:avg=30,selector=queue=orders",
		want: autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "queue_depth", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"queue": "orders"}}},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: qty("30")}}},
	}, {
		name: "external value, selector with commas and set operators",
		in:   "external:queue_depth:value=1k,selector=queue=orders,env in (prod,staging)",
		want: autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "queue_depth", Selector: &metav1.LabelSelector{
				MatchLabels:      map[string]string{"queue": "orders"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: []string{"prod", "staging"}}}}},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: qty("1k")}}},
	}, {
		name: "name with colons (a recording rule) and upper-case type",
		in:   "Pods:job:http_requests:rate5m:avg=10",
		want: autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "job:http_requests:rate5m"},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: qty("10")}}},
	}, {
		name: "resource utilization",
		in:   "resource:memory:util=70%",
		want: autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
			Name: "memory", Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](70)}}},
	}, {
		name: "resource average value",
		in:   "resource:memory:avg=200Mi",
		want: autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
			Name: "memory", Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: qty("200Mi")}}},
	},
		{name: "empty", in: "", wantErr: "want three parts"},
		{name: "two parts", in: "pods:rps", wantErr: "want three parts"},
		{name: "empty name", in: "pods::avg=1", wantErr: "the metric name is empty"},
		{name: "unknown type", in: "object:rps:avg=1", wantErr: `unknown type "object"`},
		{name: "target without value", in: "pods:rps:avg", wantErr: `target "avg" is not KEY=VALUE`},
		{name: "unknown target", in: "pods:rps:max=1", wantErr: `unknown target "max"`},
		{name: "not a quantity", in: "pods:rps:avg=lots", wantErr: "is not a quantity"},
		{name: "zero quantity", in: "external:q:value=0", wantErr: "must be greater than 0"},
		{name: "pods value", in: "pods:rps:value=1", wantErr: "a pods metric takes only avg=QUANTITY"},
		{name: "external util", in: "external:q:util=50", wantErr: "an external metric takes avg=QUANTITY or value=QUANTITY"},
		{name: "resource value", in: "resource:cpu:value=1", wantErr: "a resource metric takes avg=QUANTITY or util=PERCENT"},
		{name: "bad util", in: "resource:cpu:util=1.5", wantErr: "not a whole percentage"},
		{name: "resource selector", in: "resource:cpu:util=50,selector=a=b", wantErr: "a resource metric takes no selector"},
		{name: "empty selector", in: "pods:rps:avg=1,selector=", wantErr: "the selector is empty"},
		{name: "bad selector", in: "pods:rps:avg=1,selector=a==b==c", wantErr: "selector:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseMetric(tt.in)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseMetric(%q) = %+v, want an error containing %q", tt.in, got, tt.wantErr)
				}
				// Every error names the flag, the value and the expected form.
				for _, want := range []string{tt.wantErr, "--metric", tt.in, "expected TYPE:NAME:TARGET"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not contain %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseMetric(%q): %v", tt.in, err)
			}
			if !apiequality.Semantic.DeepEqual(tt.want, got) {
				t.Errorf("ParseMetric(%q) (-want +got):\n%s", tt.in, diff.Diff(tt.want, got))
			}
		})
	}
}
