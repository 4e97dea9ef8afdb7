package status

import (
	"fmt"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/tidal-autoscaler/tidal/autoscaler/decision"
)

// Condition types tidal adds to upstream's, each only while its feature is
// set (see source.Extensions): an autoscaler with neither has exactly
// upstream's conditions.
const (
	// DryRunCondition is True while the autoscaler runs dry: what it would
	// do, and that /scale is not written.
	DryRunCondition autoscalingv2.HorizontalPodAutoscalerConditionType = "DryRun"
	// FallbackCondition is True while the fallback count applies, False
	// otherwise (with why).
	FallbackCondition autoscalingv2.HorizontalPodAutoscalerConditionType = "Fallback"
	// ConflictCondition is True while another writer acts on what the
	// autoscaler would write (controller/guard.go), so that it does not;
	// absent otherwise.
	ConflictCondition autoscalingv2.HorizontalPodAutoscalerConditionType = "Conflict"
)

// Conflict is ConflictCondition=True with reason OtherAutoscaler or
// OtherStatusWriter.
func Conflict(reason, message string) decision.Condition {
	return decision.Condition{Type: ConflictCondition, Status: corev1.ConditionTrue, Reason: reason, Message: message}
}

// DryRunMessage is the message of the DryRun event and condition: what the
// autoscaler would do, e.g. "would scale 4→9: pods metric rps above
// target", or "would keep 4 replicas".
func DryRunMessage(current, desired int32, reason string) string {
	if desired == current {
		if reason != "" {
			return fmt.Sprintf("would keep %d replicas: %s", current, reason)
		}
		return fmt.Sprintf("would keep %d replicas", current)
	}
	return fmt.Sprintf("would scale %d→%d: %s", current, desired, reason)
}

// DryRun is DryRunCondition=True: WouldScale or WouldNotScale, or
// InvalidDryRun (with the problem) when the dry run was not given in a
// readable form and is assumed.
func DryRun(current, desired int32, reason, problem string) decision.Condition {
	msg := "dry run, /scale is not written: " + DryRunMessage(current, desired, reason)
	c := decision.Condition{Type: DryRunCondition, Status: corev1.ConditionTrue, Reason: "WouldNotScale", Message: msg}
	if desired != current {
		c.Reason = "WouldScale"
	}
	if problem != "" {
		c.Reason, c.Message = "InvalidDryRun", problem+"; "+msg
	}
	return c
}

// FallbackActive is FallbackCondition=True: every metric failed in
// failures consecutive syncs (failing names them), so the fallback count
// n applies; note says how replicas were kept within the range.
func FallbackActive(f decision.Fallback, failures int32, failing []string, n int32, note string) decision.Condition {
	msg := fmt.Sprintf("every metric failed in %d consecutive syncs (failureThreshold %d): %s; the fallback count is %d (behavior %s, replicas %d)",
		failures, f.FailureThreshold, strings.Join(failing, "; "), n, behaviorName(f), f.Replicas)
	return decision.Condition{Type: FallbackCondition, Status: corev1.ConditionTrue, Reason: "AllMetricsFailed", Message: withNote(msg, note)}
}

// FallbackPending is FallbackCondition=False while every metric fails
// but fewer than failureThreshold syncs in a row.
func FallbackPending(f decision.Fallback, failures int32, failing []string, note string) decision.Condition {
	msg := fmt.Sprintf("every metric failed in %d of the %d consecutive syncs that start fallback: %s", failures, f.FailureThreshold, strings.Join(failing, "; "))
	return decision.Condition{Type: FallbackCondition, Status: corev1.ConditionFalse, Reason: "MetricsFailing", Message: withNote(msg, note)}
}

// FallbackInactive is FallbackCondition=False after a sync in which a
// metric produced a proposal.
func FallbackInactive(f decision.Fallback, note string) decision.Condition {
	msg := fmt.Sprintf("a metric was computed; fallback starts after %d consecutive syncs in which every metric fails", f.FailureThreshold)
	return decision.Condition{Type: FallbackCondition, Status: corev1.ConditionFalse, Reason: "MetricsAvailable", Message: withNote(msg, note)}
}

// FallbackInvalid is FallbackCondition=False when the fallback given
// cannot be used (problem names where it is given and what to change).
func FallbackInvalid(problem string) decision.Condition {
	return decision.Condition{Type: FallbackCondition, Status: corev1.ConditionFalse, Reason: "InvalidFallback", Message: problem}
}

func behaviorName(f decision.Fallback) decision.FallbackBehavior {
	if f.Behavior == "" {
		return decision.FallbackStatic
	}
	return f.Behavior
}

func withNote(msg, note string) string {
	if note == "" {
		return msg
	}
	return msg + " (" + note + ")"
}
