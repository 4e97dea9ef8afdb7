package replicas

import (
	"fmt"
	"math"
)

// ObjectValue computes the proposal for an Object metric with a Value target:
// usage is the described object's value and target the target value, both in
// milli-units. specReplicas is the scale's spec.replicas; pods are the pods
// matched by the scale target's selector (consulted only when needed).
//
// ratio = usage/target. specReplicas != 0: within tolerance keeps
// specReplicas; else ceil(ratio*readyPods) with readyPods the Running pods
// with Ready=True (ReadyPodCount), capped at MaxInt32; an empty pod list is
// the error "unable to calculate ready pods: no pods returned by selector
// while calculating replica count". specReplicas == 0 (scale from zero):
// ceil(ratio), no tolerance, no pods. Usage in the result is usage.
func ObjectValue(specReplicas int32, usage, target int64, tol Tolerances, pods []Pod) (ValueProposal, error) {
	ratio := float64(usage) / float64(target)
	n, within, err := usageRatioReplicas(specReplicas, ratio, tol, pods)
	if err != nil {
		return ValueProposal{}, err
	}
	return ValueProposal{Replicas: n, Usage: usage, WithinTolerance: within}, nil
}

// ExternalValue is ObjectValue for an External metric with a Value target:
// usage is the sum of all returned series (SumExternalValue).
func ExternalValue(specReplicas int32, values []int64, target int64, tol Tolerances, pods []Pod) (ValueProposal, error) {
	usage := SumExternalValue(values)
	ratio := float64(usage) / float64(target)
	n, within, err := usageRatioReplicas(specReplicas, ratio, tol, pods)
	if err != nil {
		return ValueProposal{}, err
	}
	return ValueProposal{Replicas: n, Usage: usage, WithinTolerance: within}, nil
}

func usageRatioReplicas(specReplicas int32, ratio float64, tol Tolerances, pods []Pod) (n int32, within bool, err error) {
	if specReplicas == 0 {
		return int32(math.Ceil(ratio)), false, nil
	}
	if tol.Within(ratio) {
		return specReplicas, true, nil
	}
	ready, err := ReadyPodCount(pods)
	if err != nil {
		return 0, false, fmt.Errorf("unable to calculate ready pods: %s", err)
	}
	f := ratio * float64(ready)
	if f > math.MaxInt32 {
		return math.MaxInt32, false, nil
	}
	return int32(math.Ceil(f)), false, nil
}

// ObjectAverageValue computes the proposal for an Object metric with an
// AverageValue target. statusReplicas is the scale's status.replicas; pods are
// not consulted.
//
// ratio = usage/(targetAverage*statusReplicas); outside tolerance the
// proposal is ceil(usage/targetAverage) (no cap), else statusReplicas. Usage
// in the result is ceil(usage/statusReplicas).
func ObjectAverageValue(statusReplicas int32, usage, targetAverage int64, tol Tolerances) ValueProposal {
	n := statusReplicas
	ratio := float64(usage) / (float64(targetAverage) * float64(n))
	within := tol.Within(ratio)
	if !within {
		n = int32(math.Ceil(float64(usage) / float64(targetAverage)))
	}
	return ValueProposal{Replicas: n, Usage: int64(math.Ceil(float64(usage) / float64(statusReplicas))), WithinTolerance: within}
}

// ExternalAverageValue computes the proposal for an External metric with an
// AverageValue target. usage = SumExternalAverageValue(values); then as
// ObjectAverageValue, except that the proposal is capped at MaxInt32 and the
// status usage is MaxInt64 when the sum saturated.
func ExternalAverageValue(statusReplicas int32, values []int64, targetPerPod int64, tol Tolerances) ValueProposal {
	usage := SumExternalAverageValue(values)
	n := statusReplicas
	ratio := float64(usage) / (float64(targetPerPod) * float64(n))
	within := tol.Within(ratio)
	if !within {
		f := math.Ceil(float64(usage) / float64(targetPerPod))
		if f > float64(math.MaxInt32) {
			n = math.MaxInt32
		} else {
			n = int32(f)
		}
	}
	if float64(usage) >= float64(math.MaxInt64) {
		usage = math.MaxInt64
	} else {
		usage = int64(math.Ceil(float64(usage) / float64(statusReplicas)))
	}
	return ValueProposal{Replicas: n, Usage: usage, WithinTolerance: within}
}

// SumExternalValue sums external series as the Value path does: adding a
// positive value that would overflow saturates at MaxInt64 and stops.
func SumExternalValue(values []int64) int64 {
	var sum int64
	for _, v := range values {
		if v > 0 && sum > math.MaxInt64-v {
			return math.MaxInt64
		}
		sum += v
	}
	return sum
}

// SumExternalAverageValue sums external series as the AverageValue path does:
// as soon as the running sum is negative it is taken as an overflow and
// becomes MaxInt64. Upstream quirk kept on purpose: a negative series value
// that makes the running sum negative also yields MaxInt64.
func SumExternalAverageValue(values []int64) int64 {
	var sum int64
	for _, v := range values {
		sum += v
		if sum < 0 {
			return math.MaxInt64
		}
	}
	return sum
}
