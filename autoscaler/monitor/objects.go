package monitor

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/prometheus/client_golang/prometheus"
)

// Label values of tidal_autoscaler_hpa_scale_events_total.
const (
	DirectionUp   = "up"
	DirectionDown = "down"

	// ScaleReasonMetric: a metric's proposal was above the current count.
	ScaleReasonMetric = "metric_above_target"
	// ScaleReasonAllBelowTarget: every metric's proposal was below it.
	ScaleReasonAllBelowTarget = "all_metrics_below_target"
	// ScaleReasonAboveMax and ScaleReasonBelowMin: the count was outside
	// [minReplicas, maxReplicas] and was clamped without reading metrics.
	ScaleReasonAboveMax = "above_max_replicas"
	ScaleReasonBelowMin = "below_min_replicas"
	// ScaleReasonFallback: every metric failed and spec.fallback applied.
	ScaleReasonFallback = "fallback"
)

// Label values of metric_target_type, as kube-state-metrics'.
const (
	targetValue       = "value"
	targetAverage     = "average"
	targetUtilization = "utilization"
)

// The per-autoscaler gauges, named and labelled like kube-state-metrics'
// kube_horizontalpodautoscaler_* (namespace and hpa_name instead of
// horizontalpodautoscaler, as the other per-object series here), the same
// in crd and native mode. Their order is the order of the exposition.
const (
	famMinReplicas = iota
	famMaxReplicas
	famCurrentReplicas
	famDesiredReplicas
	famSpecTarget
	famStatusTarget
	famCondition
	famLastScale
	numFamilies
)

type objectFamily struct {
	name, help string   // name in full: rendered on every line
	extra      []string // labels after namespace and hpa_name
}

var objectFamilies = [numFamilies]objectFamily{
	famMinReplicas:     {name: "tidal_autoscaler_hpa_spec_min_replicas", help: "spec.minReplicas of each autoscaler (1 when unset)."},
	famMaxReplicas:     {name: "tidal_autoscaler_hpa_spec_max_replicas", help: "spec.maxReplicas of each autoscaler."},
	famCurrentReplicas: {name: "tidal_autoscaler_hpa_status_current_replicas", help: "status.currentReplicas of each autoscaler after its last reconcile."},
	famDesiredReplicas: {name: "tidal_autoscaler_hpa_status_desired_replicas", help: "status.desiredReplicas of each autoscaler after its last reconcile."},
	famSpecTarget: {name: "tidal_autoscaler_hpa_spec_target_metric", extra: []string{"metric_name", "metric_target_type"},
		help: "Target of each of an autoscaler's metrics, by metric_name (the resource or metric name) and metric_target_type (value, average, utilization)."},
	famStatusTarget: {name: "tidal_autoscaler_hpa_status_target_metric", extra: []string{"metric_name", "metric_target_type"},
		help: "Current value of each of an autoscaler's metrics (status.currentMetrics), by metric_name and metric_target_type (value, average, utilization)."},
	famCondition: {name: "tidal_autoscaler_hpa_status_condition", extra: []string{"condition", "status"},
		help: "Each condition of an autoscaler: 1 on the series whose status (true, false, unknown) it has, 0 on the other two."},
	famLastScale: {name: "tidal_autoscaler_hpa_status_last_scale_time_seconds", help: "status.lastScaleTime of each autoscaler as Unix time (only autoscalers that have scaled)."},
}

// objectMetrics holds the per-autoscaler series: the gauges above, kept
// per object as it was last observed (ObjectSeries) and rendered, and the
// scale event counter (rare: a client_golang counter).
type objectMetrics struct {
	series      *ObjectSeries
	scaleEvents *prometheus.CounterVec
}

func newObjectMetrics(ns, sub string, series *ObjectSeries) *objectMetrics {
	if series == nil {
		series = NewObjectSeries()
	}
	return &objectMetrics{
		series: series,
		scaleEvents: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "hpa_scale_events_total",
			Help: "Writes of /scale by each autoscaler, by direction (up, down) and reason (metric_above_target, all_metrics_below_target, above_max_replicas, below_min_replicas, fallback)."},
			[]string{"namespace", "hpa_name", "direction", "reason"}),
	}
}

// ObserveAutoscaler records an autoscaler's spec and status as the
// tidal_autoscaler_hpa_* gauges; call it after each reconcile with the
// status it wrote (or meant to write). The object's series are replaced
// as a whole, so those of metrics and conditions it no longer has go.
func (m *Monitor) ObserveAutoscaler(namespace, name string, spec *autoscalingv2.HorizontalPodAutoscalerSpec, st *autoscalingv2.HorizontalPodAutoscalerStatus) {
	minR := int32(1)
	if spec.MinReplicas != nil {
		minR = *spec.MinReplicas
	}
	samples := make([]objectSample, 0, 16)
	add := func(fam int, v float64, extra ...string) {
		x := objectSample{family: fam, value: v}
		copy(x.extra[:], extra)
		samples = append(samples, x)
	}
	add(famMinReplicas, float64(minR))
	add(famMaxReplicas, float64(spec.MaxReplicas))
	add(famCurrentReplicas, float64(st.CurrentReplicas))
	add(famDesiredReplicas, float64(st.DesiredReplicas))
	for _, ms := range spec.Metrics {
		if metricName, t := specTarget(ms); t != nil {
			for _, tv := range targetValues(t.Value, t.AverageValue, t.AverageUtilization) {
				add(famSpecTarget, tv.value, metricName, tv.typ)
			}
		}
	}
	for _, ms := range st.CurrentMetrics {
		if metricName, c := statusCurrent(ms); c != nil {
			for _, tv := range targetValues(c.Value, c.AverageValue, c.AverageUtilization) {
				add(famStatusTarget, tv.value, metricName, tv.typ)
			}
		}
	}
	for _, c := range st.Conditions {
		for _, s := range []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown} {
			v := 0.0
			if c.Status == s {
				v = 1
			}
			add(famCondition, v, string(c.Type), conditionLabel(s))
		}
	}
	if st.LastScaleTime != nil {
		add(famLastScale, float64(st.LastScaleTime.Unix()))
	}
	m.objects.series.set(namespace, name, samples)
}

// ObserveScale counts a successful write of /scale by an autoscaler.
func (m *Monitor) ObserveScale(namespace, name, direction, reason string) {
	m.objects.scaleEvents.WithLabelValues(namespace, name, direction, reason).Inc()
}

// forget drops every tidal_autoscaler_hpa_* series of an object.
func (o *objectMetrics) forget(namespace, name string) {
	o.series.forget(namespace, name)
	o.scaleEvents.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "hpa_name": name})
}

func conditionLabel(s corev1.ConditionStatus) string {
	switch s {
	case corev1.ConditionTrue:
		return "true"
	case corev1.ConditionFalse:
		return "false"
	}
	return "unknown"
}

// specTarget is the name kube-state-metrics gives a metric (the resource
// name for Resource and ContainerResource, else the metric's name) and its
// target; nil for an unknown type or a missing source.
func specTarget(m autoscalingv2.MetricSpec) (string, *autoscalingv2.MetricTarget) {
	switch {
	case m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil:
		return string(m.Resource.Name), &m.Resource.Target
	case m.Type == autoscalingv2.ContainerResourceMetricSourceType && m.ContainerResource != nil:
		return string(m.ContainerResource.Name), &m.ContainerResource.Target
	case m.Type == autoscalingv2.PodsMetricSourceType && m.Pods != nil:
		return m.Pods.Metric.Name, &m.Pods.Target
	case m.Type == autoscalingv2.ObjectMetricSourceType && m.Object != nil:
		return m.Object.Metric.Name, &m.Object.Target
	case m.Type == autoscalingv2.ExternalMetricSourceType && m.External != nil:
		return m.External.Metric.Name, &m.External.Target
	}
	return "", nil
}

// statusCurrent is specTarget for status.currentMetrics.
func statusCurrent(m autoscalingv2.MetricStatus) (string, *autoscalingv2.MetricValueStatus) {
	switch {
	case m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil:
		return string(m.Resource.Name), &m.Resource.Current
	case m.Type == autoscalingv2.ContainerResourceMetricSourceType && m.ContainerResource != nil:
		return string(m.ContainerResource.Name), &m.ContainerResource.Current
	case m.Type == autoscalingv2.PodsMetricSourceType && m.Pods != nil:
		return m.Pods.Metric.Name, &m.Pods.Current
	case m.Type == autoscalingv2.ObjectMetricSourceType && m.Object != nil:
		return m.Object.Metric.Name, &m.Object.Current
	case m.Type == autoscalingv2.ExternalMetricSourceType && m.External != nil:
		return m.External.Metric.Name, &m.External.Current
	}
	return "", nil
}

// typedValue is one set field of a target or current value.
type typedValue struct {
	typ   string // metric_target_type
	value float64
}

// targetValues are the set ones of a target's or current value's three
// fields, by metric_target_type.
func targetValues(value, average *resource.Quantity, utilization *int32) []typedValue {
	var out []typedValue
	if value != nil {
		out = append(out, typedValue{targetValue, value.AsApproximateFloat64()})
	}
	if average != nil {
		out = append(out, typedValue{targetAverage, average.AsApproximateFloat64()})
	}
	if utilization != nil {
		out = append(out, typedValue{targetUtilization, float64(*utilization)})
	}
	return out
}
