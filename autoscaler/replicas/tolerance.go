package replicas

import "fmt"

// DefaultTolerance is the default of --horizontal-pod-autoscaler-tolerance.
const DefaultTolerance = 0.1

// Tolerances are the usage-ratio tolerances of one autoscaler. A usage ratio r
// (current/target) causes no change when 1-Down <= r <= 1+Up.
type Tolerances struct {
	// Down is the scale-down tolerance (fraction, e.g. 0.1 for 10%).
	Down float64
	// Up is the scale-up tolerance.
	Up float64
}

// NewTolerances returns the tolerances of one autoscaler: global is the
// controller flag, used as given (an explicit 0 stays 0, as in
// kube-controller-manager, whose defaulting runs before its flags are
// parsed); down and up are the
// per-object spec.behavior.scaleDown/scaleUp.tolerance values (nil when unset,
// or when behavior is nil), already converted with
// resource.Quantity.AsApproximateFloat64. The HPAConfigurableTolerance gate is
// GA and locked on in v1.37, so per-object values always apply.
func NewTolerances(global float64, down, up *float64) Tolerances {
	t := Tolerances{Down: global, Up: global}
	if down != nil {
		t.Down = *down
	}
	if up != nil {
		t.Up = *up
	}
	return t
}

// Within reports whether usageRatio is inside the tolerance band (bounds
// included), i.e. whether the change would be too small to act on.
func (t Tolerances) Within(usageRatio float64) bool {
	return (1.0-t.Down) <= usageRatio && usageRatio <= (1.0+t.Up)
}

// String formats the tolerances the way upstream logs them.
func (t Tolerances) String() string {
	return fmt.Sprintf("[down:%.1f%%, up:%.1f%%]", t.Down*100., t.Up*100.)
}
