package decision

import (
	"errors"
	"fmt"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/tidal-autoscaler/tidal/autoscaler/behavior"
	"github.com/tidal-autoscaler/tidal/autoscaler/replicas"
)

// Config is the controller-wide configuration (kube-controller-manager flags
// and feature gates). Every value is used as given, zero included:
// kube-controller-manager applies its recommended defaults to the
// configuration before the flags are parsed, so an explicit
// --horizontal-pod-autoscaler-tolerance=0 or a 0s duration stays zero there.
type Config struct {
	// Tolerance is --horizontal-pod-autoscaler-tolerance.
	Tolerance float64
	// DownscaleStabilizationWindow is
	// --horizontal-pod-autoscaler-downscale-stabilization.
	DownscaleStabilizationWindow time.Duration
	// ScaleToZero is the HPAScaleToZero feature gate (beta, on in v1.37).
	ScaleToZero bool
	// Calculator holds the cpu initialization period, the initial readiness
	// delay and the PodLevelResources gate.
	Calculator replicas.Config
}

// DefaultConfig returns the kube-controller-manager v1.37 defaults.
func DefaultConfig() Config {
	return Config{
		Tolerance:                    replicas.DefaultTolerance,
		DownscaleStabilizationWindow: behavior.DefaultDownscaleStabilizationWindow,
		ScaleToZero:                  true,
		Calculator:                   replicas.DefaultConfig(),
	}
}

// Behavior returns the defaulted behavior of an autoscaling/v2 spec.behavior
// (nil when unset), using the configured down-scale window.
func (c Config) Behavior(b *autoscalingv2.HorizontalPodAutoscalerBehavior) *behavior.Behavior {
	return behavior.FromV2(b, c.DownscaleStabilizationWindow)
}

// Tolerances returns the tolerances of an autoscaler with the defaulted
// behavior b (nil for none).
func (c Config) Tolerances(b *behavior.Behavior) replicas.Tolerances {
	if b == nil {
		return replicas.NewTolerances(c.Tolerance, nil, nil)
	}
	return replicas.NewTolerances(c.Tolerance, b.ScaleDown.Tolerance, b.ScaleUp.Tolerance)
}

// Input is what one reconcile decision needs besides the metrics.
type Input struct {
	// Now is the reconcile time: the windows and policy periods end at it.
	Now time.Time
	// Stamp dates what this reconcile records in the history (its
	// recommendation and scale event); zero means Now. The controller gives
	// the instant the reconcile was due on its beat, which Now follows by
	// the wait in the queue: a record made k periods before on the beat is
	// then always older than k periods at Now, as upstream's always are
	// (it counts each period from the end of the previous reconcile), so an
	// event exactly one policy period back is outside it on both sides.
	Stamp time.Time
	// CurrentReplicas is the scale's spec.replicas.
	CurrentReplicas int32
	// MinReplicas is spec.minReplicas (nil means 1).
	MinReplicas *int32
	// MaxReplicas is spec.maxReplicas.
	MaxReplicas int32
	// Behavior is the defaulted spec.behavior (Config.Behavior), nil for the
	// legacy rules.
	Behavior *behavior.Behavior
	// ScaledToZero is true when status has condition ScaledToZero=True.
	ScaledToZero bool
	// HasObjectOrExternalMetrics: spec.metrics has an Object or External
	// metric (HasObjectOrExternalMetrics).
	HasObjectOrExternalMetrics bool
}

// stamp is Stamp, Now when unset.
func (in Input) stamp() time.Time { return behavior.RecordTime(in.Stamp, in.Now) }

func (in Input) minReplicas() int32 {
	if in.MinReplicas != nil {
		return *in.MinReplicas
	}
	return 1
}

// Rescale reasons used without metrics.
const (
	ReasonAboveMax = "Current number of replicas above Spec.MaxReplicas"
	ReasonBelowMin = "Current number of replicas below Spec.MinReplicas"
	// ReasonAllBelowTarget is the reason of a metric-driven scale-down.
	ReasonAllBelowTarget = "All metrics below target"
)

// NeedsMetrics reports whether upstream computes the metrics in this
// reconcile: not when current > max or current < min (straight clamp), and
// at zero replicas only for scale from zero (gate on, ScaledToZero=True and
// either minReplicas != 0 or an Object/External metric).
func (c Config) NeedsMetrics(in Input) bool {
	cur := in.CurrentReplicas
	switch {
	case cur == 0:
		return c.scaleFromZero(in)
	case cur > in.MaxReplicas, cur < in.minReplicas():
		return false
	}
	return true
}

func (c Config) scaleFromZero(in Input) bool {
	scaled := c.ScaleToZero && in.ScaledToZero
	return (in.minReplicas() != 0 && scaled) || (scaled && in.HasObjectOrExternalMetrics)
}

// Decision is the outcome of one reconcile, before updating the scale.
type Decision struct {
	// MetricsFailed: the metric computation is fatal. Upstream then writes
	// status.currentReplicas and currentMetrics only (desiredReplicas keeps
	// its old value), emits the Warning event FailedComputeMetricsReplicas
	// with Err.Error(), and stops; Conditions holds ScalingActive.
	MetricsFailed bool
	// Err is the metrics error (fatal, or non-fatal when some metrics are
	// invalid but scaling proceeds; the reconcile then returns it).
	Err error
	// Rescale: update the scale's spec.replicas to DesiredReplicas.
	Rescale bool
	// DesiredReplicas is the new count when Rescale, else CurrentReplicas;
	// it is status.desiredReplicas either way (unless MetricsFailed).
	DesiredReplicas int32
	// Reason is the rescale reason for the events.
	Reason string
	// MetricName is the metric that drove the proposal, if any.
	MetricName string
	// MetricsComputed: metrics were used (status.currentMetrics is set);
	// false in the zero, above-max and below-min branches (currentMetrics is
	// nil there).
	MetricsComputed bool
	// Normalization is the detail of normalization, nil when it did not run.
	Normalization *behavior.Result
	// Conditions are set in order, each replacing any condition of its type.
	Conditions []Condition
	// RemoveScaledToZero: drop the ScaledToZero condition (gate off, at
	// zero replicas).
	RemoveScaledToZero bool
}

var errMetricsMissing = errors.New("metrics were not computed although NeedsMetrics is true")

// Decide makes the decision of one reconcile. metrics is the result of
// Combine and is only read when NeedsMetrics(in) is true. hist is the
// autoscaler's history; Decide records the initial recommendation and, when
// normalization runs, the new recommendation in it.
//
// Order, as upstream: record (current, now) if no recommendation exists;
// then the first matching branch:
//
//   - current == 0 without scale from zero: maintenance mode, no rescale,
//     ScalingActive=False/ScalingDisabled;
//   - current > max: rescale to max, ReasonAboveMax;
//   - current < min: rescale to min, ReasonBelowMin;
//   - otherwise metrics: fatal -> MetricsFailed; else desired = the metric
//     proposal (never below 0), reason "<metric> above target" when above
//     current, ReasonAllBelowTarget when below; normalize (legacy when
//     Behavior is nil); from zero with min != 0 and ScaledToZero, a result
//     below min is raised to min; rescale when it differs from current.
func (c Config) Decide(in Input, metrics *Combined, hist *behavior.History) Decision {
	hist.RecordInitial(in.CurrentReplicas, in.stamp())
	minR := in.minReplicas()
	cur := in.CurrentReplicas
	var d Decision

	switch {
	case cur == 0 && !c.scaleFromZero(in):
		d.DesiredReplicas = 0
		d.Conditions = append(d.Conditions, cond(autoscalingv2.ScalingActive, corev1.ConditionFalse, "ScalingDisabled", "scaling is disabled since the replica count of the target is zero"))
		d.RemoveScaledToZero = !c.ScaleToZero
		return d
	case cur != 0 && cur > in.MaxReplicas:
		d.Rescale, d.DesiredReplicas, d.Reason = true, in.MaxReplicas, ReasonAboveMax
		return d
	case cur != 0 && cur < minR:
		d.Rescale, d.DesiredReplicas, d.Reason = true, minR, ReasonBelowMin
		return d
	}

	if metrics == nil {
		d.MetricsFailed, d.Err = true, errMetricsMissing
		return d
	}
	d.Conditions = make([]Condition, 0, 3) // ScalingActive, AbleToScale, ScalingLimited
	if metrics.ScalingActive != nil {
		d.Conditions = append(d.Conditions, *metrics.ScalingActive)
	}
	if metrics.Err != nil && metrics.Replicas == -1 {
		d.MetricsFailed, d.Err = true, metrics.Err
		return d
	}
	d.Err = metrics.Err
	d.MetricsComputed = true

	desired := int32(0)
	if metrics.Replicas > desired {
		desired, d.MetricName = metrics.Replicas, metrics.Name
	}
	if desired > cur {
		d.Reason = fmt.Sprintf("%s above target", d.MetricName)
	}
	if desired < cur {
		d.Reason = ReasonAllBelowTarget
	}

	nin := behavior.Input{Current: cur, Desired: desired, Min: minR, Max: in.MaxReplicas, Now: in.Now, Stamp: in.stamp()}
	var res behavior.Result
	if in.Behavior == nil {
		res = hist.NormalizeLegacy(nin, c.DownscaleStabilizationWindow)
	} else {
		res = hist.Normalize(*in.Behavior, nin)
	}
	d.Normalization = &res
	d.Conditions = append(d.Conditions, cond(autoscalingv2.AbleToScale, corev1.ConditionTrue, res.StabilizationReason, "%s", res.StabilizationMessage))
	limited := corev1.ConditionFalse
	if res.Limited {
		limited = corev1.ConditionTrue
	}
	d.Conditions = append(d.Conditions, cond(autoscalingv2.ScalingLimited, limited, res.LimitReason, "%s", res.LimitMessage))
	desired = res.Replicas

	if cur == 0 && minR != 0 && c.ScaleToZero && in.ScaledToZero && desired < minR {
		desired = minR
		if d.Reason == "" {
			d.Reason = ReasonBelowMin
		}
	}
	d.Rescale = desired != cur
	if d.Rescale {
		d.DesiredReplicas = desired
	} else {
		d.DesiredReplicas = cur
	}
	return d
}

// Rescaled records a successful update of the scale from in.CurrentReplicas
// to desired: the scale event (behavior set only) in hist, and returns the
// conditions to set: AbleToScale=True/SucceededRescale and, gate on,
// ScaledToZero (True when scaling a running workload to zero with
// minReplicas 0 and an Object/External metric, else False/NotScaledToZero).
// removeScaledToZero is true when the gate is off. The caller also sets
// status.lastScaleTime to now and emits SuccessfulRescale
// (SuccessfulRescaleMessage).
func (c Config) Rescaled(in Input, desired int32, hist *behavior.History) (conds []Condition, removeScaledToZero bool) {
	hist.RecordScaleEvent(in.Behavior, in.CurrentReplicas, desired, in.stamp())
	conds = append(conds, cond(autoscalingv2.AbleToScale, corev1.ConditionTrue, "SucceededRescale", "the HPA controller was able to update the target scale to %d", desired))
	if !c.ScaleToZero {
		return conds, true
	}
	if in.CurrentReplicas > 0 && desired == 0 && in.minReplicas() == 0 && in.HasObjectOrExternalMetrics {
		conds = append(conds, cond(autoscalingv2.ScaledToZero, corev1.ConditionTrue, "ScaledToZero", "the HPA controller scaled the workload to zero"))
	} else {
		conds = append(conds, cond(autoscalingv2.ScaledToZero, corev1.ConditionFalse, "NotScaledToZero", "the HPA controller did not scale the workload to zero"))
	}
	return conds, false
}
