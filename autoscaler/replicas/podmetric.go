package replicas

import (
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// PodMetricInput is the input shared by the per-pod metric calculations
// (Resource, ContainerResource and Pods metrics).
type PodMetricInput struct {
	// CurrentReplicas is the scale subresource's spec.replicas.
	CurrentReplicas int32
	// Pods are the pods matched by the scale target's selector.
	Pods []Pod
	// Samples are the per-pod samples, milli-units. The map is not modified.
	Samples PodSamples
	// Tolerances of the autoscaler (see NewTolerances).
	Tolerances Tolerances
	// Now is the reconcile time, used for cpu readiness.
	Now time.Time
}

// UtilizationProposal is the result of a Utilization target.
type UtilizationProposal struct {
	// Replicas is the proposed replica count.
	Replicas int32
	// Utilization is int(sum(usage)*100/sum(request)) over the ready pods'
	// samples, before any rebalancing: status averageUtilization.
	Utilization int32
	// RawAverage is sum(usage)/count over the same samples (milli-units):
	// status averageValue.
	RawAverage int64
	// WithinTolerance: the usage ratio (recomputed when pods were missing
	// or unready) was within the tolerance, so Replicas is the current
	// count.
	WithinTolerance bool
}

// ValueProposal is the result of an AverageValue or Value target.
type ValueProposal struct {
	// Replicas is the proposed replica count.
	Replicas int32
	// Usage is the value upstream writes to status.currentMetrics, in
	// milli-units: the average per pod for per-pod metrics and AverageValue
	// targets, the total for Value targets.
	Usage int64
	// WithinTolerance is as in UtilizationProposal.
	WithinTolerance bool
}

// ResourceUtilization computes the proposal for a Resource (container == "")
// or ContainerResource (container != "") metric with a Utilization target of
// targetUtilization percent. Samples come from ResourceSamples.
//
// The algorithm: group pods (GroupPods with resource, so cpu readiness rules
// apply to cpu), drop samples of ignored and unready pods, compute requests
// (Requests) and utilization. Without missing pods, and unless unready pods
// exist while the ratio is above 1, the result is the current count within
// tolerance, else ceil(ratio*readyCount). Otherwise missing pods are assumed
// at request*max(100,target)/100 when ratio < 1 and at 0 when ratio > 1,
// unready pods at 0 when ratio > 1; the ratio is recomputed and the current
// count is kept when the new ratio is within tolerance, flips direction, or
// ceil(newRatio*len(samples)) would move against it.
func (c Config) ResourceUtilization(in PodMetricInput, resource corev1.ResourceName, container string, targetUtilization int32) (UtilizationProposal, error) {
	if len(in.Pods) == 0 {
		return UtilizationProposal{}, errNoPods
	}
	samples, g, err := c.usableSamples(in, resource)
	if err != nil {
		return UtilizationProposal{}, err
	}
	requests, err := c.Requests(in.Pods, container, resource)
	if err != nil {
		return UtilizationProposal{}, err
	}
	ratio, util, raw, err := utilizationRatio(samples, requests, targetUtilization)
	if err != nil {
		return UtilizationProposal{}, err
	}
	p := UtilizationProposal{Utilization: util, RawAverage: raw}

	fill := func(name string) int64 { // missing pod on a scale-down
		return requests[name] * int64(max(100, targetUtilization)) / 100
	}
	p.Replicas, p.WithinTolerance, err = rebalance(in, g, samples, ratio, fill, func(s PodSamples) (float64, error) {
		r, _, _, err := utilizationRatio(s, requests, targetUtilization)
		return r, err
	})
	if err != nil {
		return UtilizationProposal{}, err
	}
	return p, nil
}

// ResourceAverageValue computes the proposal for a Resource or
// ContainerResource metric with an AverageValue target (milli-units). The
// container only selects the samples (see ResourceSamples); requests are not
// consulted. Same algorithm as PodsAverageValue, with cpu readiness rules when
// resource is cpu.
func (c Config) ResourceAverageValue(in PodMetricInput, resource corev1.ResourceName, targetAverage int64) (ValueProposal, error) {
	return c.plain(in, resource, targetAverage)
}

// PodsAverageValue computes the proposal for a Pods metric (custom metrics
// pods/*) with an AverageValue target (milli-units).
//
// average = sum(samples)/len(samples) (integer division, and samples of pods
// absent from the pod list are included, as upstream does), ratio =
// average/target. Rebalancing as in ResourceUtilization, except that missing
// pods are assumed at the target on a scale-down.
func (c Config) PodsAverageValue(in PodMetricInput, targetAverage int64) (ValueProposal, error) {
	return c.plain(in, "", targetAverage)
}

func (c Config) plain(in PodMetricInput, resource corev1.ResourceName, target int64) (ValueProposal, error) {
	if len(in.Pods) == 0 {
		return ValueProposal{}, errNoPods
	}
	samples, g, err := c.usableSamples(in, resource)
	if err != nil {
		return ValueProposal{}, err
	}
	ratio, usage := averageRatio(samples, target)
	replicas, within, err := rebalance(in, g, samples, ratio, func(string) int64 { return target }, func(s PodSamples) (float64, error) {
		r, _ := averageRatio(s, target)
		return r, nil
	})
	if err != nil {
		return ValueProposal{}, err
	}
	return ValueProposal{Replicas: replicas, Usage: usage, WithinTolerance: within}, nil
}

// usableSamples groups the pods and returns a copy of the samples without the
// ignored and unready pods.
func (c Config) usableSamples(in PodMetricInput, resource corev1.ResourceName) (PodSamples, Groups, error) {
	g := c.GroupPods(in.Pods, in.Samples, resource, in.Now)
	samples := in.Samples.clone()
	for name := range g.Ignored {
		delete(samples, name)
	}
	for name := range g.Unready {
		delete(samples, name)
	}
	if len(samples) == 0 {
		return nil, g, errNoUsableMetrics
	}
	return samples, g, nil
}

// rebalance implements the decision shared by the per-pod calculations;
// within reports that the current count was kept because a ratio was
// within the tolerance. samples is owned by the caller and is modified.
func rebalance(in PodMetricInput, g Groups, samples PodSamples, ratio float64, scaleDownFill func(string) int64, recompute func(PodSamples) (float64, error)) (n int32, within bool, err error) {
	scaleUpWithUnready := len(g.Unready) > 0 && ratio > 1.0
	if !scaleUpWithUnready && len(g.Missing) == 0 {
		if in.Tolerances.Within(ratio) {
			return in.CurrentReplicas, true, nil
		}
		return int32(math.Ceil(ratio * float64(g.ReadyCount))), false, nil
	}

	if len(g.Missing) > 0 {
		switch {
		case ratio < 1.0:
			for name := range g.Missing {
				samples[name] = Sample{Value: scaleDownFill(name)}
			}
		case ratio > 1.0:
			for name := range g.Missing {
				samples[name] = Sample{Value: 0}
			}
		}
	}
	if scaleUpWithUnready {
		for name := range g.Unready {
			samples[name] = Sample{Value: 0}
		}
	}

	newRatio, err := recompute(samples)
	if err != nil {
		return 0, false, err
	}
	if in.Tolerances.Within(newRatio) {
		return in.CurrentReplicas, true, nil
	}
	if (ratio < 1.0 && newRatio > 1.0) || (ratio > 1.0 && newRatio < 1.0) {
		return in.CurrentReplicas, false, nil
	}
	n = int32(math.Ceil(newRatio * float64(len(samples))))
	if (newRatio < 1.0 && n > in.CurrentReplicas) || (newRatio > 1.0 && n < in.CurrentReplicas) {
		return in.CurrentReplicas, false, nil
	}
	return n, false, nil
}

// utilizationRatio mirrors upstream's GetResourceUtilizationRatio: samples of
// pods without a request entry are skipped.
func utilizationRatio(samples PodSamples, requests map[string]int64, target int32) (float64, int32, int64, error) {
	var usageTotal, requestTotal int64
	n := 0
	for name, s := range samples {
		req, ok := requests[name]
		if !ok {
			continue
		}
		usageTotal += s.Value
		requestTotal += req
		n++
	}
	if requestTotal == 0 {
		return 0, 0, 0, errNoMatchedKnownPods
	}
	util := int32((usageTotal * 100) / requestTotal)
	return float64(util) / float64(target), util, usageTotal / int64(n), nil
}

// averageRatio mirrors upstream's GetMetricUsageRatio.
func averageRatio(samples PodSamples, target int64) (float64, int64) {
	var total int64
	for _, s := range samples {
		total += s.Value
	}
	avg := total / int64(len(samples))
	return float64(avg) / float64(target), avg
}
