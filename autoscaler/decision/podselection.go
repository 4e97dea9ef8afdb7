package decision

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
)

// Pod selection on scale-down (spec.scaleDownPodSelection): the ReplicaSet
// controller, choosing which pods to delete when its count drops, ranks
// unscheduled, then pending, then unready pods first, and among the rest
// deletes the pods of lower controller.kubernetes.io/pod-deletion-cost
// first (feature gate PodDeletionCost, beta and on by default since
// Kubernetes 1.22; an absent or unparsable annotation counts as 0). Tidal
// sets that annotation from each pod's value of one per-pod metric, so the
// least loaded pods are removed first.

// DeletionCostAnnotation is the pod annotation the ReplicaSet controller
// ranks pods by on scale-down.
const DeletionCostAnnotation = corev1.PodDeletionCost

// DeletionCost is a pod's deletion cost for a metric value of valueMilli
// when the metric's target for that pod is targetMilli (both milli-units):
// the value in thousandths of the target, rounded and kept within int32.
// A pod at its target costs 1000, an idle one 0, one at twice its target
// 2000; a negative value (a Pods metric may be negative) costs less than
// 0. Relative to the target so that it is readable and fits int32 for any
// unit (memory in bytes, requests per second), and coarse enough that a
// value moving by less than a thousandth of the target is no write.
// A target of 0 or less (rejected by validation) costs 0.
func DeletionCost(valueMilli, targetMilli int64) int32 {
	if targetMilli <= 0 {
		return 0
	}
	c := math.Round(float64(valueMilli) * 1000 / float64(targetMilli))
	return int32(min(max(c, math.MinInt32), math.MaxInt32))
}

// SelectionMetric finds the spec.metrics entry named by
// spec.scaleDownPodSelection.metric: the first Resource metric of that
// resource, or the first Pods metric of that name. The error says what to
// change.
func SelectionMetric(metrics []autoscalingv2.MetricSpec, typ autoscalingv2.MetricSourceType, name string) (int, error) {
	if typ != autoscalingv2.ResourceMetricSourceType && typ != autoscalingv2.PodsMetricSourceType {
		return -1, fmt.Errorf("metric type %q cannot select pods: use Resource or Pods (a metric with a value per pod)", typ)
	}
	for i, m := range metrics {
		switch {
		case typ == autoscalingv2.ResourceMetricSourceType && m.Type == typ && m.Resource != nil && string(m.Resource.Name) == name:
			return i, nil
		case typ == autoscalingv2.PodsMetricSourceType && m.Type == typ && m.Pods != nil && m.Pods.Metric.Name == name:
			return i, nil
		}
	}
	var have []string
	for _, m := range metrics {
		switch {
		case m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil:
			have = append(have, "Resource "+string(m.Resource.Name))
		case m.Type == autoscalingv2.PodsMetricSourceType && m.Pods != nil:
			have = append(have, "Pods "+m.Pods.Metric.Name)
		}
	}
	if len(have) == 0 {
		return -1, fmt.Errorf("%s metric %q is not among spec.metrics, which has no Resource or Pods metric: add it to spec.metrics", typ, name)
	}
	return -1, fmt.Errorf("%s metric %q is not among spec.metrics: name one of %s, or add it to spec.metrics", typ, name, strings.Join(have, ", "))
}

// CostPatch is one pod whose deletion cost annotation must change: Value
// is the new annotation value, or nil to remove it.
type CostPatch struct {
	Pod   string
	Value *string
}

// CostPatches are the writes that give pods the costs in costs (pod name
// -> cost), given their current annotation values in current (pod name ->
// value; absent: no annotation). Pods in pods without a cost (no metric
// value this sync) lose an annotation they have, so that no stale cost
// ranks them; a pod whose annotation already holds its cost is not
// written. At most one patch per pod, in the order of pods.
func CostPatches(pods []string, current map[string]string, costs map[string]int32) []CostPatch {
	var out []CostPatch
	for _, p := range slices.Compact(slices.Clone(pods)) {
		have, has := current[p]
		c, ok := costs[p]
		switch {
		case ok && (!has || have != strconv.FormatInt(int64(c), 10)):
			v := strconv.FormatInt(int64(c), 10)
			out = append(out, CostPatch{Pod: p, Value: &v})
		case !ok && has:
			out = append(out, CostPatch{Pod: p})
		}
	}
	return out
}
