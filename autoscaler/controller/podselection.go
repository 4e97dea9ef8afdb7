package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/tidal-autoscaler/tidal/autoscaler/decision"
	"github.com/tidal-autoscaler/tidal/autoscaler/replicas"
	"github.com/tidal-autoscaler/tidal/autoscaler/source"
	"github.com/tidal-autoscaler/tidal/autoscaler/status"
)

// spec.scaleDownPodSelection: before a scale-down of a Deployment or
// ReplicaSet is written to /scale, the target's pods get
// controller.kubernetes.io/pod-deletion-cost from the per-pod values the
// reconcile already read for the named metric (decision.DeletionCost:
// thousandths of the metric's target), so that the ReplicaSet controller
// removes the least loaded first.
//
// Its cost in API requests: none in a sync that does not scale down, and
// in one that does, at most one merge PATCH per pod whose cost changed
// (pods already holding their cost are not written; a pod without a value
// this sync loses a cost it has). No metric is read again.

// podSelectionResources are the targets whose controller ranks pods by
// deletion cost: a Deployment scales its ReplicaSets, a ReplicaSet
// deletes its pods lowest cost first.
var podSelectionResources = map[schema.GroupResource]bool{
	{Group: "apps", Resource: "deployments"}: true,
	{Group: "apps", Resource: "replicasets"}: true,
}

// inAnnotations reports whether the object's tidal settings are
// annotations (an autoscaling/v2 HPA, whose history is kept in one too),
// for messages that say where to change a setting.
func inAnnotations(s *step) bool { return s.obj.HistoryInAnnotation() }

// checkPodSelection checks spec.scaleDownPodSelection against the spec and
// the target, sets its condition, and finds its metric (s.selection, -1
// when none applies). Problems get a Warning event naming what to change.
func (r *reconciler) checkPodSelection(s *step) {
	s.selection = -1
	p, st := s.ext.PodSelection, s.obj.HPAStatus()
	warn := func(reason, msg string) {
		r.recorder.Event(s.obj.Runtime(), corev1.EventTypeWarning, reason, msg)
	}
	if p == nil {
		if s.ext.PodSelectionProblem != "" {
			warn("InvalidPodSelection", s.ext.PodSelectionProblem)
			status.SetCondition(st, status.PodSelectionInvalid("InvalidPodSelection", s.ext.PodSelectionProblem), s.now)
		}
		return
	}
	if !podSelectionResources[s.resource] {
		c := status.PodSelectionNotApplicable(s.obj.HPASpec().ScaleTargetRef.Kind)
		warn("PodSelectionNotApplicable", c.Message)
		status.SetCondition(st, c, s.now)
		return
	}
	i, err := decision.SelectionMetric(s.metrics, p.Metric.Type, p.Metric.Name)
	if err != nil {
		where := "spec.scaleDownPodSelection.metric"
		if inAnnotations(s) {
			where = "the metric of annotation " + source.ScaleDownPodSelectionAnnotation
		}
		msg := fmt.Sprintf("%s cannot select pods: %v", where, err)
		warn("InvalidPodSelection", msg)
		status.SetCondition(st, status.PodSelectionInvalid("InvalidMetric", msg), s.now)
		return
	}
	s.selection = i
	status.SetCondition(st, status.PodSelectionApplies(decision.MetricName(s.metrics[i])), s.now)
}

// setDeletionCosts writes the pods' deletion costs before a scale-down to
// desired, when the selection applies. It never fails the reconcile: the
// scale-down proceeds, and a metric that failed this sync or a failed
// write is a Warning event.
func (r *reconciler) setDeletionCosts(ctx context.Context, s *step, desired int32) {
	if s.selection < 0 || desired >= s.current || s.mr == nil || s.selection >= len(s.mr.outcomes) {
		return
	}
	spec, out, samples := s.metrics[s.selection], s.mr.outcomes[s.selection], s.mr.samples[s.selection]
	name := decision.MetricName(spec)
	if !out.Valid() || samples == nil {
		why := "no per-pod values"
		if out.Err != nil {
			why = out.Err.Error()
		}
		r.recorder.Event(s.obj.Runtime(), corev1.EventTypeWarning, "PodSelectionSkipped",
			fmt.Sprintf("scaling %d→%d without setting %s: %s was not computed in this sync (%s)", s.current, desired, decision.DeletionCostAnnotation, name, why))
		return
	}
	costs, err := deletionCosts(r.cfg.Calculator, spec, s.mr.pods, samples)
	if err != nil {
		r.recorder.Event(s.obj.Runtime(), corev1.EventTypeWarning, "PodSelectionSkipped",
			fmt.Sprintf("scaling %d→%d without setting %s: %v", s.current, desired, decision.DeletionCostAnnotation, err))
		return
	}
	var names []string
	current := map[string]string{}
	for _, p := range s.mr.v1Pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		names = append(names, p.Name)
		if v, ok := p.Annotations[decision.DeletionCostAnnotation]; ok {
			current[p.Name] = v
		}
	}
	patches := decision.CostPatches(names, current, costs)
	var errs []error
	for _, p := range patches {
		if err := r.patchDeletionCost(ctx, s.obj.GetNamespace(), p); err != nil {
			errs = append(errs, fmt.Errorf("pod %s: %w", p.Pod, err))
		}
	}
	written := len(patches) - len(errs)
	klog.FromContext(ctx).V(2).Info("Set pod deletion costs before scaling down", "autoscaler", klog.KObj(s.obj),
		"metric", name, "pods", len(names), "written", written, "failed", len(errs))
	if len(errs) > 0 {
		r.recorder.Event(s.obj.Runtime(), corev1.EventTypeWarning, "FailedSetPodDeletionCost",
			fmt.Sprintf("scaling %d→%d, %d of %d pods did not get their %s (the ReplicaSet controller may remove busier pods): %v",
				s.current, desired, len(errs), len(patches), decision.DeletionCostAnnotation, errors.Join(errs...)))
	}
	if written > 0 {
		r.recorder.Event(s.obj.Runtime(), corev1.EventTypeNormal, "PodDeletionCost",
			fmt.Sprintf("before scaling %d→%d, set %s on %d pods from their %s (%d already had theirs)",
				s.current, desired, decision.DeletionCostAnnotation, written, name, len(names)-len(patches)))
	}
}

// patchDeletionCost writes one pod's cost (or removes it) with a merge
// patch of the annotation alone.
func (r *reconciler) patchDeletionCost(ctx context.Context, namespace string, p decision.CostPatch) error {
	if r.podClient == nil {
		return errors.New("the autoscaler has no client to write pods")
	}
	var value any // nil removes the annotation
	if p.Value != nil {
		value = *p.Value
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{decision.DeletionCostAnnotation: value}}})
	if err != nil {
		return err
	}
	_, err = r.podClient.Pods(namespace).Patch(ctx, p.Pod, types.MergePatchType, body, metav1.PatchOptions{FieldManager: source.FieldManager})
	return err
}

// deletionCosts are the pods' deletion costs from their samples of spec
// (pod name -> cost; pods without a sample have none): thousandths of the
// target, which for a Utilization target is the pod's request times the
// target utilization.
func deletionCosts(calc replicas.Config, spec autoscalingv2.MetricSpec, pods []replicas.Pod, samples replicas.PodSamples) (map[string]int32, error) {
	costs := make(map[string]int32, len(samples))
	var target autoscalingv2.MetricTarget
	switch {
	case spec.Type == autoscalingv2.ResourceMetricSourceType && spec.Resource != nil:
		target = spec.Resource.Target
	case spec.Type == autoscalingv2.PodsMetricSourceType && spec.Pods != nil:
		target = spec.Pods.Target
	default:
		return nil, fmt.Errorf("metric type %s has no per-pod values", spec.Type)
	}
	if target.AverageValue != nil {
		t := target.AverageValue.MilliValue()
		for _, p := range pods {
			if v, ok := samples[p.Name]; ok {
				costs[p.Name] = decision.DeletionCost(v.Value, t)
			}
		}
		return costs, nil
	}
	if target.AverageUtilization == nil {
		return nil, fmt.Errorf("the metric has neither an averageValue nor an averageUtilization target")
	}
	requests, err := calc.Requests(pods, "", spec.Resource.Name)
	if err != nil {
		return nil, err
	}
	util := int64(*target.AverageUtilization)
	for _, p := range pods {
		v, ok := samples[p.Name]
		if req, has := requests[p.Name]; ok && has && req > 0 {
			// value / (request * util / 100), in integers.
			costs[p.Name] = decision.DeletionCost(v.Value*100, req*util)
		}
	}
	return costs, nil
}
