package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/tidal-autoscaler/tidal/autoscaler/clustercache"
	"github.com/tidal-autoscaler/tidal/autoscaler/decision"
	"github.com/tidal-autoscaler/tidal/autoscaler/monitor"
	"github.com/tidal-autoscaler/tidal/autoscaler/replicas"
	"github.com/tidal-autoscaler/tidal/autoscaler/source"
)

// metricsRun is the computation of all metrics of one autoscaler in one
// reconcile.
type metricsRun struct {
	obj            source.Object
	key            string
	specReplicas   int32
	statusReplicas int32
	selector       labels.Selector
	pods           []replicas.Pod
	tolerances     replicas.Tolerances
	now            time.Time
}

// metricsResult is what computing the metrics produced.
type metricsResult struct {
	combined decision.Combined
	// statuses parallels spec.metrics (zero entries for failed metrics, as
	// upstream writes them); nil when the selector was rejected.
	statuses []autoscalingv2.MetricStatus
	// outcomes parallels spec.metrics; nil when the selector was rejected.
	outcomes []decision.MetricOutcome
	// samples parallels spec.metrics: the per-pod values a Resource or
	// Pods metric was computed from (nil for other metrics and failed
	// reads), which spec.scaleDownPodSelection reuses.
	samples []replicas.PodSamples
	// pods and v1Pods are the pods the selector matched, as the
	// calculator and as the cache holds them.
	pods   []replicas.Pod
	v1Pods []*corev1.Pod
}

// computeMetrics validates the scale's selector, then computes every
// metric of specs (upstream's computeReplicasForMetrics). Failures emit
// their Warning events here, in upstream's order.
func (r *reconciler) computeMetrics(ctx context.Context, obj source.Object, key string, sc *autoscalingv1.Scale, specs []autoscalingv2.MetricSpec, tol replicas.Tolerances, now time.Time) metricsResult {
	sel, picked, fail := r.validateSelector(obj, key, sc.Status.Selector)
	if fail != nil {
		return metricsResult{combined: *fail}
	}
	run := metricsRun{
		obj: obj, key: key,
		specReplicas: sc.Spec.Replicas, statusReplicas: sc.Status.Replicas,
		selector: sel, pods: picked.Converted, tolerances: tol, now: now,
	}
	res := metricsResult{
		statuses: make([]autoscalingv2.MetricStatus, len(specs)),
		outcomes: make([]decision.MetricOutcome, len(specs)),
		samples:  make([]replicas.PodSamples, len(specs)),
		pods:     run.pods, v1Pods: picked.Pods,
	}
	for i, spec := range specs {
		start := time.Now()
		out, st, samples := r.computeMetric(ctx, run, spec)
		res.samples[i] = samples
		if !out.Valid() {
			r.recorder.Event(obj.Runtime(), corev1.EventTypeWarning, out.EventReason, out.EventMessage)
		} else {
			res.statuses[i] = st
		}
		res.outcomes[i] = out
		r.monitor.ObserveMetricComputation(metricAction(out, obj.HPAStatus().CurrentReplicas), metricErrorLabel(out), time.Since(start), spec.Type)
	}
	res.combined = decision.Combine(sc.Spec.Replicas, res.outcomes)
	return res
}

func metricAction(o decision.MetricOutcome, statusCurrent int32) string {
	switch {
	case !o.Valid():
		return monitor.ActionNone
	case o.Replicas > statusCurrent:
		return monitor.ActionScaleUp
	case o.Replicas < statusCurrent:
		return monitor.ActionScaleDown
	}
	return monitor.ActionNone
}

func metricErrorLabel(o decision.MetricOutcome) string {
	switch {
	case o.Valid():
		return monitor.ErrorNone
	case o.EventReason == "InvalidMetricSourceType":
		return monitor.ErrorSpec
	}
	return monitor.ErrorInternal
}

// validateSelector parses the scale's selector, records it for overlap
// detection and selects its pods. On failure it emits the
// Warning event and returns the fatal metrics result (ScalingActive=False
// with upstream's reason, except for an object deleted meanwhile, which
// gets no condition).
func (r *reconciler) validateSelector(obj source.Object, key, selector string) (labels.Selector, *clustercache.Selection, *decision.Combined) {
	fatal := func(c *decision.Condition, err error) *decision.Combined {
		return &decision.Combined{Replicas: -1, Err: err, ScalingActive: c}
	}
	if selector == "" {
		const msg = "selector is required"
		r.recorder.Event(obj.Runtime(), corev1.EventTypeWarning, "SelectorRequired", msg)
		c := decision.SelectorRequired()
		return nil, nil, fatal(&c, errors.New(msg))
	}
	ns := obj.GetNamespace()
	sel, registered, err := r.selectors.Parse(ns, key, selector)
	if err != nil {
		msg := decision.InvalidSelectorMessage(err)
		r.recorder.Event(obj.Runtime(), corev1.EventTypeWarning, "InvalidSelector", msg)
		c := decision.InvalidSelector(err)
		return nil, nil, fatal(&c, errors.New(msg))
	}
	if !registered {
		return nil, nil, fatal(nil, fmt.Errorf("HPA %s was deleted during reconciliation", key))
	}
	picked, err := r.selections.Select(ns, key, selector, sel)
	if err != nil {
		return nil, nil, fatal(nil, err)
	}
	if others := picked.Matching; len(others) > 1 {
		msg := decision.AmbiguousSelectorMessage(selector, others)
		r.recorder.Event(obj.Runtime(), corev1.EventTypeWarning, "AmbiguousSelector", msg)
		c := decision.AmbiguousSelector(msg)
		return nil, nil, fatal(&c, errors.New(msg))
	}
	return sel, picked, nil
}

// computeMetric computes one metric: its outcome, when valid its
// status.currentMetrics entry, and the per-pod samples it read (Resource,
// ContainerResource and Pods metrics).
func (r *reconciler) computeMetric(ctx context.Context, run metricsRun, spec autoscalingv2.MetricSpec) (decision.MetricOutcome, autoscalingv2.MetricStatus, replicas.PodSamples) {
	method, fail := decision.Plan(spec)
	if fail != nil {
		return *fail, autoscalingv2.MetricStatus{}, nil
	}
	var (
		n   proposed
		st  autoscalingv2.MetricStatus
		err error
	)
	switch method {
	case decision.MethodResourceUtilization, decision.MethodResourceAverageValue:
		var cur autoscalingv2.MetricValueStatus
		n, cur, err = r.resourceMetric(ctx, run, spec.Resource.Name, "", spec.Resource.Target)
		st = autoscalingv2.MetricStatus{Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricStatus{Name: spec.Resource.Name, Current: cur}}
	case decision.MethodContainerResourceUtilization, decision.MethodContainerResourceAverageValue:
		src := spec.ContainerResource
		var cur autoscalingv2.MetricValueStatus
		n, cur, err = r.resourceMetric(ctx, run, src.Name, src.Container, src.Target)
		st = autoscalingv2.MetricStatus{Type: autoscalingv2.ContainerResourceMetricSourceType,
			ContainerResource: &autoscalingv2.ContainerResourceMetricStatus{Name: src.Name, Container: src.Container, Current: cur}}
	case decision.MethodPodsAverageValue:
		n, st, err = r.podsMetric(ctx, run, spec.Pods)
	case decision.MethodObjectValue, decision.MethodObjectAverageValue:
		n, st, err = r.objectMetric(ctx, run, spec.Object, method == decision.MethodObjectValue)
	case decision.MethodExternalValue, decision.MethodExternalAverageValue:
		n, st, err = r.externalMetric(ctx, run, spec.External, method == decision.MethodExternalValue)
	default:
		err = fmt.Errorf("unknown metric computation %d", method)
	}
	if err != nil {
		return decision.Failed(spec, err), autoscalingv2.MetricStatus{}, nil
	}
	out := decision.Succeeded(spec, n.replicas)
	out.WithinTolerance = n.withinTolerance
	return out, st, n.samples
}

// proposed is one metric's replica proposal, whether its usage ratio was
// within the tolerance (the proposal is then the current count), and the
// per-pod samples it was computed from (nil for metrics without).
type proposed struct {
	replicas        int32
	withinTolerance bool
	samples         replicas.PodSamples
}

func (r *reconciler) resourceMetric(ctx context.Context, run metricsRun, name corev1.ResourceName, container string, target autoscalingv2.MetricTarget) (proposed, autoscalingv2.MetricValueStatus, error) {
	samples, err := r.metrics.ResourceMetric(ctx, name, run.obj.GetNamespace(), run.selector, container)
	if err != nil {
		return proposed{}, autoscalingv2.MetricValueStatus{}, replicas.FetchResourceMetricsError(name, err)
	}
	in := replicas.PodMetricInput{CurrentReplicas: run.specReplicas, Pods: run.pods, Samples: samples, Tolerances: run.tolerances, Now: run.now}
	if target.AverageValue != nil {
		p, err := r.cfg.Calculator.ResourceAverageValue(in, name, target.AverageValue.MilliValue())
		if err != nil {
			return proposed{}, autoscalingv2.MetricValueStatus{}, err
		}
		q := resourceQuantity(name, p.Usage)
		return proposed{p.Replicas, p.WithinTolerance, samples}, autoscalingv2.MetricValueStatus{AverageValue: &q}, nil
	}
	p, err := r.cfg.Calculator.ResourceUtilization(in, name, container, *target.AverageUtilization)
	if err != nil {
		return proposed{}, autoscalingv2.MetricValueStatus{}, err
	}
	q := resourceQuantity(name, p.RawAverage)
	util := p.Utilization
	return proposed{p.Replicas, p.WithinTolerance, samples}, autoscalingv2.MetricValueStatus{AverageUtilization: &util, AverageValue: &q}, nil
}

// resourceQuantity formats a resource usage as upstream (and
// metrics-server) do: memory in binary units, anything else in decimal.
func resourceQuantity(name corev1.ResourceName, milli int64) resource.Quantity {
	format := resource.DecimalSI
	if name == corev1.ResourceMemory {
		format = resource.BinarySI
	}
	return *resource.NewMilliQuantity(milli, format)
}

func (r *reconciler) podsMetric(ctx context.Context, run metricsRun, src *autoscalingv2.PodsMetricSource) (proposed, autoscalingv2.MetricStatus, error) {
	metricSel, err := metav1.LabelSelectorAsSelector(src.Metric.Selector)
	if err != nil {
		return proposed{}, autoscalingv2.MetricStatus{}, err
	}
	samples, err := r.metrics.PodsMetric(ctx, src.Metric.Name, run.obj.GetNamespace(), run.selector, metricSel)
	if err != nil {
		return proposed{}, autoscalingv2.MetricStatus{}, replicas.FetchPodsMetricError(src.Metric.Name, err)
	}
	in := replicas.PodMetricInput{CurrentReplicas: run.specReplicas, Pods: run.pods, Samples: samples, Tolerances: run.tolerances, Now: run.now}
	p, err := r.cfg.Calculator.PodsAverageValue(in, src.Target.AverageValue.MilliValue())
	if err != nil {
		return proposed{}, autoscalingv2.MetricStatus{}, err
	}
	return proposed{p.Replicas, p.WithinTolerance, samples}, autoscalingv2.MetricStatus{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricStatus{
		Metric:  autoscalingv2.MetricIdentifier{Name: src.Metric.Name, Selector: src.Metric.Selector},
		Current: autoscalingv2.MetricValueStatus{AverageValue: resource.NewMilliQuantity(p.Usage, resource.DecimalSI)},
	}}, nil
}

func (r *reconciler) objectMetric(ctx context.Context, run metricsRun, src *autoscalingv2.ObjectMetricSource, value bool) (proposed, autoscalingv2.MetricStatus, error) {
	ns := run.obj.GetNamespace()
	metricSel, err := metav1.LabelSelectorAsSelector(src.Metric.Selector)
	if err != nil {
		return proposed{}, autoscalingv2.MetricStatus{}, err
	}
	usage, err := r.metrics.ObjectMetric(ctx, src.Metric.Name, ns, &src.DescribedObject, metricSel)
	if err != nil {
		return proposed{}, autoscalingv2.MetricStatus{}, replicas.FetchObjectMetricError(src.Metric.Name, src.DescribedObject.Kind, ns, src.DescribedObject.Name, err)
	}
	st := autoscalingv2.MetricStatus{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricStatus{
		DescribedObject: src.DescribedObject,
		Metric:          autoscalingv2.MetricIdentifier{Name: src.Metric.Name, Selector: src.Metric.Selector},
	}}
	var p replicas.ValueProposal
	if value {
		p, err = replicas.ObjectValue(run.specReplicas, usage, src.Target.Value.MilliValue(), run.tolerances, run.pods)
		if err != nil {
			return proposed{}, autoscalingv2.MetricStatus{}, err
		}
		st.Object.Current.Value = resource.NewMilliQuantity(p.Usage, resource.DecimalSI)
	} else {
		p = replicas.ObjectAverageValue(run.statusReplicas, usage, src.Target.AverageValue.MilliValue(), run.tolerances)
		st.Object.Current.AverageValue = resource.NewMilliQuantity(p.Usage, resource.DecimalSI)
	}
	return proposed{p.Replicas, p.WithinTolerance, nil}, st, nil
}

func (r *reconciler) externalMetric(ctx context.Context, run metricsRun, src *autoscalingv2.ExternalMetricSource, value bool) (proposed, autoscalingv2.MetricStatus, error) {
	ns := run.obj.GetNamespace()
	metricSel, err := metav1.LabelSelectorAsSelector(src.Metric.Selector)
	if err != nil {
		return proposed{}, autoscalingv2.MetricStatus{}, err
	}
	values, err := r.metrics.ExternalMetric(ctx, src.Metric.Name, ns, metricSel)
	if err != nil {
		return proposed{}, autoscalingv2.MetricStatus{}, replicas.FetchExternalMetricError(ns, src.Metric.Name, src.Metric.Selector, err)
	}
	st := autoscalingv2.MetricStatus{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricStatus{
		Metric: autoscalingv2.MetricIdentifier{Name: src.Metric.Name, Selector: src.Metric.Selector},
	}}
	var p replicas.ValueProposal
	if value {
		p, err = replicas.ExternalValue(run.specReplicas, values, src.Target.Value.MilliValue(), run.tolerances, run.pods)
		if err != nil {
			return proposed{}, autoscalingv2.MetricStatus{}, err
		}
		st.External.Current.Value = resource.NewMilliQuantity(p.Usage, resource.DecimalSI)
	} else {
		p = replicas.ExternalAverageValue(run.statusReplicas, values, src.Target.AverageValue.MilliValue(), run.tolerances)
		st.External.Current.AverageValue = resource.NewMilliQuantity(p.Usage, resource.DecimalSI)
	}
	return proposed{p.Replicas, p.WithinTolerance, nil}, st, nil
}
