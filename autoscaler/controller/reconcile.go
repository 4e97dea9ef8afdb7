package controller

import (
	"context"
	"errors"
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/autoscaler/behavior"
	"github.com/tidal-autoscaler/tidal/autoscaler/clustercache"
	"github.com/tidal-autoscaler/tidal/autoscaler/decision"
	"github.com/tidal-autoscaler/tidal/autoscaler/metrics"
	"github.com/tidal-autoscaler/tidal/autoscaler/monitor"
	"github.com/tidal-autoscaler/tidal/autoscaler/source"
)

// errSpec marks errors caused by the autoscaler's spec (label error=spec);
// wrap it with %w after the message, as upstream does.
var errSpec = errors.New("")

// defaultMetrics is what the apiserver's autoscaling/v2 defaulting puts in
// an empty spec.metrics: 80% average cpu utilization. A CRD default cannot
// express it for an explicit empty list, so the reconciler applies it.
func defaultMetrics() []autoscalingv2.MetricSpec {
	return []autoscalingv2.MetricSpec{{
		Type: autoscalingv2.ResourceMetricSourceType,
		Resource: &autoscalingv2.ResourceMetricSource{
			Name:   corev1.ResourceCPU,
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](80)},
		},
	}}
}

// reconciler reconciles one autoscaler at a time, as upstream's
// reconcileAutoscaler does.
type reconciler struct {
	source source.Source
	// pods is the pod informer's indexer, with clustercache.PodIndexers.
	pods      cache.Indexer
	scales    *scaler
	metrics   metrics.Client
	recorder  record.EventRecorder
	monitor   *monitor.Monitor
	cfg       decision.Config
	clock     clock.PassiveClock
	history   *historyStore
	selectors *clustercache.SelectorTracker
}

// reconcileKey reconciles the object named key; deleted is true when it is
// gone (its history is then forgotten and it is not requeued).
func (r *reconciler) reconcileKey(ctx context.Context, key string) (deleted bool, err error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return true, err
	}
	obj, err := r.source.Get(namespace, name)
	if apierrors.IsNotFound(err) {
		klog.FromContext(ctx).V(2).Info("Autoscaler has been deleted", "kind", r.source.Kind(), "autoscaler", klog.KRef(namespace, name))
		r.history.forget(key)
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return false, r.reconcile(ctx, obj, key)
}

// step is the state of one reconcile.
type step struct {
	obj      source.Object
	original source.Object
	key      string
	ref      string // Kind/namespace/name of the target, for errors
	now      metav1.Time
	// history and retention are set once the history is read; every
	// status write from then on also persists it.
	history   *historyEntry
	retention behavior.Retention
}

func (r *reconciler) reconcile(ctx context.Context, obj source.Object, key string) (retErr error) {
	action := monitor.ActionNone
	start := r.clock.Now()
	defer func() {
		label := monitor.ErrorNone
		switch {
		case errors.Is(retErr, errSpec):
			label = monitor.ErrorSpec
		case retErr != nil:
			label = monitor.ErrorInternal
		}
		r.monitor.ObserveReconciliation(action, label, r.clock.Since(start))
	}()

	spec := obj.HPASpec()
	s := &step{
		obj: obj, original: obj.DeepCopy(), key: key, now: metav1.NewTime(start),
		ref: fmt.Sprintf("%s/%s/%s", spec.ScaleTargetRef.Kind, obj.GetNamespace(), spec.ScaleTargetRef.Name),
	}
	if err := validateSpec(spec); err != nil {
		r.recorder.Event(obj.Runtime(), corev1.EventTypeWarning, "InvalidSpec", err.Error())
		setCondition(obj.HPAStatus(), invalidSpecCondition(err), s.now)
		if werr := r.writeStatus(ctx, s, nil); werr != nil {
			utilruntime.HandleError(werr)
		}
		return fmt.Errorf("invalid spec of %s %s: %v%w", r.source.Kind(), key, err, errSpec)
	}
	metrics := spec.Metrics
	if len(metrics) == 0 {
		metrics = defaultMetrics()
	}

	gv, err := schema.ParseGroupVersion(spec.ScaleTargetRef.APIVersion)
	if err != nil {
		r.failedGetScale(ctx, s, err)
		return fmt.Errorf("invalid API version in scale target reference: %v%w", err, errSpec)
	}
	mappings, err := r.scales.mappings(schema.GroupKind{Group: gv.Group, Kind: spec.ScaleTargetRef.Kind})
	if err != nil {
		r.failedGetScale(ctx, s, err)
		return fmt.Errorf("unable to determine resource for scale target reference: %w", err)
	}
	sc, gr, err := r.scales.get(ctx, obj.GetNamespace(), spec.ScaleTargetRef.Name, mappings)
	if err != nil {
		r.failedGetScale(ctx, s, err)
		return fmt.Errorf("failed to query scale subresource for %s: %w", s.ref, err)
	}
	st := obj.HPAStatus()
	setCondition(st, decision.SucceededGetScale(), s.now)
	current := sc.Spec.Replicas

	b := r.cfg.Behavior(spec.Behavior)
	in := decision.Input{
		Now: start, CurrentReplicas: current, MinReplicas: spec.MinReplicas, MaxReplicas: spec.MaxReplicas,
		Behavior: b, ScaledToZero: scaledToZero(st), HasObjectOrExternalMetrics: decision.HasObjectOrExternalMetrics(metrics),
	}
	ret := behavior.RetentionFor(b, r.cfg.DownscaleStabilizationWindow)
	entry, err := r.history.get(key, obj.GetUID(), obj.PersistedHistory(), recommending(s.original.HPAStatus()), ret, start)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Ignoring the persisted history", "kind", r.source.Kind(), "autoscaler", klog.KObj(obj))
	}
	hist := &entry.h
	s.history, s.retention = entry, ret
	var mr *metricsResult
	if r.cfg.NeedsMetrics(in) {
		res := r.computeMetrics(ctx, obj, key, sc, metrics, r.cfg.Tolerances(b), start)
		mr = &res
	}
	var combined *decision.Combined
	if mr != nil {
		combined = &mr.combined
	}
	d := r.cfg.Decide(in, combined, hist)
	setConditions(st, d.Conditions, s.now)
	if d.RemoveScaledToZero {
		removeCondition(st, autoscalingv2.ScaledToZero)
	}
	var statuses []autoscalingv2.MetricStatus
	if mr != nil {
		statuses = mr.statuses
	}

	if d.MetricsFailed {
		setStatus(obj, current, st.DesiredReplicas, statuses, nil)
		if werr := r.writeStatus(ctx, s, explain(metrics, current, st.DesiredReplicas, mr, d)); werr != nil {
			utilruntime.HandleError(werr)
		}
		r.recorder.Event(obj.Runtime(), corev1.EventTypeWarning, "FailedComputeMetricsReplicas", d.Err.Error())
		return fmt.Errorf("failed to compute desired number of replicas based on listed metrics for %s: %w", s.ref, d.Err)
	}
	// Some metrics failed but scaling proceeds on the others: report it.
	retErr = d.Err

	desired := d.DesiredReplicas
	var scaledAt *metav1.Time
	if d.Rescale {
		if err := r.scales.update(ctx, obj.GetNamespace(), gr, sc, desired); err != nil {
			r.recorder.Event(obj.Runtime(), corev1.EventTypeWarning, "FailedRescale", decision.FailedRescaleMessage(desired, d.Reason, err))
			setCondition(st, decision.RescaleFailed(err), s.now)
			setStatus(obj, current, st.DesiredReplicas, statuses, nil)
			if werr := r.writeStatus(ctx, s, explain(metrics, current, st.DesiredReplicas, mr, d)); werr != nil {
				utilruntime.HandleError(werr)
			}
			return fmt.Errorf("failed to rescale %s: %w", s.ref, err)
		}
		conds, remove := r.cfg.Rescaled(in, desired, hist)
		setConditions(st, conds, s.now)
		if remove {
			removeCondition(st, autoscalingv2.ScaledToZero)
		}
		r.recorder.Event(obj.Runtime(), corev1.EventTypeNormal, "SuccessfulRescale", decision.SuccessfulRescaleMessage(desired, d.Reason))
		klog.FromContext(ctx).Info("Successfully rescaled", "kind", r.source.Kind(), "autoscaler", klog.KObj(obj),
			"currentReplicas", current, "desiredReplicas", desired, "reason", d.Reason)
		scaledAt = &s.now
		action = monitor.ActionScaleDown
		if desired > current {
			action = monitor.ActionScaleUp
		}
	} else {
		klog.FromContext(ctx).V(4).Info("Decided not to scale", "kind", r.source.Kind(), "autoscaler", klog.KObj(obj),
			"scaleTarget", s.ref, "desiredReplicas", desired)
	}

	setStatus(obj, current, desired, statuses, scaledAt)
	r.monitor.ObserveDesiredReplicas(obj.GetNamespace(), obj.GetName(), desired)
	if err := r.writeStatus(ctx, s, explain(metrics, current, desired, mr, d)); err != nil {
		return err
	}
	return retErr
}

// recommending reports whether a stored status says its reconcile
// computed a recommendation: it read the scale and at least one metric
// (see source.HistoryAnnotation).
func recommending(st *autoscalingv2.HorizontalPodAutoscalerStatus) bool {
	able, active := false, false
	for _, c := range st.Conditions {
		switch c.Type {
		case autoscalingv2.AbleToScale:
			able = c.Status == corev1.ConditionTrue
		case autoscalingv2.ScalingActive:
			active = c.Status == corev1.ConditionTrue
		}
	}
	return able && active
}

// failedGetScale records a failure to find or read the target's scale.
func (r *reconciler) failedGetScale(ctx context.Context, s *step, err error) {
	r.recorder.Event(s.obj.Runtime(), corev1.EventTypeWarning, "FailedGetScale", err.Error())
	setCondition(s.obj.HPAStatus(), decision.FailedGetScale(err), s.now)
	if werr := r.writeStatus(ctx, s, nil); werr != nil {
		utilruntime.HandleError(werr)
	}
}

// setStatus replaces the status as upstream's setStatus does, keeping
// lastScaleTime (unless scaledAt is set) and the conditions.
func setStatus(obj source.Object, current, desired int32, statuses []autoscalingv2.MetricStatus, scaledAt *metav1.Time) {
	st := obj.HPAStatus()
	last := st.LastScaleTime
	if scaledAt != nil {
		last = scaledAt.DeepCopy()
	}
	*st = autoscalingv2.HorizontalPodAutoscalerStatus{
		ObservedGeneration: ptr.To(obj.GetGeneration()),
		LastScaleTime:      last,
		CurrentReplicas:    current,
		DesiredReplicas:    desired,
		CurrentMetrics:     statuses,
		Conditions:         st.Conditions,
	}
}

// writeStatus sets tidal's status block (for kinds that have one) and
// writes the status when it differs from the one read at the start, or
// when the history must be persisted (see source.HistoryAnnotation).
func (r *reconciler) writeStatus(ctx context.Context, s *step, why *v1alpha1.Decision) error {
	s.obj.SetTidalStatus(tidalStatus(s.obj, why))
	var (
		compacted behavior.History
		persist   = persistNone
	)
	// The stored history stays as it is unless it must change: the tidal
	// status block was just replaced, and a lagging informer cache may
	// hold an older value than the one this controller last stored.
	keep := s.original.PersistedHistory()
	if s.history != nil {
		if s.history.persistedValue != "" {
			keep = s.history.persistedValue
		}
		compacted, persist = s.history.toPersist(s.retention, s.now.Time, r.history.refresh)
	}
	if keep != "" {
		s.obj.SetPersistedHistory(keep)
	}
	changed := !s.obj.StatusEqual(s.original)
	if !changed && persist != persistNow {
		return nil
	}
	var value string
	if persist != persistNone {
		value = compacted.Encode()
		s.obj.SetPersistedHistory(value)
	}
	if err := r.source.UpdateStatus(ctx, s.obj); err != nil {
		r.recorder.Event(s.obj.Runtime(), corev1.EventTypeWarning, "FailedUpdateStatus", err.Error())
		return fmt.Errorf("failed to update status for %s: %w", s.obj.GetName(), err)
	}
	if persist != persistNone {
		s.history.persistedAs(compacted, value)
	}
	klog.FromContext(ctx).V(2).Info("Successfully updated status", "kind", r.source.Kind(), "autoscaler", klog.KObj(s.obj))
	return nil
}

// validateSpec rejects what the apiserver's validation would have
// rejected, for objects that bypassed it (e.g. a CRD installed without its
// schema): such an object must not thrash its target.
func validateSpec(spec *autoscalingv2.HorizontalPodAutoscalerSpec) error {
	var errs []error
	if spec.MaxReplicas < 1 {
		errs = append(errs, fmt.Errorf("maxReplicas (%d) must be at least 1", spec.MaxReplicas))
	}
	if spec.MinReplicas != nil && *spec.MinReplicas < 0 {
		errs = append(errs, fmt.Errorf("minReplicas (%d) must not be negative", *spec.MinReplicas))
	}
	if spec.MinReplicas != nil && *spec.MinReplicas > spec.MaxReplicas {
		errs = append(errs, fmt.Errorf("maxReplicas (%d) must be greater than or equal to minReplicas (%d)", spec.MaxReplicas, *spec.MinReplicas))
	}
	// A zero or negative target would divide by zero or invert the ratio,
	// and a negative tolerance would make every ratio a change.
	for i, m := range spec.Metrics {
		if t := metricTarget(m); t != nil {
			if t.Value != nil && t.Value.Sign() != 1 {
				errs = append(errs, fmt.Errorf("metrics[%d] target value (%s) must be positive", i, t.Value))
			}
			if t.AverageValue != nil && t.AverageValue.Sign() != 1 {
				errs = append(errs, fmt.Errorf("metrics[%d] target averageValue (%s) must be positive", i, t.AverageValue))
			}
			if t.AverageUtilization != nil && *t.AverageUtilization < 1 {
				errs = append(errs, fmt.Errorf("metrics[%d] target averageUtilization (%d) must be greater than 0", i, *t.AverageUtilization))
			}
		}
	}
	if b := spec.Behavior; b != nil {
		for _, d := range []struct {
			name  string
			rules *autoscalingv2.HPAScalingRules
		}{{"scaleUp", b.ScaleUp}, {"scaleDown", b.ScaleDown}} {
			if d.rules != nil && d.rules.Tolerance != nil && d.rules.Tolerance.Sign() < 0 {
				errs = append(errs, fmt.Errorf("behavior.%s.tolerance (%s) must be greater than or equal to 0", d.name, d.rules.Tolerance))
			}
		}
	}
	return errors.Join(errs...)
}

// metricTarget is the target of a metric's source; nil for an unknown type
// or a missing source (reported when the metric is computed).
func metricTarget(m autoscalingv2.MetricSpec) *autoscalingv2.MetricTarget {
	switch {
	case m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil:
		return &m.Resource.Target
	case m.Type == autoscalingv2.ContainerResourceMetricSourceType && m.ContainerResource != nil:
		return &m.ContainerResource.Target
	case m.Type == autoscalingv2.PodsMetricSourceType && m.Pods != nil:
		return &m.Pods.Target
	case m.Type == autoscalingv2.ObjectMetricSourceType && m.Object != nil:
		return &m.Object.Target
	case m.Type == autoscalingv2.ExternalMetricSourceType && m.External != nil:
		return &m.External.Target
	}
	return nil
}

func invalidSpecCondition(err error) decision.Condition {
	return decision.Condition{Type: autoscalingv2.ScalingActive, Status: corev1.ConditionFalse, Reason: "InvalidSpec",
		Message: fmt.Sprintf("the HPA spec is invalid: %v", err)}
}
