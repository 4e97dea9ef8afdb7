package explain

import (
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
)

const unknown = "<unknown>"

// Target is spec's target as kubectl get hpa prints it: "60%" for a
// utilization, "100" for a value or a Pods/Resource average, "30 (avg)"
// for an Object or External average.
func Target(spec autoscalingv2.MetricSpec) string {
	switch spec.Type {
	case autoscalingv2.ResourceMetricSourceType:
		if spec.Resource != nil {
			return target(spec.Resource.Target, false)
		}
	case autoscalingv2.ContainerResourceMetricSourceType:
		if spec.ContainerResource != nil {
			return target(spec.ContainerResource.Target, false)
		}
	case autoscalingv2.PodsMetricSourceType:
		if spec.Pods != nil {
			return target(spec.Pods.Target, false)
		}
	case autoscalingv2.ObjectMetricSourceType:
		if spec.Object != nil {
			return target(spec.Object.Target, true)
		}
	case autoscalingv2.ExternalMetricSourceType:
		if spec.External != nil {
			return target(spec.External.Target, true)
		}
	}
	return unknown
}

// target formats t; markAverage adds " (avg)" to an AverageValue, which
// for Object and External metrics is divided by the pod count.
func target(t autoscalingv2.MetricTarget, markAverage bool) string {
	switch {
	case t.AverageUtilization != nil:
		return fmt.Sprintf("%d%%", *t.AverageUtilization)
	case t.AverageValue != nil && markAverage:
		return t.AverageValue.String() + " (avg)"
	case t.AverageValue != nil:
		return t.AverageValue.String()
	case t.Value != nil:
		return t.Value.String()
	case t.Type == autoscalingv2.UtilizationMetricType:
		// An HPA without a target utilization: the apiserver would have
		// refused it, but an object can bypass validation.
		return "<auto>"
	}
	return unknown
}

// Current is st's value of the metric spec describes, in the form of its
// target: "113% (565m)" for a utilization (with the average value when
// the status has it), else the value or the average; "<unknown>" when st
// is nil or holds no value.
func Current(spec autoscalingv2.MetricSpec, st *autoscalingv2.MetricStatus) string {
	if st == nil {
		return unknown
	}
	var cur *autoscalingv2.MetricValueStatus
	var t autoscalingv2.MetricTarget
	switch {
	case spec.Resource != nil && st.Resource != nil:
		cur, t = &st.Resource.Current, spec.Resource.Target
	case spec.ContainerResource != nil && st.ContainerResource != nil:
		cur, t = &st.ContainerResource.Current, spec.ContainerResource.Target
	case spec.Pods != nil && st.Pods != nil:
		cur, t = &st.Pods.Current, spec.Pods.Target
	case spec.Object != nil && st.Object != nil:
		cur, t = &st.Object.Current, spec.Object.Target
	case spec.External != nil && st.External != nil:
		cur, t = &st.External.Current, spec.External.Target
	default:
		return unknown
	}
	switch {
	case t.AverageUtilization != nil || t.Type == autoscalingv2.UtilizationMetricType:
		if cur.AverageUtilization == nil {
			return unknown
		}
		s := fmt.Sprintf("%d%%", *cur.AverageUtilization)
		if cur.AverageValue != nil {
			s += " (" + cur.AverageValue.String() + ")"
		}
		return s
	case t.AverageValue != nil && cur.AverageValue != nil:
		return cur.AverageValue.String()
	case cur.Value != nil:
		return cur.Value.String()
	case cur.AverageValue != nil:
		return cur.AverageValue.String()
	}
	return unknown
}
