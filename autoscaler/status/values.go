package status

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/autoscaler/source"
)

// MetricValuesOnly reports whether obj's status differs from original's
// in the values of status.currentMetrics alone: the same metrics, each
// with the same kinds of value (value, averageValue, averageUtilization),
// and everything else equal (replicas, conditions with their times,
// observedGeneration, lastScaleTime, tidal's decision, history and failure
// count). status.tidal.targets, which prints those values, is taken as
// part of them. A status equal to original's is not such a change.
func MetricValuesOnly(obj, original source.Object) bool {
	cur := obj.HPAStatus().CurrentMetrics
	if !sameMetrics(cur, original.HPAStatus().CurrentMetrics) {
		return false
	}
	// original with obj's values: equal to obj when nothing else differs.
	probe := original.DeepCopy()
	probe.HPAStatus().CurrentMetrics = cur
	if t, ok := tidalOf(obj); ok {
		if pt, ok := tidalOf(probe); ok {
			pt.Targets = t.Targets
		}
	}
	return !obj.StatusEqual(original) && probe.StatusEqual(obj)
}

// tidalOf is status.tidal of a HorizontalAutoscaler; false for other
// kinds and when it has none.
func tidalOf(obj source.Object) (*v1alpha1.TidalStatus, bool) {
	ha, ok := obj.Runtime().(*v1alpha1.HorizontalAutoscaler)
	if !ok || ha.Status.Tidal == nil {
		return nil, false
	}
	return ha.Status.Tidal, true
}

// sameMetrics reports whether a and b are the same metrics in the same
// order, with values of the same kinds, whatever the values.
func sameMetrics(a, b []autoscalingv2.MetricStatus) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !apiequality.Semantic.DeepEqual(withoutValues(a[i]), withoutValues(b[i])) {
			return false
		}
	}
	return true
}

// withoutValues is a copy of m whose current values are all zero, those
// it has and no others.
func withoutValues(m autoscalingv2.MetricStatus) autoscalingv2.MetricStatus {
	out := *m.DeepCopy()
	for _, cur := range currents(&out) {
		*cur = zeroValues(*cur)
	}
	return out
}

// currents are the current values in m, of whichever source it has.
func currents(m *autoscalingv2.MetricStatus) []*autoscalingv2.MetricValueStatus {
	var out []*autoscalingv2.MetricValueStatus
	if m.Resource != nil {
		out = append(out, &m.Resource.Current)
	}
	if m.ContainerResource != nil {
		out = append(out, &m.ContainerResource.Current)
	}
	if m.Pods != nil {
		out = append(out, &m.Pods.Current)
	}
	if m.Object != nil {
		out = append(out, &m.Object.Current)
	}
	if m.External != nil {
		out = append(out, &m.External.Current)
	}
	return out
}

// zeroValues keeps which values v has, each zero.
func zeroValues(v autoscalingv2.MetricValueStatus) autoscalingv2.MetricValueStatus {
	var out autoscalingv2.MetricValueStatus
	if v.Value != nil {
		out.Value = &resource.Quantity{}
	}
	if v.AverageValue != nil {
		out.AverageValue = &resource.Quantity{}
	}
	if v.AverageUtilization != nil {
		out.AverageUtilization = ptr.To[int32](0)
	}
	return out
}
