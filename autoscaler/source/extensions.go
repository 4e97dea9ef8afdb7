package source

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
)

// Annotations of native mode. A HorizontalAutoscaler has spec and status
// fields for the same things (v1alpha1.TidalSpec, status.tidal); an
// autoscaling/v2 HPA has no room for them, so tidal reads and writes these
// annotations instead. All share HistoryAnnotation's prefix.
const (
	// DryRunAnnotation is spec.dryRun: "true" or "false".
	DryRunAnnotation = "autoscaling.tidal.dev/dry-run"
	// FallbackAnnotation is spec.fallback as JSON, e.g.
	// {"failureThreshold":3,"replicas":5,"behavior":"static"}.
	FallbackAnnotation = "autoscaling.tidal.dev/fallback"
	// MetricFailuresAnnotation is status.tidal.metricFailures, written with
	// the status (an HPA's status update keeps metadata changes).
	MetricFailuresAnnotation = "autoscaling.tidal.dev/metric-failures"
	// ScaleDownPodSelectionAnnotation is spec.scaleDownPodSelection as
	// JSON, e.g. {"metric":{"type":"Resource","name":"cpu"}}.
	ScaleDownPodSelectionAnnotation = "autoscaling.tidal.dev/scale-down-pod-selection"
	// HoldScaleDownDuringRolloutAnnotation is
	// spec.holdScaleDownDuringRollout: "true" or "false".
	HoldScaleDownDuringRolloutAnnotation = "autoscaling.tidal.dev/hold-scale-down-during-rollout"
)

// Extensions is what tidal adds to an autoscaler's spec, however it is
// given. The zero value (nothing set) decides exactly as upstream.
type Extensions struct {
	// DryRun: decide and record, never write /scale.
	DryRun bool
	// Fallback is nil when unset or invalid.
	Fallback *v1alpha1.Fallback
	// DryRunProblem and FallbackProblem say what is wrong with a value
	// that could not be used, naming where it is given and what to change
	// ("" when fine). A dry run that cannot be read is taken as set (the
	// cautious reading: no /scale writes); a fallback that cannot be used
	// is ignored.
	DryRunProblem, FallbackProblem string

	// PodSelection is nil when unset or unreadable; whether its metric is
	// among spec.metrics is checked by the reconcile.
	PodSelection *v1alpha1.ScaleDownPodSelection
	// HoldScaleDownDuringRollout: no scale-down of a Deployment whose
	// rollout is in progress.
	HoldScaleDownDuringRollout bool
	// PodSelectionProblem and HoldProblem are as DryRunProblem. A pod
	// selection that cannot be read is ignored (pods are not written); a
	// hold that cannot be read is taken as set (the cautious reading: a
	// scale-down waits for the rollout).
	PodSelectionProblem, HoldProblem string
}

// ValidateFallback checks f as the CRD's schema does (the value may come
// from an annotation or from an object that bypassed the schema).
func ValidateFallback(f v1alpha1.Fallback) error {
	switch {
	case f.FailureThreshold < 1:
		return fmt.Errorf("failureThreshold must be at least 1, got %d", f.FailureThreshold)
	case f.Replicas < 0:
		return fmt.Errorf("replicas must not be negative, got %d", f.Replicas)
	case f.Behavior != "" && !slices.Contains(v1alpha1.FallbackBehaviors, f.Behavior):
		return fmt.Errorf("behavior must be one of %v, got %q", v1alpha1.FallbackBehaviors, f.Behavior)
	}
	return nil
}

// crdExtensions reads tidal's spec fields.
func crdExtensions(t v1alpha1.TidalSpec) Extensions {
	e := Extensions{DryRun: t.DryRun, HoldScaleDownDuringRollout: t.HoldScaleDownDuringRollout}
	if t.ScaleDownPodSelection != nil {
		e.PodSelection = t.ScaleDownPodSelection.DeepCopy()
	}
	if t.Fallback != nil {
		if err := ValidateFallback(*t.Fallback); err != nil {
			e.FallbackProblem = fmt.Sprintf("spec.fallback is invalid and ignored: %v", err)
		} else {
			e.Fallback = t.Fallback.DeepCopy()
		}
	}
	return e
}

// fallbackExample and podSelectionExample are valid annotation values,
// for problem messages.
const (
	fallbackExample     = `{"failureThreshold":3,"replicas":5,"behavior":"static"}`
	podSelectionExample = `{"metric":{"type":"Resource","name":"cpu"}}`
)

// decodeStrict decodes one JSON value into v, refusing unknown fields.
func decodeStrict(value string, v any) error {
	dec := json.NewDecoder(bytes.NewReader([]byte(value)))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = fmt.Errorf("more than one JSON value")
	}
	return err
}

// safeBool reads the value v of a boolean annotation whose safe side is
// "true" (what it means: meaning): anything but "true" or "false" is taken
// as true, with the problem to report.
func safeBool(annotation, v, meaning string) (on bool, problem string) {
	switch v {
	case "true":
		return true, ""
	case "false":
		return false, ""
	}
	return true, fmt.Sprintf("annotation %s is %s, neither \"true\" nor \"false\": taken as \"true\" (%s) until it is set to one of them",
		annotation, strconv.Quote(v), meaning)
}

// annotationExtensions reads native mode's annotations.
func annotationExtensions(annotations map[string]string) Extensions {
	var e Extensions
	if v, ok := annotations[HoldScaleDownDuringRolloutAnnotation]; ok {
		e.HoldScaleDownDuringRollout, e.HoldProblem = safeBool(HoldScaleDownDuringRolloutAnnotation, v, "scale-downs wait for a rollout in progress")
	}
	if v, ok := annotations[ScaleDownPodSelectionAnnotation]; ok {
		var p v1alpha1.ScaleDownPodSelection
		err := decodeStrict(v, &p)
		if err == nil && p.Metric.Name == "" {
			err = fmt.Errorf("metric.name is empty")
		}
		if err != nil {
			e.PodSelectionProblem = fmt.Sprintf("annotation %s is invalid and ignored (%v): set it to JSON like %s (type Resource or Pods, name a metric of spec.metrics)",
				ScaleDownPodSelectionAnnotation, err, podSelectionExample)
		} else {
			e.PodSelection = &p
		}
	}
	if v, ok := annotations[DryRunAnnotation]; ok {
		e.DryRun, e.DryRunProblem = safeBool(DryRunAnnotation, v, "no /scale writes")
	}
	if v, ok := annotations[FallbackAnnotation]; ok {
		var f v1alpha1.Fallback
		err := decodeStrict(v, &f)
		if err == nil {
			err = ValidateFallback(f)
		}
		if err != nil {
			e.FallbackProblem = fmt.Sprintf("annotation %s is invalid and ignored (%v): set it to JSON like %s (behavior static, currentReplicas, currentReplicasIfHigher or currentReplicasIfLower)",
				FallbackAnnotation, err, fallbackExample)
		} else {
			if f.Behavior == "" {
				f.Behavior = v1alpha1.FallbackStatic
			}
			e.Fallback = &f
		}
	}
	return e
}

// metricFailuresOfAnnotation reads MetricFailuresAnnotation; anything but
// a non-negative integer counts as 0. An absent annotation is not parsed:
// it is read several times a reconcile, and ParseInt's error for "" was
// an allocation each time.
func metricFailuresOfAnnotation(annotations map[string]string) int32 {
	v, ok := annotations[MetricFailuresAnnotation]
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 0 {
		return 0
	}
	return int32(n)
}
