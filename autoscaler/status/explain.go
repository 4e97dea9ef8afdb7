package status

import (
	"fmt"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/autoscaler/decision"
	"github.com/tidal-autoscaler/tidal/autoscaler/source"
)

// Tidal is status.tidal of obj: the printed columns and why.
func Tidal(obj source.Object, why *v1alpha1.Decision) *v1alpha1.TidalStatus {
	spec := obj.HPASpec()
	return &v1alpha1.TidalStatus{
		Reference: spec.ScaleTargetRef.Kind + "/" + spec.ScaleTargetRef.Name,
		Targets:   formatTargets(spec.Metrics, obj.HPAStatus().CurrentMetrics),
		Decision:  why,
	}
}

// Explain says why desired was chosen from the metrics' proposals
// (combined, and outcomes parallel to specs); nil when no metrics were
// computed (combined nil). Only inputs of the decision appear (no times),
// so that the same situation gives the same status.
func Explain(specs []autoscalingv2.MetricSpec, current, desired int32, combined *decision.Combined, outcomes []decision.MetricOutcome, d decision.Decision) *v1alpha1.Decision {
	if combined == nil {
		return nil
	}
	why := &v1alpha1.Decision{
		CurrentReplicas:  current,
		Winner:           combined.Name,
		ProposedReplicas: combined.Replicas,
		DesiredReplicas:  desired,
	}
	for i, o := range outcomes {
		p := v1alpha1.MetricProposal{Name: decision.MetricName(specs[i])}
		if o.Valid() {
			p.Replicas = ptr.To(o.Replicas)
			p.WithinTolerance = o.WithinTolerance
		} else {
			p.Error = o.Err.Error()
		}
		why.Proposals = append(why.Proposals, p)
	}
	n := d.Normalization
	if n == nil {
		return why
	}
	proposal := max(combined.Replicas, 0)
	why.StabilizedReplicas = ptr.To(n.Stabilized)
	if n.Stabilized != proposal {
		why.Adjustments = append(why.Adjustments, v1alpha1.Adjustment{Reason: n.StabilizationReason, From: proposal, To: n.Stabilized, Message: n.StabilizationMessage})
	}
	if n.Replicas != n.Stabilized {
		why.Adjustments = append(why.Adjustments, v1alpha1.Adjustment{Reason: n.LimitReason, From: n.Stabilized, To: n.Replicas, Message: n.LimitMessage})
	}
	if d.Rescale && desired != n.Replicas {
		why.Adjustments = append(why.Adjustments, v1alpha1.Adjustment{Reason: "ScaleFromZero", From: n.Replicas, To: desired,
			Message: "scaling from zero replicas goes at least to minReplicas"})
	}
	return why
}

// formatTargets prints the metrics as kubectl get hpa does: the first two,
// "current/target" each, then "+ N more...".
func formatTargets(specs []autoscalingv2.MetricSpec, statuses []autoscalingv2.MetricStatus) string {
	if len(specs) == 0 {
		return "<none>"
	}
	const shown = 2
	list := make([]string, 0, len(specs))
	for i, spec := range specs {
		var st *autoscalingv2.MetricStatus
		if i < len(statuses) {
			st = &statuses[i]
		}
		list = append(list, formatTarget(spec, st))
	}
	if len(list) > shown {
		return fmt.Sprintf("%s + %d more...", strings.Join(list[:shown], ", "), len(list)-shown)
	}
	return strings.Join(list, ", ")
}

func formatTarget(spec autoscalingv2.MetricSpec, st *autoscalingv2.MetricStatus) string {
	const unknown = "<unknown>"
	current := unknown
	switch spec.Type {
	case autoscalingv2.ExternalMetricSourceType:
		if spec.External == nil {
			break
		}
		if t := spec.External.Target; t.AverageValue != nil {
			if st != nil && st.External != nil && st.External.Current.AverageValue != nil {
				current = st.External.Current.AverageValue.String()
			}
			return fmt.Sprintf("%s/%s (avg)", current, t.AverageValue.String())
		}
		if st != nil && st.External != nil && st.External.Current.Value != nil {
			current = st.External.Current.Value.String()
		}
		return fmt.Sprintf("%s/%s", current, spec.External.Target.Value.String())
	case autoscalingv2.PodsMetricSourceType:
		if spec.Pods == nil {
			break
		}
		if st != nil && st.Pods != nil && st.Pods.Current.AverageValue != nil {
			current = st.Pods.Current.AverageValue.String()
		}
		return fmt.Sprintf("%s/%s", current, spec.Pods.Target.AverageValue.String())
	case autoscalingv2.ObjectMetricSourceType:
		if spec.Object == nil {
			break
		}
		if t := spec.Object.Target; t.AverageValue != nil {
			if st != nil && st.Object != nil && st.Object.Current.AverageValue != nil {
				current = st.Object.Current.AverageValue.String()
			}
			return fmt.Sprintf("%s/%s (avg)", current, t.AverageValue.String())
		}
		if st != nil && st.Object != nil && st.Object.Current.Value != nil {
			current = st.Object.Current.Value.String()
		}
		return fmt.Sprintf("%s/%s", current, spec.Object.Target.Value.String())
	case autoscalingv2.ResourceMetricSourceType:
		if spec.Resource == nil {
			break
		}
		var cur *autoscalingv2.MetricValueStatus
		if st != nil && st.Resource != nil {
			cur = &st.Resource.Current
		}
		return string(spec.Resource.Name) + ": " + formatResourceTarget(spec.Resource.Target, cur)
	case autoscalingv2.ContainerResourceMetricSourceType:
		if spec.ContainerResource == nil {
			break
		}
		var cur *autoscalingv2.MetricValueStatus
		if st != nil && st.ContainerResource != nil {
			cur = &st.ContainerResource.Current
		}
		return string(spec.ContainerResource.Name) + ": " + formatResourceTarget(spec.ContainerResource.Target, cur)
	}
	return "<unknown type>"
}

func formatResourceTarget(t autoscalingv2.MetricTarget, cur *autoscalingv2.MetricValueStatus) string {
	current := "<unknown>"
	if t.AverageValue != nil {
		if cur != nil && cur.AverageValue != nil {
			current = cur.AverageValue.String()
		}
		return fmt.Sprintf("%s/%s", current, t.AverageValue.String())
	}
	if cur != nil && cur.AverageUtilization != nil {
		current = fmt.Sprintf("%d%%", *cur.AverageUtilization)
	}
	target := "<auto>"
	if t.AverageUtilization != nil {
		target = fmt.Sprintf("%d%%", *t.AverageUtilization)
	}
	return fmt.Sprintf("%s/%s", current, target)
}
