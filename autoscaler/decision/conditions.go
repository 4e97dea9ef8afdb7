package decision

import (
	"fmt"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
)

// Condition is a status condition to set on the autoscaler. lastTransitionTime
// is the caller's business: upstream changes it only when Status flips.
type Condition struct {
	Type    autoscalingv2.HorizontalPodAutoscalerConditionType
	Status  corev1.ConditionStatus
	Reason  string
	Message string
}

func cond(t autoscalingv2.HorizontalPodAutoscalerConditionType, s corev1.ConditionStatus, reason, format string, args ...any) Condition {
	return Condition{Type: t, Status: s, Reason: reason, Message: message(format, args...)}
}

// message is fmt.Sprintf(format, args...), without formatting the two
// shapes every reconcile makes (a plain message, and "%s" of one
// string), which need no copy.
func message(format string, args ...any) string {
	switch {
	case len(args) == 0 && !strings.Contains(format, "%"):
		return format
	case len(args) == 1 && format == "%s":
		if s, ok := args[0].(string); ok {
			return s
		}
	}
	return fmt.Sprintf(format, args...)
}

// Conditions of the scale subresource steps (the controller's I/O side).

// SucceededGetScale is AbleToScale=True after the scale was read.
func SucceededGetScale() Condition {
	return cond(autoscalingv2.AbleToScale, corev1.ConditionTrue, "SucceededGetScale", "the HPA controller was able to get the target's current scale")
}

// FailedGetScale is AbleToScale=False when the scale could not be read (also
// for an unparsable apiVersion or an unknown kind); the Warning event
// FailedGetScale carries err.Error().
func FailedGetScale(err error) Condition {
	return cond(autoscalingv2.AbleToScale, corev1.ConditionFalse, "FailedGetScale", "the HPA controller was unable to get the target's current scale: %v", err)
}

// RescaleFailed is AbleToScale=False when updating the scale failed.
func RescaleFailed(err error) Condition {
	return cond(autoscalingv2.AbleToScale, corev1.ConditionFalse, "FailedUpdateScale", "the HPA controller was unable to update the target scale: %v", err)
}

// SuccessfulRescaleMessage is the message of the Normal event SuccessfulRescale.
func SuccessfulRescaleMessage(desired int32, reason string) string {
	return fmt.Sprintf("New size: %d; reason: %s", desired, reason)
}

// FailedRescaleMessage is the message of the Warning event FailedRescale.
func FailedRescaleMessage(desired int32, reason string, err error) string {
	return fmt.Sprintf("New size: %d; reason: %s; error: %v", desired, reason, err.Error())
}

// Selector conditions. The caller emits the Warning events: SelectorRequired
// "selector is required", InvalidSelector with the parse message,
// AmbiguousSelector with the overlap message; the metric computation then
// fails with that message as the error.

// SelectorRequired is ScalingActive=False when the scale has no selector.
func SelectorRequired() Condition {
	return cond(autoscalingv2.ScalingActive, corev1.ConditionFalse, "InvalidSelector", "the HPA target's scale is missing a selector")
}

// InvalidSelectorMessage is the event and condition message for an
// unparsable selector.
func InvalidSelectorMessage(parseErr error) string {
	return fmt.Sprintf("couldn't convert selector into a corresponding internal selector object: %v", parseErr)
}

// InvalidSelector is ScalingActive=False for an unparsable selector.
func InvalidSelector(parseErr error) Condition {
	return cond(autoscalingv2.ScalingActive, corev1.ConditionFalse, "InvalidSelector", "%s", InvalidSelectorMessage(parseErr))
}

// AmbiguousSelectorMessage is the event and condition message when the pods
// of selector are also selected by other autoscalers (hpas as upstream prints
// them, e.g. a slice of namespace/name keys).
func AmbiguousSelectorMessage(selector string, hpas any) string {
	return fmt.Sprintf("pods by selector %v are controlled by more than one HPA (e.g. %v)", selector, hpas)
}

// AmbiguousSelector is ScalingActive=False for overlapping selectors.
func AmbiguousSelector(message string) Condition {
	return cond(autoscalingv2.ScalingActive, corev1.ConditionFalse, "AmbiguousSelector", "%s", message)
}
