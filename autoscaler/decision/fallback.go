package decision

import "fmt"

// FallbackBehavior chooses the fallback count from the configured replicas
// and the current count, as KEDA's spec.fallback.behavior does (the API's
// v1alpha1.FallbackBehavior, whose values these are).
type FallbackBehavior string

const (
	// FallbackStatic: the configured replicas. Also the empty behavior.
	FallbackStatic FallbackBehavior = "static"
	// FallbackCurrentReplicas: the current count.
	FallbackCurrentReplicas FallbackBehavior = "currentReplicas"
	// FallbackCurrentReplicasIfHigher: the higher of the current count and
	// the configured replicas.
	FallbackCurrentReplicasIfHigher FallbackBehavior = "currentReplicasIfHigher"
	// FallbackCurrentReplicasIfLower: the lower of the current count and
	// the configured replicas.
	FallbackCurrentReplicasIfLower FallbackBehavior = "currentReplicasIfLower"
)

// Fallback is an autoscaler's fallback: after FailureThreshold consecutive
// syncs in which every metric failed, scale to Count instead of keeping
// the replica count (upstream's reaction to failing metrics).
type Fallback struct {
	FailureThreshold int32
	Replicas         int32
	Behavior         FallbackBehavior
}

// SyncHealth is what one sync learnt about the metrics, for fallback.
type SyncHealth int

const (
	// MetricsNotComputed: the sync did not compute metrics (the replica
	// count was outside [min, max] or zero, or the scale was not read). The
	// failure count stays as it is.
	MetricsNotComputed SyncHealth = iota
	// MetricsAllFailed: every metric failed, or none could be computed
	// (e.g. the target's selector is missing).
	MetricsAllFailed
	// MetricsHealthy: at least one metric produced a proposal.
	MetricsHealthy
)

// FallbackStep is one sync's outcome for fallback.
type FallbackStep struct {
	// Failures is the count of consecutive all-failed syncs to persist,
	// at most FailureThreshold (so that a long outage does not rewrite the
	// status every sync).
	Failures int32
	// Active: the fallback count applies in this sync.
	Active bool
	// Entered: Active, and the previous sync was not in fallback.
	Entered bool
	// Left: the previous sync was in fallback and this one is healthy.
	Left bool
}

// Next is the step after a sync with health h, when prev is the persisted
// count. Fallback is active from the FailureThreshold-th consecutive
// all-failed sync on, and ends with the first healthy one.
func (f Fallback) Next(prev int32, h SyncHealth) FallbackStep {
	threshold := max(f.FailureThreshold, 1)
	prev = min(max(prev, 0), threshold)
	switch h {
	case MetricsAllFailed:
		n := min(prev+1, threshold)
		return FallbackStep{Failures: n, Active: n >= threshold, Entered: n >= threshold && prev < threshold}
	case MetricsHealthy:
		return FallbackStep{Left: prev >= threshold}
	}
	return FallbackStep{Failures: prev}
}

// Count is the fallback replica count for the current count, by
// Behavior, kept within [minR, maxR]. note says, when the configured
// replicas are outside that range, what was used instead ("" otherwise).
func (f Fallback) Count(current, minR, maxR int32) (n int32, note string) {
	switch f.Behavior {
	case FallbackCurrentReplicas:
		n = current
	case FallbackCurrentReplicasIfHigher:
		n = max(current, f.Replicas)
	case FallbackCurrentReplicasIfLower:
		n = min(current, f.Replicas)
	default:
		n = f.Replicas
	}
	note = f.RangeNote(minR, maxR)
	return min(max(n, minR), maxR), note
}

// RangeNote says how the configured replicas are kept within [minR, maxR]
// when they are outside it; "" when they are inside or unused (behavior
// currentReplicas).
func (f Fallback) RangeNote(minR, maxR int32) string {
	switch {
	case f.Behavior == FallbackCurrentReplicas:
		return ""
	case f.Replicas > maxR:
		return fmt.Sprintf("fallback.replicas %d is above maxReplicas %d, so %d is used: lower fallback.replicas or raise maxReplicas", f.Replicas, maxR, maxR)
	case f.Replicas < minR:
		return fmt.Sprintf("fallback.replicas %d is below minReplicas %d, so %d is used: raise fallback.replicas or lower minReplicas", f.Replicas, minR, minR)
	}
	return ""
}

// FallbackReason is the rescale reason (in SuccessfulRescale and DryRun
// events) of a fallback.
func (f Fallback) FallbackReason() string {
	return fmt.Sprintf("fallback: every metric failed in %d consecutive syncs", max(f.FailureThreshold, 1))
}
