package behavior

import (
	"math"
	"time"
)

// Reasons and messages of the AbleToScale and ScalingLimited conditions set by
// normalization (identical to upstream's).
const (
	ReasonReadyForNewScale    = "ReadyForNewScale"
	ReasonScaleUpStabilized   = "ScaleUpStabilized"
	ReasonScaleDownStabilized = "ScaleDownStabilized"

	ReasonTooManyReplicas    = "TooManyReplicas"
	ReasonTooFewReplicas     = "TooFewReplicas"
	ReasonScaleUpLimit       = "ScaleUpLimit"
	ReasonScaleDownLimit     = "ScaleDownLimit"
	ReasonDesiredWithinRange = "DesiredWithinRange"

	MessageReadyForNewScale    = "recommended size matches current size"
	MessageScaleUpStabilized   = "recent recommendations were lower than current one, applying the lowest recent recommendation"
	MessageScaleDownStabilized = "recent recommendations were higher than current one, applying the highest recent recommendation"
	MessageTooManyReplicas     = "the desired replica count is more than the maximum replica count"
	MessageTooFewReplicas      = "the desired replica count is less than the minimum replica count"
	MessageScaleUpLimit        = "the desired replica count is increasing faster than the maximum scale rate"
	MessageScaleDownLimit      = "the desired replica count is decreasing faster than the maximum scale rate"
	MessageDesiredWithinRange  = "the desired count is within the acceptable range"
)

// Input is what normalization needs besides the history.
type Input struct {
	// Current is the scale's spec.replicas.
	Current int32
	// Desired is the proposal from the metrics (the maximum over metrics).
	Desired int32
	// Min is spec.minReplicas (1 when unset); Max is spec.maxReplicas.
	Min, Max int32
	// Now is the reconcile time: windows end at it.
	Now time.Time
	// Stamp dates the recommendation recorded (decision.Input's Stamp);
	// zero means Now.
	Stamp time.Time
}

// stamp is Stamp, Now when unset.
func (in Input) stamp() time.Time { return RecordTime(in.Stamp, in.Now) }

// RecordTime is when a reconcile at now dates what it records in the
// history: stamp, or now when stamp is unset.
func RecordTime(stamp, now time.Time) time.Time {
	if stamp.IsZero() {
		return now
	}
	return stamp
}

// Result is the normalized proposal and the condition reasons.
type Result struct {
	// Replicas is the normalized desired replica count.
	Replicas int32
	// Stabilized is the recommendation after stabilization, before limits.
	Stabilized int32
	// StabilizationReason/Message are for AbleToScale (status True):
	// ReadyForNewScale when stabilization changed nothing.
	StabilizationReason, StabilizationMessage string
	// Limited is the status of ScalingLimited: true iff the limits changed
	// the stabilized recommendation.
	Limited bool
	// LimitReason/Message are for ScalingLimited.
	LimitReason, LimitMessage string
}

// LegacyScaleUpLimit is the per-reconcile scale-up limit without behavior:
// trunc(max(2*current, 4)).
func LegacyScaleUpLimit(current int32) int32 {
	return int32(math.Max(2.0*float64(current), 4.0))
}

// NormalizeLegacy is upstream's normalization when spec.behavior is nil.
//
//  1. Down-stabilization: the result is the maximum of Desired and every
//     recommendation not older than now-downscaleWindow (a recommendation
//     exactly at the cutoff counts). Desired is recorded, reusing the slot of
//     the last recommendation older than the cutoff, else appended.
//  2. Limits: below Min gives Min (TooFewReplicas); above min(Max,
//     LegacyScaleUpLimit(Current)) gives that bound (ScaleUpLimit when Max
//     exceeds the scale-up limit, else TooManyReplicas); else
//     DesiredWithinRange.
func (h *History) NormalizeLegacy(in Input, downscaleWindow time.Duration) Result {
	stabilized := in.Desired
	cutoff := in.Now.Add(-downscaleWindow)
	found, idx := false, 0
	for i, r := range h.Recommendations {
		if r.Time.Before(cutoff) {
			found, idx = true, i
		} else if r.Replicas > stabilized {
			stabilized = r.Replicas
		}
	}
	h.record(in.Desired, in.stamp(), found, idx)

	res := Result{Stabilized: stabilized}
	if stabilized != in.Desired {
		res.StabilizationReason, res.StabilizationMessage = ReasonScaleDownStabilized, MessageScaleDownStabilized
	} else {
		res.StabilizationReason, res.StabilizationMessage = ReasonReadyForNewScale, MessageReadyForNewScale
	}
	res.Replicas, res.LimitReason, res.LimitMessage = LegacyLimits(in.Current, stabilized, in.Min, in.Max)
	res.Limited = res.Replicas != stabilized
	return res
}

// LegacyLimits clamps desired between min and min(max, LegacyScaleUpLimit)
// and returns the ScalingLimited reason and message.
func LegacyLimits(current, desired, minReplicas, maxReplicas int32) (int32, string, string) {
	limit := LegacyScaleUpLimit(current)
	maxAllowed, reason, msg := maxReplicas, ReasonTooManyReplicas, MessageTooManyReplicas
	if maxReplicas > limit {
		maxAllowed, reason, msg = limit, ReasonScaleUpLimit, MessageScaleUpLimit
	}
	if desired < minReplicas {
		return minReplicas, ReasonTooFewReplicas, MessageTooFewReplicas
	}
	if desired > maxAllowed {
		return maxAllowed, reason, msg
	}
	return desired, ReasonDesiredWithinRange, MessageDesiredWithinRange
}

// Normalize is upstream's normalization when spec.behavior is set.
//
//  1. Stabilize: upRec = min(Desired, recommendations newer than
//     now-scaleUp window), downRec = max(Desired, recommendations newer than
//     now-scaleDown window) (strictly newer). The result is Current raised to
//     upRec when below it, then lowered to downRec when above it. Desired is
//     recorded, reusing the slot of the last recommendation older than both
//     cutoffs, else appended. When the result differs from Desired the
//     AbleToScale reason is ScaleUpStabilized if Desired >= Current, else
//     ScaleDownStabilized; otherwise ReadyForNewScale.
//  2. Rate limits, only in the direction of change (see ScaleUpLimit and
//     ScaleDownLimit): up: the limit is never below Current; the bound is
//     min(Max, limit) with reason ScaleUpLimit when Max exceeds the limit,
//     else TooManyReplicas. Down: the limit is never above Current; the bound
//     is max(Min, limit), ScaleDownLimit when the limit exceeds Min, else
//     TooFewReplicas. No change: DesiredWithinRange. Note that Min and Max are
//     only enforced in the direction of change, as upstream does.
func (h *History) Normalize(b Behavior, in Input) Result {
	stabilized, reason, msg := h.stabilize(b, in)
	res := Result{Stabilized: stabilized}
	if stabilized != in.Desired {
		res.StabilizationReason, res.StabilizationMessage = reason, msg
	} else {
		res.StabilizationReason, res.StabilizationMessage = ReasonReadyForNewScale, MessageReadyForNewScale
	}
	res.Replicas, res.LimitReason, res.LimitMessage = h.rateLimit(b, in.Current, stabilized, in.Min, in.Max, in.Now)
	res.Limited = res.Replicas != stabilized
	return res
}

func (h *History) stabilize(b Behavior, in Input) (int32, string, string) {
	upRec, downRec := in.Desired, in.Desired
	upCutoff := in.Now.Add(-time.Second * time.Duration(b.ScaleUp.StabilizationWindowSeconds))
	downCutoff := in.Now.Add(-time.Second * time.Duration(b.ScaleDown.StabilizationWindowSeconds))
	found, idx := false, 0
	for i, r := range h.Recommendations {
		if r.Time.After(upCutoff) {
			upRec = min(upRec, r.Replicas)
		}
		if r.Time.After(downCutoff) {
			downRec = max(downRec, r.Replicas)
		}
		if r.Time.Before(upCutoff) && r.Time.Before(downCutoff) {
			found, idx = true, i
		}
	}
	rec := in.Current
	if rec < upRec {
		rec = upRec
	}
	if rec > downRec {
		rec = downRec
	}
	h.record(in.Desired, in.stamp(), found, idx)
	if in.Desired >= in.Current {
		return rec, ReasonScaleUpStabilized, MessageScaleUpStabilized
	}
	return rec, ReasonScaleDownStabilized, MessageScaleDownStabilized
}

func (h *History) rateLimit(b Behavior, current, desired, minReplicas, maxReplicas int32, now time.Time) (int32, string, string) {
	switch {
	case desired > current:
		limit := h.ScaleUpLimit(b.ScaleUp, current, now)
		if limit < current {
			limit = current
		}
		maxAllowed, reason, msg := maxReplicas, ReasonTooManyReplicas, MessageTooManyReplicas
		if maxReplicas > limit {
			maxAllowed, reason, msg = limit, ReasonScaleUpLimit, MessageScaleUpLimit
		}
		if desired > maxAllowed {
			return maxAllowed, reason, msg
		}
	case desired < current:
		limit := h.ScaleDownLimit(b.ScaleDown, current, now)
		if limit > current {
			limit = current
		}
		minAllowed, reason, msg := minReplicas, ReasonTooFewReplicas, MessageTooFewReplicas
		if minReplicas < limit {
			minAllowed, reason, msg = limit, ReasonScaleDownLimit, MessageScaleDownLimit
		}
		if desired < minAllowed {
			return minAllowed, reason, msg
		}
	}
	return desired, ReasonDesiredWithinRange, MessageDesiredWithinRange
}

// periodStart is the replica count at the start of a policy period: current
// minus the scale-ups plus the scale-downs strictly within the period.
func (h History) periodStart(current, periodSeconds int32, now time.Time) int32 {
	return current - changeWithin(h.ScaleUpEvents, periodSeconds, now) + changeWithin(h.ScaleDownEvents, periodSeconds, now)
}

// ScaleUpLimit is the highest replica count the scale-up rules allow now
// (before the "never below current" floor). Disabled gives current. For each
// policy: Pods gives periodStart+value, Percent gives
// ceil(float64(periodStart)*(1+value/100)); Min takes the smallest, any other
// select policy the largest.
func (h History) ScaleUpLimit(r Rules, current int32, now time.Time) int32 {
	if r.SelectPolicy == SelectDisabled {
		return current
	}
	pick, result := maxInt32, int32(math.MinInt32)
	if r.SelectPolicy == SelectMin {
		pick, result = minInt32, int32(math.MaxInt32)
	}
	var proposed int32 // kept across policies: an unknown type repeats the previous proposal, as upstream
	for _, p := range r.Policies {
		start := h.periodStart(current, p.PeriodSeconds, now)
		switch p.Type {
		case PodsPolicy:
			proposed = start + p.Value
		case PercentPolicy:
			proposed = int32(math.Ceil(float64(start) * (1 + float64(p.Value)/100)))
		}
		result = pick(result, proposed)
	}
	return result
}

// ScaleDownLimit is the lowest replica count the scale-down rules allow now
// (before the "never above current" ceiling). Disabled gives current. For
// each policy: Pods gives periodStart-value, Percent gives
// trunc(float64(periodStart)*(1-value/100)); Min takes the largest, any other
// select policy the smallest.
func (h History) ScaleDownLimit(r Rules, current int32, now time.Time) int32 {
	if r.SelectPolicy == SelectDisabled {
		return current
	}
	pick, result := minInt32, int32(math.MaxInt32)
	if r.SelectPolicy == SelectMin {
		pick, result = maxInt32, int32(math.MinInt32)
	}
	var proposed int32 // kept across policies: an unknown type repeats the previous proposal, as upstream
	for _, p := range r.Policies {
		start := h.periodStart(current, p.PeriodSeconds, now)
		switch p.Type {
		case PodsPolicy:
			proposed = start - p.Value
		case PercentPolicy:
			proposed = int32(float64(start) * (1 - float64(p.Value)/100))
		}
		result = pick(result, proposed)
	}
	return result
}

func minInt32(a, b int32) int32 { return min(a, b) }

func maxInt32(a, b int32) int32 { return max(a, b) }
