package behavior

import (
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
)

// PolicyType is the type of a scaling policy.
type PolicyType string

// Policy types.
const (
	// PodsPolicy limits the change to Value pods per period.
	PodsPolicy PolicyType = "Pods"
	// PercentPolicy limits the change to Value percent of the replicas at the
	// start of the period.
	PercentPolicy PolicyType = "Percent"
)

// SelectPolicy chooses among the limits of several policies.
type SelectPolicy string

// Select policies.
const (
	// SelectMax picks the policy allowing the largest change (default).
	SelectMax SelectPolicy = "Max"
	// SelectMin picks the policy allowing the smallest change.
	SelectMin SelectPolicy = "Min"
	// SelectDisabled forbids changes in that direction.
	SelectDisabled SelectPolicy = "Disabled"
)

// Policy is one scaling policy.
type Policy struct {
	Type          PolicyType
	Value         int32
	PeriodSeconds int32
}

// Rules are the fully defaulted scaling rules of one direction.
type Rules struct {
	// StabilizationWindowSeconds is the window over which past
	// recommendations are considered.
	StabilizationWindowSeconds int32
	// SelectPolicy; any value other than Min and Disabled behaves as Max, as
	// upstream does.
	SelectPolicy SelectPolicy
	// Policies; the API requires at least one.
	Policies []Policy
	// Tolerance is the per-direction tolerance when set
	// (Quantity.AsApproximateFloat64), nil when unset.
	Tolerance *float64
}

// Behavior is a fully defaulted spec.behavior.
type Behavior struct {
	ScaleUp   Rules
	ScaleDown Rules
}

// DefaultDownscaleStabilizationWindow is the default of
// --horizontal-pod-autoscaler-downscale-stabilization.
const DefaultDownscaleStabilizationWindow = 5 * time.Minute

// DefaultScaleUpRules are the autoscaling/v2 defaults for scaleUp: no
// stabilization, Max of 4 pods per 15s and 100% per 15s.
func DefaultScaleUpRules() Rules {
	return Rules{
		StabilizationWindowSeconds: 0,
		SelectPolicy:               SelectMax,
		Policies: []Policy{
			{Type: PodsPolicy, Value: 4, PeriodSeconds: 15},
			{Type: PercentPolicy, Value: 100, PeriodSeconds: 15},
		},
	}
}

// DefaultScaleDownRules are the autoscaling/v2 defaults for scaleDown: the
// stabilization window of the controller flag (whole seconds, truncated), Max
// of 100% per 15s.
func DefaultScaleDownRules(downscaleWindow time.Duration) Rules {
	return Rules{
		StabilizationWindowSeconds: int32(downscaleWindow.Seconds()),
		SelectPolicy:               SelectMax,
		Policies:                   []Policy{{Type: PercentPolicy, Value: 100, PeriodSeconds: 15}},
	}
}

// FromV2 returns the defaulted behavior of an autoscaling/v2 spec.behavior,
// nil when b is nil (legacy normalization). Unset fields of each direction
// (including a nil direction) take the values of DefaultScaleUpRules and
// DefaultScaleDownRules; a non-nil Policies slice replaces the default list.
// downscaleWindow is the controller flag, used when
// scaleDown.stabilizationWindowSeconds is unset.
func FromV2(b *autoscalingv2.HorizontalPodAutoscalerBehavior, downscaleWindow time.Duration) *Behavior {
	if b == nil {
		return nil
	}
	return &Behavior{
		ScaleUp:   fromV2Rules(b.ScaleUp, DefaultScaleUpRules()),
		ScaleDown: fromV2Rules(b.ScaleDown, DefaultScaleDownRules(downscaleWindow)),
	}
}

func fromV2Rules(r *autoscalingv2.HPAScalingRules, def Rules) Rules {
	if r == nil {
		return def
	}
	if r.SelectPolicy != nil {
		def.SelectPolicy = SelectPolicy(*r.SelectPolicy)
	}
	if r.StabilizationWindowSeconds != nil {
		def.StabilizationWindowSeconds = *r.StabilizationWindowSeconds
	}
	if r.Policies != nil {
		def.Policies = make([]Policy, 0, len(r.Policies))
		for _, p := range r.Policies {
			def.Policies = append(def.Policies, Policy{Type: PolicyType(p.Type), Value: p.Value, PeriodSeconds: p.PeriodSeconds})
		}
	}
	if r.Tolerance != nil {
		t := r.Tolerance.AsApproximateFloat64()
		def.Tolerance = &t
	}
	return def
}

// longestPeriod is the longest policy period of rules, in seconds.
func (r Rules) longestPeriod() int32 {
	var longest int32
	for _, p := range r.Policies {
		if p.PeriodSeconds > longest {
			longest = p.PeriodSeconds
		}
	}
	return longest
}
