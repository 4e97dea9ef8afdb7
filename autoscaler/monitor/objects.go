package monitor

import (
	"sync"

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

// objectMetrics are the per-autoscaler series, named and labelled like
// kube-state-metrics' kube_horizontalpodautoscaler_* (namespace and
// hpa_name instead of horizontalpodautoscaler, as the other per-object
// series here), the same in crd and native mode.
type objectMetrics struct {
	minReplicas, maxReplicas         *prometheus.GaugeVec
	currentReplicas, desiredReplicas *prometheus.GaugeVec
	specTarget, statusTarget         *prometheus.GaugeVec
	condition                        *prometheus.GaugeVec
	lastScale                        *prometheus.GaugeVec
	scaleEvents                      *prometheus.CounterVec

	// seen is, per object, the label values of the series with extra
	// labels set by its last observation, so that a metric or condition
	// that left the object is dropped.
	mu   sync.Mutex
	seen map[objectKey]*objectSeries
}

type objectKey struct{ namespace, name string }

type objectSeries struct {
	specTargets, statusTargets map[[2]string]bool // metric_name, metric_target_type
	conditions                 map[string]bool
}

func newObjectMetrics(ns, sub string) *objectMetrics {
	obj := []string{"namespace", "hpa_name"}
	gauge := func(name, help string, extra ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help},
			append(append([]string{}, obj...), extra...))
	}
	return &objectMetrics{
		minReplicas: gauge("hpa_spec_min_replicas",
			"spec.minReplicas of each autoscaler (1 when unset)."),
		maxReplicas: gauge("hpa_spec_max_replicas",
			"spec.maxReplicas of each autoscaler."),
		currentReplicas: gauge("hpa_status_current_replicas",
			"status.currentReplicas of each autoscaler after its last reconcile."),
		desiredReplicas: gauge("hpa_status_desired_replicas",
			"status.desiredReplicas of each autoscaler after its last reconcile."),
		specTarget: gauge("hpa_spec_target_metric",
			"Target of each of an autoscaler's metrics, by metric_name (the resource or metric name) and metric_target_type (value, average, utilization).",
			"metric_name", "metric_target_type"),
		statusTarget: gauge("hpa_status_target_metric",
			"Current value of each of an autoscaler's metrics (status.currentMetrics), by metric_name and metric_target_type (value, average, utilization).",
			"metric_name", "metric_target_type"),
		condition: gauge("hpa_status_condition",
			"Each condition of an autoscaler: 1 on the series whose status (true, false, unknown) it has, 0 on the other two.",
			"condition", "status"),
		lastScale: gauge("hpa_status_last_scale_time_seconds",
			"status.lastScaleTime of each autoscaler as Unix time (only autoscalers that have scaled)."),
		scaleEvents: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "hpa_scale_events_total",
			Help: "Writes of /scale by each autoscaler, by direction (up, down) and reason (metric_above_target, all_metrics_below_target, above_max_replicas, below_min_replicas, fallback)."},
			append(append([]string{}, obj...), "direction", "reason")),
		seen: map[objectKey]*objectSeries{},
	}
}

func (o *objectMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{o.minReplicas, o.maxReplicas, o.currentReplicas, o.desiredReplicas,
		o.specTarget, o.statusTarget, o.condition, o.lastScale, o.scaleEvents}
}

// ObserveAutoscaler records an autoscaler's spec and status as the
// tidal_autoscaler_hpa_* gauges; call it after each reconcile with the
// status it wrote (or meant to write). Series of metrics and conditions the
// object no longer has are dropped.
func (m *Monitor) ObserveAutoscaler(namespace, name string, spec *autoscalingv2.HorizontalPodAutoscalerSpec, st *autoscalingv2.HorizontalPodAutoscalerStatus) {
	o := m.objects
	minR := int32(1)
	if spec.MinReplicas != nil {
		minR = *spec.MinReplicas
	}
	o.minReplicas.WithLabelValues(namespace, name).Set(float64(minR))
	o.maxReplicas.WithLabelValues(namespace, name).Set(float64(spec.MaxReplicas))
	o.currentReplicas.WithLabelValues(namespace, name).Set(float64(st.CurrentReplicas))
	o.desiredReplicas.WithLabelValues(namespace, name).Set(float64(st.DesiredReplicas))
	if st.LastScaleTime != nil {
		o.lastScale.WithLabelValues(namespace, name).Set(float64(st.LastScaleTime.Unix()))
	} else {
		o.lastScale.DeleteLabelValues(namespace, name)
	}

	now := &objectSeries{specTargets: map[[2]string]bool{}, statusTargets: map[[2]string]bool{}, conditions: map[string]bool{}}
	for _, ms := range spec.Metrics {
		metricName, t := specTarget(ms)
		if t == nil {
			continue
		}
		for typ, v := range targetValues(t.Value, t.AverageValue, t.AverageUtilization) {
			now.specTargets[[2]string{metricName, typ}] = true
			o.specTarget.WithLabelValues(namespace, name, metricName, typ).Set(v)
		}
	}
	for _, ms := range st.CurrentMetrics {
		metricName, c := statusCurrent(ms)
		if c == nil {
			continue
		}
		for typ, v := range targetValues(c.Value, c.AverageValue, c.AverageUtilization) {
			now.statusTargets[[2]string{metricName, typ}] = true
			o.statusTarget.WithLabelValues(namespace, name, metricName, typ).Set(v)
		}
	}
	for _, c := range st.Conditions {
		cond := string(c.Type)
		now.conditions[cond] = true
		for _, s := range []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown} {
			v := 0.0
			if c.Status == s {
				v = 1
			}
			o.condition.WithLabelValues(namespace, name, cond, conditionLabel(s)).Set(v)
		}
	}

	key := objectKey{namespace, name}
	o.mu.Lock()
	defer o.mu.Unlock()
	if before := o.seen[key]; before != nil {
		for k := range before.specTargets {
			if !now.specTargets[k] {
				o.specTarget.DeleteLabelValues(namespace, name, k[0], k[1])
			}
		}
		for k := range before.statusTargets {
			if !now.statusTargets[k] {
				o.statusTarget.DeleteLabelValues(namespace, name, k[0], k[1])
			}
		}
		for cond := range before.conditions {
			if !now.conditions[cond] {
				for _, s := range []string{"true", "false", "unknown"} {
					o.condition.DeleteLabelValues(namespace, name, cond, s)
				}
			}
		}
	}
	o.seen[key] = now
}

// ObserveScale counts a successful write of /scale by an autoscaler.
func (m *Monitor) ObserveScale(namespace, name, direction, reason string) {
	m.objects.scaleEvents.WithLabelValues(namespace, name, direction, reason).Inc()
}

// forget drops every tidal_autoscaler_hpa_* series of an object.
func (o *objectMetrics) forget(namespace, name string) {
	o.mu.Lock()
	delete(o.seen, objectKey{namespace, name})
	o.mu.Unlock()
	labels := prometheus.Labels{"namespace": namespace, "hpa_name": name}
	for _, c := range []interface {
		DeletePartialMatch(prometheus.Labels) int
	}{o.minReplicas, o.maxReplicas, o.currentReplicas, o.desiredReplicas, o.specTarget, o.statusTarget,
		o.condition, o.lastScale, o.scaleEvents} {
		c.DeletePartialMatch(labels)
	}
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

// targetValues are the set ones of a target's or current value's three
// fields, by metric_target_type.
func targetValues(value, average *resource.Quantity, utilization *int32) map[string]float64 {
	out := map[string]float64{}
	if value != nil {
		out[targetValue] = value.AsApproximateFloat64()
	}
	if average != nil {
		out[targetAverage] = average.AsApproximateFloat64()
	}
	if utilization != nil {
		out[targetUtilization] = float64(*utilization)
	}
	return out
}
