package status

import (
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/autoscaler/source"
)

func cpuAt(util int32, milli int64) autoscalingv2.MetricStatus {
	return autoscalingv2.MetricStatus{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{
		Name:    corev1.ResourceCPU,
		Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr.To(util), AverageValue: resource.NewMilliQuantity(milli, resource.DecimalSI)},
	}}
}

func queueAt(v int64) autoscalingv2.MetricStatus {
	return autoscalingv2.MetricStatus{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricStatus{
		Metric:  autoscalingv2.MetricIdentifier{Name: "queue"},
		Current: autoscalingv2.MetricValueStatus{Value: resource.NewQuantity(v, resource.DecimalSI)},
	}}
}

// storedHA is a HorizontalAutoscaler as a reconcile reads it.
func storedHA() source.Object {
	t0 := metav1.NewTime(time.Unix(1000, 0))
	ha := &v1alpha1.HorizontalAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Generation: 2}}
	ha.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{Kind: "Deployment", Name: "web"}
	ha.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)},
	}}, {Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "queue"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: resource.NewQuantity(10, resource.DecimalSI)},
	}}}
	ha.Status.HorizontalPodAutoscalerStatus = autoscalingv2.HorizontalPodAutoscalerStatus{
		ObservedGeneration: ptr.To[int64](2), CurrentReplicas: 5, DesiredReplicas: 5,
		CurrentMetrics: []autoscalingv2.MetricStatus{cpuAt(48, 240), queueAt(9)},
		Conditions: []autoscalingv2.HorizontalPodAutoscalerCondition{
			{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionTrue, Reason: "ReadyForNewScale", LastTransitionTime: t0},
			{Type: autoscalingv2.ScalingActive, Status: corev1.ConditionTrue, Reason: "ValidMetricFound", LastTransitionTime: t0},
		},
	}
	obj := source.ObjectOfHA(ha)
	obj.SetTidalStatus(Tidal(obj, &v1alpha1.Decision{CurrentReplicas: 5, ProposedReplicas: 5, DesiredReplicas: 5}))
	obj.SetPersistedHistory("h1")
	return obj
}

// storedHPA is an autoscaling/v2 HorizontalPodAutoscaler as a reconcile
// reads it.
func storedHPA() source.Object {
	ha := storedHA().Runtime().(*v1alpha1.HorizontalAutoscaler)
	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: ha.ObjectMeta, Spec: ha.Spec.HorizontalPodAutoscalerSpec, Status: ha.Status.HorizontalPodAutoscalerStatus}
	return source.ObjectOfHPA(hpa)
}

// TestMetricValuesOnly: only a change of currentMetrics values (and of
// status.tidal.targets, which prints them) is one; anything else in the
// status changed with them is not.
func TestMetricValuesOnly(t *testing.T) {
	t1 := metav1.NewTime(time.Unix(2000, 0))
	newValues := func(o source.Object) {
		o.HPAStatus().CurrentMetrics = []autoscalingv2.MetricStatus{cpuAt(52, 260), queueAt(11)}
		o.SetTidalStatus(Tidal(o, &v1alpha1.Decision{CurrentReplicas: 5, ProposedReplicas: 5, DesiredReplicas: 5}))
		o.SetPersistedHistory("h1")
	}
	tests := []struct {
		name   string
		stored func() source.Object
		change func(o source.Object)
		want   bool
	}{
		{name: "nothing changed", stored: storedHA, change: func(source.Object) {}, want: false},
		{name: "values and the targets column", stored: storedHA, change: newValues, want: true},
		{name: "values, desired replicas", stored: storedHA, change: func(o source.Object) {
			newValues(o)
			o.HPAStatus().DesiredReplicas = 6
		}},
		{name: "values, current replicas", stored: storedHA, change: func(o source.Object) {
			newValues(o)
			o.HPAStatus().CurrentReplicas = 4
		}},
		{name: "values, a condition's reason", stored: storedHA, change: func(o source.Object) {
			newValues(o)
			o.HPAStatus().Conditions[0].Reason = "ScaleDownStabilized"
		}},
		{name: "values, a condition's lastTransitionTime", stored: storedHA, change: func(o source.Object) {
			newValues(o)
			o.HPAStatus().Conditions[1].LastTransitionTime = t1
		}},
		{name: "values, observedGeneration", stored: storedHA, change: func(o source.Object) {
			newValues(o)
			o.HPAStatus().ObservedGeneration = ptr.To[int64](3)
		}},
		{name: "values, lastScaleTime", stored: storedHA, change: func(o source.Object) {
			newValues(o)
			o.HPAStatus().LastScaleTime = &t1
		}},
		{name: "values, tidal's decision", stored: storedHA, change: func(o source.Object) {
			newValues(o)
			o.SetTidalStatus(Tidal(o, &v1alpha1.Decision{CurrentReplicas: 5, ProposedReplicas: 6, DesiredReplicas: 5}))
			o.SetPersistedHistory("h1")
		}},
		{name: "values, the history", stored: storedHA, change: func(o source.Object) {
			newValues(o)
			o.SetPersistedHistory("h2")
		}},
		{name: "values, the failure count", stored: storedHA, change: func(o source.Object) {
			newValues(o)
			o.SetMetricFailures(1)
		}},
		{name: "a metric failed (its entry emptied)", stored: storedHA, change: func(o source.Object) {
			newValues(o)
			o.HPAStatus().CurrentMetrics[1] = autoscalingv2.MetricStatus{}
		}},
		{name: "a value of another kind", stored: storedHA, change: func(o source.Object) {
			newValues(o)
			o.HPAStatus().CurrentMetrics[1].External.Current = autoscalingv2.MetricValueStatus{AverageValue: resource.NewQuantity(3, resource.DecimalSI)}
		}},
		{name: "a metric fewer", stored: storedHA, change: func(o source.Object) {
			newValues(o)
			o.HPAStatus().CurrentMetrics = o.HPAStatus().CurrentMetrics[:1]
		}},
		{name: "no metrics any more", stored: storedHA, change: func(o source.Object) {
			o.HPAStatus().CurrentMetrics = nil
		}},
		{name: "native: values", stored: storedHPA, change: newValues, want: true},
		{name: "native: values, the failure count", stored: storedHPA, change: func(o source.Object) {
			newValues(o)
			o.SetMetricFailures(2)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			original := tt.stored()
			obj := original.DeepCopy()
			tt.change(obj)
			if got := MetricValuesOnly(obj, original); got != tt.want {
				t.Errorf("MetricValuesOnly = %v, want %v", got, tt.want)
			}
		})
	}
}

// BenchmarkMetricValuesOnly is its cost beside the StatusEqual every status
// write already makes: a reconcile computes both whenever a status changed.
func BenchmarkMetricValuesOnly(b *testing.B) {
	for _, stored := range []struct {
		name string
		obj  func() source.Object
	}{{"crd", storedHA}, {"native", storedHPA}} {
		original := stored.obj()
		obj := original.DeepCopy()
		obj.HPAStatus().CurrentMetrics = []autoscalingv2.MetricStatus{cpuAt(52, 260), queueAt(11)}
		b.Run(stored.name+"/MetricValuesOnly", func(b *testing.B) {
			for b.Loop() {
				MetricValuesOnly(obj, original)
			}
		})
		b.Run(stored.name+"/StatusEqual", func(b *testing.B) {
			for b.Loop() {
				obj.StatusEqual(original)
			}
		})
	}
}
