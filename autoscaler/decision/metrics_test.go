package decision

import (
	"errors"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func q(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
func i32(v int32) *int32            { return &v }

func cpuUtilization(target int32) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &target}}}
}

func memAverage(v string) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: corev1.ResourceMemory, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q(v)}}}
}

func containerCPU(container string, target int32) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ContainerResourceMetricSourceType, ContainerResource: &autoscalingv2.ContainerResourceMetricSource{
		Name: corev1.ResourceCPU, Container: container, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &target}}}
}

func podsMetric(name, v string) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: name}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q(v)}}}
}

func objectMetric(name string, t autoscalingv2.MetricTarget) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{
		DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "networking.k8s.io/v1", Kind: "Ingress", Name: "front"},
		Metric:          autoscalingv2.MetricIdentifier{Name: name}, Target: t}}
}

func externalMetric(name string, sel *metav1.LabelSelector, t autoscalingv2.MetricTarget) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: name, Selector: sel}, Target: t}}
}

var (
	valueTarget   = autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: q("15")}
	averageTarget = autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q("5")}
	badSelector   = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Bogus"}}}
	queueSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"queue": "jobs"}}
)

func TestPlanAndMetricName(t *testing.T) {
	mismatchedObject := objectMetric("qps", autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, AverageValue: q("5")})
	badObjectSelector := objectMetric("qps", valueTarget)
	badObjectSelector.Object.Metric.Selector = badSelector
	badPodsSelector := podsMetric("rps", "10")
	badPodsSelector.Pods.Metric.Selector = badSelector
	noResourceTarget := cpuUtilization(50)
	noResourceTarget.Resource.Target.AverageUtilization = nil
	noContainerTarget := containerCPU("app", 50)
	noContainerTarget.ContainerResource.Target.AverageUtilization = nil
	// AverageValue wins over AverageUtilization whatever the type says.
	both := cpuUtilization(50)
	both.Resource.Target.AverageValue = q("100m")

	tests := []struct {
		name       string
		spec       autoscalingv2.MetricSpec
		wantMethod Method
		wantName   string
		wantReason string // failure reason when the plan fails
		wantErr    string
	}{
		{name: "resource utilization", spec: cpuUtilization(50), wantMethod: MethodResourceUtilization, wantName: "cpu resource utilization (percentage of request)"},
		{name: "resource average value", spec: memAverage("100Mi"), wantMethod: MethodResourceAverageValue, wantName: "memory resource"},
		{name: "average value wins", spec: both, wantMethod: MethodResourceAverageValue, wantName: "cpu resource"},
		{name: "container resource utilization", spec: containerCPU("app", 60), wantMethod: MethodContainerResourceUtilization, wantName: "cpu container resource utilization (percentage of request)"},
		{name: "pods", spec: podsMetric("rps", "10"), wantMethod: MethodPodsAverageValue, wantName: "pods metric rps"},
		{name: "object value", spec: objectMetric("qps", valueTarget), wantMethod: MethodObjectValue, wantName: "Ingress metric qps"},
		// Upstream names an Object AverageValue metric like an external metric.
		{name: "object average value", spec: objectMetric("qps", averageTarget), wantMethod: MethodObjectAverageValue, wantName: "external metric qps(nil)"},
		{name: "external value", spec: externalMetric("queue_len", nil, valueTarget), wantMethod: MethodExternalValue, wantName: "external metric queue_len(nil)"},
		{name: "external average value with selector", spec: externalMetric("queue_len", queueSelector, averageTarget), wantMethod: MethodExternalAverageValue,
			wantName: "external metric queue_len(&LabelSelector{MatchLabels:map[string]string{queue: jobs,},MatchExpressions:[]LabelSelectorRequirement{},})"},
		{name: "object target type must match", spec: mismatchedObject, wantReason: "FailedGetObjectMetric",
			wantErr: "failed to get object metric value: invalid object metric source: neither a value target nor an average value target was set"},
		{name: "object bad selector", spec: badObjectSelector, wantReason: "FailedGetObjectMetric",
			wantErr: `failed to get object metric value: "Bogus" is not a valid label selector operator`},
		{name: "pods bad selector", spec: badPodsSelector, wantReason: "FailedGetPodsMetric",
			wantErr: `failed to get pods metric value: "Bogus" is not a valid label selector operator`},
		{name: "resource without target", spec: noResourceTarget, wantReason: "FailedGetResourceMetric",
			wantErr: "failed to get cpu resource metric value: invalid resource metric source: neither an average utilization target nor an average value (usage) target was set"},
		{name: "container resource without target", spec: noContainerTarget, wantReason: "FailedGetContainerResourceMetric",
			wantErr: "failed to get app container metric value: invalid resource metric source: neither an average utilization target nor an average value (usage) target was set"},
		{name: "external without target", spec: externalMetric("q", nil, autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType}), wantReason: "FailedGetExternalMetric",
			wantErr: "failed to get q external metric value: invalid external metric source: neither a value target nor an average value target was set"},
		{name: "unknown type", spec: autoscalingv2.MetricSpec{Type: "Bogus"}, wantReason: "InvalidMetricSourceType",
			wantErr: `unknown metric source type "Bogus"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, fail := Plan(tt.spec)
			if tt.wantReason != "" {
				if fail == nil {
					t.Fatalf("Plan succeeded with %v, want failure %s", m, tt.wantReason)
				}
				if fail.Condition.Reason != tt.wantReason || fail.EventReason != tt.wantReason || fail.Err.Error() != tt.wantErr {
					t.Errorf("failure %+v, want %s %q", fail, tt.wantReason, tt.wantErr)
				}
				if fail.Condition.Type != autoscalingv2.ScalingActive || fail.Condition.Status != corev1.ConditionFalse {
					t.Errorf("condition %+v", fail.Condition)
				}
				if got := Failed(tt.spec, errors.New("ignored")); got.Err.Error() != tt.wantErr {
					t.Errorf("Failed() = %q, want the plan failure %q", got.Err, tt.wantErr)
				}
				return
			}
			if fail != nil || m != tt.wantMethod {
				t.Fatalf("Plan = %v, %+v; want %v", m, fail, tt.wantMethod)
			}
			if got := MetricName(tt.spec); got != tt.wantName {
				t.Errorf("MetricName = %q, want %q", got, tt.wantName)
			}
			if o := Succeeded(tt.spec, 7); !o.Valid() || o.Replicas != 7 || o.Name != tt.wantName {
				t.Errorf("Succeeded = %+v", o)
			}
		})
	}
}

func TestFailed(t *testing.T) {
	calc := errors.New("boom")
	tests := []struct {
		name        string
		spec        autoscalingv2.MetricSpec
		wantReason  string
		wantMessage string // condition message
		wantEvent   string
		wantErr     string
	}{
		{name: "resource utilization", spec: cpuUtilization(50), wantReason: "FailedGetResourceMetric",
			wantMessage: "the HPA was unable to compute the replica count: failed to get cpu utilization: boom",
			wantEvent:   "failed to get cpu utilization: boom",
			wantErr:     "failed to get cpu resource metric value: failed to get cpu utilization: boom"},
		{name: "resource average value", spec: memAverage("1Gi"), wantReason: "FailedGetResourceMetric",
			wantMessage: "the HPA was unable to compute the replica count: failed to get memory usage: boom",
			wantEvent:   "failed to get memory usage: boom",
			wantErr:     "failed to get memory resource metric value: failed to get memory usage: boom"},
		{name: "container resource", spec: containerCPU("app", 50), wantReason: "FailedGetContainerResourceMetric",
			wantMessage: "the HPA was unable to compute the replica count: failed to get cpu utilization: boom",
			wantEvent:   "failed to get cpu utilization: boom",
			wantErr:     "failed to get app container metric value: failed to get cpu utilization: boom"},
		{name: "pods", spec: podsMetric("rps", "1"), wantReason: "FailedGetPodsMetric",
			wantMessage: "the HPA was unable to compute the replica count: boom", wantEvent: "boom",
			wantErr: "failed to get pods metric value: boom"},
		{name: "object value", spec: objectMetric("qps", valueTarget), wantReason: "FailedGetObjectMetric",
			wantMessage: "the HPA was unable to compute the replica count: boom", wantEvent: "boom",
			wantErr: "failed to get object metric value: boom"},
		{name: "object average value", spec: objectMetric("qps", averageTarget), wantReason: "FailedGetObjectMetric",
			wantMessage: "the HPA was unable to compute the replica count: boom", wantEvent: "boom",
			wantErr: "failed to get object metric value: failed to get qps object metric: boom"},
		{name: "external value", spec: externalMetric("q", nil, valueTarget), wantReason: "FailedGetExternalMetric",
			wantMessage: "the HPA was unable to compute the replica count: boom", wantEvent: "boom",
			wantErr: "failed to get q external metric value: failed to get external metric q: boom"},
		{name: "external average value", spec: externalMetric("q", nil, averageTarget), wantReason: "FailedGetExternalMetric",
			wantMessage: "the HPA was unable to compute the replica count: boom", wantEvent: "boom",
			wantErr: "failed to get q external metric value: failed to get q external metric: boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Failed(tt.spec, calc)
			if o.Valid() {
				t.Fatal("outcome is valid")
			}
			if o.Condition.Reason != tt.wantReason || o.Condition.Message != tt.wantMessage || o.EventReason != tt.wantReason ||
				o.EventMessage != tt.wantEvent || o.Err.Error() != tt.wantErr {
				t.Errorf("got %+v (err %q)", o, o.Err)
			}
			if !errors.Is(o.Err, calc) {
				t.Errorf("error chain lost the cause")
			}
		})
	}
}

func TestCombine(t *testing.T) {
	ok := func(n int32, name string) MetricOutcome { return MetricOutcome{Replicas: n, Name: name} }
	bad := func(msg string) MetricOutcome {
		return failure("FailedGetPodsMetric", errors.New(msg), errors.New(msg))
	}
	tests := []struct {
		name       string
		spec       int32
		outcomes   []MetricOutcome
		wantFatal  bool
		want       int32
		wantName   string
		wantErr    string
		wantActive string // ScalingActive reason
	}{
		{name: "max of proposals", spec: 3, outcomes: []MetricOutcome{ok(2, "a"), ok(5, "b"), ok(4, "c")},
			want: 5, wantName: "b", wantActive: "ValidMetricFound"},
		{name: "ties keep the first", spec: 3, outcomes: []MetricOutcome{ok(4, "a"), ok(4, "b")},
			want: 4, wantName: "a", wantActive: "ValidMetricFound"},
		{name: "a zero proposal is replaced by a later one", spec: 3, outcomes: []MetricOutcome{ok(0, "a"), ok(0, "b")},
			want: 0, wantName: "b", wantActive: "ValidMetricFound"},
		{name: "invalid metric does not block a scale up", spec: 3, outcomes: []MetricOutcome{bad("x"), ok(5, "b")},
			want: 5, wantName: "b", wantActive: "ValidMetricFound", wantErr: "invalid metrics (1 invalid out of 2), first error is: x"},
		{name: "invalid metric allows keeping the count", spec: 3, outcomes: []MetricOutcome{ok(3, "a"), bad("x")},
			want: 3, wantName: "a", wantActive: "ValidMetricFound", wantErr: "invalid metrics (1 invalid out of 2), first error is: x"},
		{name: "no scale down while a metric is invalid", spec: 3, outcomes: []MetricOutcome{ok(2, "a"), bad("x"), bad("y")},
			wantFatal: true, want: -1, wantActive: "FailedGetPodsMetric", wantErr: "invalid metrics (2 invalid out of 3), first error is: x"},
		{name: "all invalid", spec: 3, outcomes: []MetricOutcome{bad("x")},
			wantFatal: true, want: -1, wantActive: "FailedGetPodsMetric", wantErr: "invalid metrics (1 invalid out of 1), first error is: x"},
		{name: "all valid scale down", spec: 3, outcomes: []MetricOutcome{ok(1, "a"), ok(2, "b")},
			want: 2, wantName: "b", wantActive: "ValidMetricFound"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Combine(tt.spec, tt.outcomes)
			if c.Fatal() != tt.wantFatal || c.Replicas != tt.want || c.Name != tt.wantName {
				t.Errorf("got %+v, want fatal=%v replicas %d name %q", c, tt.wantFatal, tt.want, tt.wantName)
			}
			gotErr := ""
			if c.Err != nil {
				gotErr = c.Err.Error()
			}
			if gotErr != tt.wantErr {
				t.Errorf("err %q, want %q", gotErr, tt.wantErr)
			}
			if c.ScalingActive == nil || c.ScalingActive.Reason != tt.wantActive {
				t.Fatalf("ScalingActive %+v, want %s", c.ScalingActive, tt.wantActive)
			}
			if !tt.wantFatal && c.ScalingActive.Message != "the HPA was able to successfully calculate a replica count from "+tt.wantName {
				t.Errorf("message %q", c.ScalingActive.Message)
			}
		})
	}
}
