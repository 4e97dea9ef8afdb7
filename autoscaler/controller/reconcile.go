package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/autoscaler/behavior"
	"github.com/tidal-autoscaler/tidal/autoscaler/clustercache"
	"github.com/tidal-autoscaler/tidal/autoscaler/decision"
	"github.com/tidal-autoscaler/tidal/autoscaler/guard"
	"github.com/tidal-autoscaler/tidal/autoscaler/history"
	"github.com/tidal-autoscaler/tidal/autoscaler/metrics"
	"github.com/tidal-autoscaler/tidal/autoscaler/monitor"
	"github.com/tidal-autoscaler/tidal/autoscaler/source"
	"github.com/tidal-autoscaler/tidal/autoscaler/status"
)

// specError is an error caused by the autoscaler's spec (label
// error=spec), as upstream's errSpec; any other error is internal. Its text
// is the wrapped error's.
type specError struct{ err error }

func (e *specError) Error() string { return e.err.Error() }
func (e *specError) Unwrap() error { return e.err }

// errorLabel is the error label of a reconcile that returned err.
func errorLabel(err error) string {
	var spec *specError
	switch {
	case err == nil:
		return monitor.ErrorNone
	case errors.As(err, &spec):
		return monitor.ErrorSpec
	}
	return monitor.ErrorInternal
}

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
	// selections selects each autoscaler's pods from the pod informer's
	// indexer (with clustercache.PodIndex's Indexers) and converts them
	// for the arithmetic.
	selections *clustercache.Selections
	scales     *scaler
	metrics    metrics.Client
	recorder   record.EventRecorder
	monitor    *monitor.Monitor
	cfg        decision.Config
	clock      clock.PassiveClock
	history    *history.Store
	selectors  *clustercache.SelectorTracker
	// podClient writes pod deletion costs (spec.scaleDownPodSelection);
	// deployment reads a target Deployment's rollout state
	// (spec.holdScaleDownDuringRollout), false when unknown.
	podClient  typedcorev1.PodsGetter
	deployment func(namespace, name string) (*appsv1.Deployment, bool)
	// statusInterval is Options.StatusMetricsMinInterval; statusWrites
	// are the last writes it counts from (statuswrites.go).
	statusInterval time.Duration
	statusWrites   *statusWrites
	// otherHPAs (crd mode) and writers (native mode) are the other-writer
	// guard's (guard.go); nil: not checked.
	otherHPAs *guard.HPAs
	writers   *guard.StatusWriters
}

// reconcileKey reconciles the object named key; deleted is true when it is
// gone (its history is then forgotten and it is not requeued). stamp
// dates what the reconcile records in the history (recordStamp; zero: its
// start).
func (r *reconciler) reconcileKey(ctx context.Context, key string, stamp time.Time) (deleted bool, err error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return true, err
	}
	obj, err := r.source.Get(namespace, name)
	if apierrors.IsNotFound(err) {
		klog.FromContext(ctx).V(2).Info("Autoscaler has been deleted", "kind", r.source.Kind(), "autoscaler", klog.KRef(namespace, name))
		r.history.Forget(key)
		r.statusWrites.forget(key)
		r.selections.Forget(key)
		if r.writers != nil {
			r.writers.Forget(key)
		}
		r.monitor.Forget(namespace, name) // a reconcile that ended after the delete event
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return false, r.reconcile(ctx, obj, key, stamp)
}

// step is the state of one reconcile.
type step struct {
	obj      source.Object
	original source.Object
	key      string
	ref      string // Kind/namespace/name of the target, for errors
	now      metav1.Time
	stamp    time.Time // decision.Input's Stamp
	// history and retention are set once the history is read; every
	// status write from then on also persists it.
	history   *history.Entry
	retention behavior.Retention

	// What the reconcile read and decided, set step by step.
	metrics  []autoscalingv2.MetricSpec
	scale    *autoscalingv1.Scale
	resource schema.GroupResource
	current  int32
	in       decision.Input
	mr       *metricsResult
	d        decision.Decision

	// Tidal's additions (extensions.go): the object's extensions, its
	// fallback (nil: none), the count of consecutive all-failed syncs to
	// persist, and this sync's fallback step.
	ext      source.Extensions
	fallback *decision.Fallback
	failures int32
	fb       decision.FallbackStep
	// selection is the index in metrics of spec.scaleDownPodSelection's
	// metric, -1 when it does not apply (podselection.go); held is a
	// scale-down to heldFrom held by a rollout (rollouthold.go).
	selection int
	held      bool
	heldFrom  int32
	// The guard's (guard.go): conflict means /scale is not written; shadow
	// is the HPA a dry run compares with, shadowStatus the comparison.
	conflict     bool
	shadow       *autoscalingv2.HorizontalPodAutoscaler
	shadowStatus *v1alpha1.ShadowComparison
}

// recordTime is when this reconcile dates what it records: its stamp, now
// when unset (behavior.RecordTime).
func (s *step) recordTime() time.Time { return behavior.RecordTime(s.stamp, s.now.Time) }

// reconcile is upstream's reconcileAutoscaler: read the target's scale,
// compute the metrics, decide, rescale if need be, write the status.
// cached is the informer's object, left unchanged: it is the status the
// reconcile compares its own with, and a copy of it the one it writes.
func (r *reconciler) reconcile(ctx context.Context, cached source.Object, key string, stamp time.Time) (retErr error) {
	obj := cached.DeepCopy()
	action := monitor.ActionNone
	start := r.clock.Now()
	defer func() {
		r.monitor.ObserveReconciliation(action, errorLabel(retErr), r.clock.Since(start))
		r.observeObject(obj)
	}()

	spec := obj.HPASpec()
	s := &step{
		obj: obj, original: cached, key: key, now: metav1.NewTime(start), stamp: stamp,
		ref: fmt.Sprintf("%s/%s/%s", spec.ScaleTargetRef.Kind, obj.GetNamespace(), spec.ScaleTargetRef.Name),
	}
	r.readExtensions(s)
	if err := r.checkSpec(ctx, s); err != nil {
		return err
	}
	if r.guardWriters(ctx, s) {
		return nil
	}
	r.guardTargets(ctx, s)
	if err := r.readScale(ctx, s); err != nil {
		return err
	}
	r.recommend(ctx, s)
	r.applyFallback(s)
	r.checkPodSelection(s)
	r.holdScaleDown(s)
	if s.d.MetricsFailed && !s.fb.Active {
		return r.metricsFailed(ctx, s)
	}
	// Some metrics failed but scaling proceeds on the others (or every
	// metric failed and the fallback count applies): report it.
	retErr = s.d.Err
	if s.fb.Active {
		r.recorder.Event(obj.Runtime(), corev1.EventTypeWarning, "FailedComputeMetricsReplicas", s.d.Err.Error())
	}

	desired := s.d.DesiredReplicas
	var scaledAt *metav1.Time
	r.recordDryRun(s, desired, s.d.Reason)
	r.recordShadow(s, desired)
	if s.d.Rescale && !s.ext.DryRun && !s.conflict {
		r.setDeletionCosts(ctx, s, desired)
		if err := r.rescale(ctx, s); err != nil {
			return err
		}
		scaledAt = &s.now
		r.observeScale(s, desired)
		action = monitor.ActionScaleDown
		if desired > s.current {
			action = monitor.ActionScaleUp
		}
	} else if s.d.Rescale && s.conflict {
		klog.FromContext(ctx).V(2).Info("Another autoscaler scales the target: not scaling", "kind", r.source.Kind(), "autoscaler", klog.KObj(obj),
			"scaleTarget", s.ref, "currentReplicas", s.current, "desiredReplicas", desired, "reason", s.d.Reason)
	} else if s.d.Rescale {
		klog.FromContext(ctx).V(2).Info("Dry run: not scaling", "kind", r.source.Kind(), "autoscaler", klog.KObj(obj),
			"scaleTarget", s.ref, "currentReplicas", s.current, "desiredReplicas", desired, "reason", s.d.Reason)
	} else {
		klog.FromContext(ctx).V(4).Info("Decided not to scale", "kind", r.source.Kind(), "autoscaler", klog.KObj(obj),
			"scaleTarget", s.ref, "desiredReplicas", desired)
	}

	status.Set(obj, s.current, desired, s.statuses(), scaledAt)
	r.monitor.ObserveDesiredReplicas(obj.GetNamespace(), obj.GetName(), desired)
	if err := r.writeStatus(ctx, s, s.explain(desired)); err != nil {
		return err
	}
	return retErr
}

// checkSpec rejects an invalid spec: a Warning event, ScalingActive=False
// and a status write.
func (r *reconciler) checkSpec(ctx context.Context, s *step) error {
	spec := s.obj.HPASpec()
	if err := validateSpec(spec); err != nil {
		r.recorder.Event(s.obj.Runtime(), corev1.EventTypeWarning, "InvalidSpec", err.Error())
		status.SetCondition(s.obj.HPAStatus(), invalidSpecCondition(err), s.now)
		if werr := r.writeStatus(ctx, s, nil); werr != nil {
			utilruntime.HandleErrorWithContext(ctx, werr, "Writing the status failed", "autoscaler", klog.KObj(s.obj))
		}
		return &specError{fmt.Errorf("invalid spec of %s %s: %v", r.source.Kind(), s.key, err)}
	}
	s.metrics = spec.Metrics
	if len(s.metrics) == 0 {
		s.metrics = defaultMetrics()
	}
	return nil
}

// readScale reads the target's /scale (AbleToScale=True with
// SucceededGetScale); on failure it records FailedGetScale.
func (r *reconciler) readScale(ctx context.Context, s *step) error {
	ref := s.obj.HPASpec().ScaleTargetRef
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		r.failedGetScale(ctx, s, err)
		return &specError{fmt.Errorf("invalid API version in scale target reference: %v", err)}
	}
	mappings, err := r.scales.mappings(schema.GroupKind{Group: gv.Group, Kind: ref.Kind})
	if err != nil {
		r.failedGetScale(ctx, s, err)
		return fmt.Errorf("unable to determine resource for scale target reference: %w", err)
	}
	sc, gr, err := r.scales.get(ctx, s.obj.GetNamespace(), ref.Name, mappings)
	if err != nil {
		r.failedGetScale(ctx, s, err)
		return fmt.Errorf("failed to query scale subresource for %s: %w", s.ref, err)
	}
	status.SetCondition(s.obj.HPAStatus(), decision.SucceededGetScale(), s.now)
	s.scale, s.resource, s.current = sc, gr, sc.Spec.Replicas
	return nil
}

// recommend reads the history, computes the metrics when the decision
// needs them, and decides; the decision's conditions go into the status.
func (r *reconciler) recommend(ctx context.Context, s *step) {
	spec, st := s.obj.HPASpec(), s.obj.HPAStatus()
	b := r.cfg.Behavior(spec.Behavior)
	s.in = decision.Input{
		Now: s.now.Time, Stamp: s.stamp, CurrentReplicas: s.current, MinReplicas: spec.MinReplicas, MaxReplicas: spec.MaxReplicas,
		Behavior: b, ScaledToZero: status.ScaledToZero(st), HasObjectOrExternalMetrics: decision.HasObjectOrExternalMetrics(s.metrics),
	}
	ret := behavior.RetentionFor(b, r.cfg.DownscaleStabilizationWindow)
	entry, err := r.history.Get(s.key, s.obj.GetUID(), s.obj.PersistedHistory(), s.obj.HistoryInAnnotation(), recommending(s.original.HPAStatus()), ret, s.now.Time)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Ignoring the persisted history", "kind", r.source.Kind(), "autoscaler", klog.KObj(s.obj))
	}
	s.history, s.retention = entry, ret
	var combined *decision.Combined
	if r.cfg.NeedsMetrics(s.in) {
		res := r.computeMetrics(ctx, s.obj, s.key, s.scale, s.metrics, r.cfg.Tolerances(b), s.now.Time)
		s.mr = &res
		combined = &res.combined
	}
	s.d = r.cfg.Decide(s.in, combined, entry.History())
	status.SetConditions(st, s.d.Conditions, s.now)
	if s.d.RemoveScaledToZero {
		status.RemoveCondition(st, autoscalingv2.ScaledToZero)
	}
}

// metricsFailed records a decision that no metric could be computed: the
// status keeps the desired count, and a Warning event says why.
func (r *reconciler) metricsFailed(ctx context.Context, s *step) error {
	st := s.obj.HPAStatus()
	r.recordDryRun(s, s.current, "")
	r.recordShadow(s, st.DesiredReplicas)
	status.Set(s.obj, s.current, st.DesiredReplicas, s.statuses(), nil)
	if werr := r.writeStatus(ctx, s, s.explain(st.DesiredReplicas)); werr != nil {
		utilruntime.HandleErrorWithContext(ctx, werr, "Writing the status failed", "autoscaler", klog.KObj(s.obj))
	}
	r.recorder.Event(s.obj.Runtime(), corev1.EventTypeWarning, "FailedComputeMetricsReplicas", s.d.Err.Error())
	return fmt.Errorf("failed to compute desired number of replicas based on listed metrics for %s: %w", s.ref, s.d.Err)
}

// rescale writes the desired count to the target's /scale, with its
// conditions and event; a failure is recorded in the status.
func (r *reconciler) rescale(ctx context.Context, s *step) error {
	st := s.obj.HPAStatus()
	desired := s.d.DesiredReplicas
	if err := r.scales.update(ctx, s.obj.GetNamespace(), s.resource, s.scale, desired); err != nil {
		r.recorder.Event(s.obj.Runtime(), corev1.EventTypeWarning, "FailedRescale", decision.FailedRescaleMessage(desired, s.d.Reason, err))
		status.SetCondition(st, decision.RescaleFailed(err), s.now)
		status.Set(s.obj, s.current, st.DesiredReplicas, s.statuses(), nil)
		if werr := r.writeStatus(ctx, s, s.explain(st.DesiredReplicas)); werr != nil {
			utilruntime.HandleErrorWithContext(ctx, werr, "Writing the status failed", "autoscaler", klog.KObj(s.obj))
		}
		return fmt.Errorf("failed to rescale %s: %w", s.ref, err)
	}
	conds, remove := r.cfg.Rescaled(s.in, desired, s.history.History())
	status.SetConditions(st, conds, s.now)
	if remove {
		status.RemoveCondition(st, autoscalingv2.ScaledToZero)
	}
	r.recorder.Event(s.obj.Runtime(), corev1.EventTypeNormal, "SuccessfulRescale", decision.SuccessfulRescaleMessage(desired, s.d.Reason))
	klog.FromContext(ctx).Info("Successfully rescaled", "kind", r.source.Kind(), "autoscaler", klog.KObj(s.obj),
		"currentReplicas", s.current, "desiredReplicas", desired, "reason", s.d.Reason)
	return nil
}

// statuses are the metrics' status.currentMetrics; nil when none were
// computed.
func (s *step) statuses() []autoscalingv2.MetricStatus {
	if s.mr == nil {
		return nil
	}
	return s.mr.statuses
}

// explain is status.tidal.decision for desired.
func (s *step) explain(desired int32) *v1alpha1.Decision {
	if s.mr == nil {
		return nil
	}
	why := status.Explain(s.metrics, s.current, desired, &s.mr.combined, s.mr.outcomes, s.d)
	if s.fb.Active {
		why.Adjustments = append(why.Adjustments, v1alpha1.Adjustment{Reason: "Fallback", From: s.current, To: desired, Message: s.fallback.FallbackReason()})
	}
	if s.held {
		why.Adjustments = append(why.Adjustments, v1alpha1.Adjustment{Reason: "RolloutInProgress", From: s.heldFrom, To: desired, Message: "holdScaleDownDuringRollout: the scale-down waits for the rollout"})
	}
	return why
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
	status.SetCondition(s.obj.HPAStatus(), decision.FailedGetScale(err), s.now)
	if werr := r.writeStatus(ctx, s, nil); werr != nil {
		utilruntime.HandleErrorWithContext(ctx, werr, "Writing the status failed", "autoscaler", klog.KObj(s.obj))
	}
}

// writeStatus sets tidal's status block (for kinds that have one) and
// writes the status when it differs from the one read at the start, or
// when the history must be persisted (see source.HistoryAnnotation).
func (r *reconciler) writeStatus(ctx context.Context, s *step, why *v1alpha1.Decision) error {
	ts := status.Tidal(s.obj, why)
	ts.Shadow = s.shadowStatus
	s.obj.SetTidalStatus(ts)
	s.obj.SetMetricFailures(s.failures)
	var (
		compacted behavior.History
		persist   = history.PersistNone
	)
	// The stored history stays as it is unless it must change: the tidal
	// status block was just replaced, and a lagging informer cache may
	// hold an older value than the one this controller last stored.
	keep := s.original.PersistedHistory()
	if s.history != nil {
		if v := s.history.PersistedValue(); v != "" {
			keep = v
		}
		compacted, persist = s.history.ToPersist(s.retention, s.now.Time, r.history.Refresh())
	}
	if keep != "" {
		s.obj.SetPersistedHistory(keep)
	}
	changed := !s.obj.StatusEqual(s.original)
	if !changed && persist != history.PersistNow {
		return nil
	}
	// Whether only metric values changed is asked only with the interval
	// set: the comparison (7 µs, 97 allocations) would be 2% of a
	// reconcile whose every status changes (BenchmarkMetricValuesOnly).
	told := r.statusInterval > 0
	valuesOnly := told && changed && status.MetricValuesOnly(s.obj, s.original)
	if r.deferStatus(s, persist, valuesOnly) {
		r.monitor.StatusWriteDeferred()
		return nil
	}
	var value string
	if persist != history.PersistNone {
		value = compacted.Encode()
		s.obj.SetPersistedHistory(value)
	}
	if err := r.source.UpdateStatus(ctx, s.obj); err != nil {
		r.recorder.Event(s.obj.Runtime(), corev1.EventTypeWarning, "FailedUpdateStatus", err.Error())
		return fmt.Errorf("failed to update status for %s: %w", s.obj.GetName(), err)
	}
	r.wroteStatus(s)
	r.monitor.StatusWritten(writeReason(changed, told, valuesOnly, persist))
	if persist != history.PersistNone {
		s.history.PersistedAs(compacted, value)
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
