package autoscaler

import (
	"testing"
	"time"

	"github.com/tidal-autoscaler/tidal/autoscaler/replicas"
)

// Every reconcile must see a new usage, as both controllers' arithmetic
// sees it: the utilization (whole percent) and the average (whole
// millicores) of a Deployment's pods, truncated as upstream's
// GetResourceUtilizationRatio truncates them. A reconcile comes 0.9 to
// 1.1 periods after the one before when every object is reconciled each
// period, and later in the rows that cannot reconcile every object.
func TestUsageMovesEveryReconcile(t *testing.T) {
	const pods = 5
	type seen struct{ utilization, average int64 }
	status := func(step int) seen {
		var total int64
		for range pods {
			total += int64(usageMilli(step))
		}
		return seen{total * 100 / int64(pods*requestMilli), total / pods}
	}
	period := 15 * time.Second
	step := usageStepEvery(period)
	for _, tc := range []struct {
		name     string
		interval time.Duration
	}{
		{"0.9 periods, a key that waited long in the queue", period * 9 / 10},
		{"one period, on the beat", period},
		{"1.1 periods, joining the beat", period * 11 / 10},
		{"three periods, a fleet reconciled every third period", 3 * period},
		{"4.5 periods, the cycle of the 9 usages of a 50% target", period * 9 / 2},
		{"70 s, kcm's visits at 10,000 autoscalers", 70 * time.Second},
		{"87 s, kcm's slowest round at 10,000 autoscalers", 87 * time.Second},
		{"twelve periods", 12 * period},
		{"45 periods, within one cycle", 45 * period},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The interval spans floor or ceil of interval/step steps,
			// depending on where in its step the first reconcile fell.
			gaps := []int{int(tc.interval / step), int((tc.interval + step - 1) / step)}
			for start := range usageValues {
				for _, gap := range gaps {
					if gap == 0 {
						t.Fatalf("interval %s is within one step of %s", tc.interval, step)
					}
					if a, b := status(start), status(start+gap); a.utilization == b.utilization || a.average == b.average {
						t.Errorf("steps %d and %d: the same status %+v and %+v", start, start+gap, a, b)
					}
				}
			}
		})
	}
}

// No usage rescales: each is within the default tolerance of the target,
// as the autoscaler's own check (replicas.Tolerances.Within) decides.
func TestUsageWithinTolerance(t *testing.T) {
	tolerance := replicas.NewTolerances(replicas.DefaultTolerance, nil, nil)
	for i := range usageValues {
		utilization := usageMilli(i) * 100 / requestMilli
		if ratio := float64(utilization) / float64(targetUtilization); !tolerance.Within(ratio) {
			t.Errorf("step %d: %dm, utilization %d%%, is %.3f of the %d%% target: outside the tolerance", i, usageMilli(i), utilization, ratio, targetUtilization)
		}
	}
	if steadyMilli*100/requestMilli != targetUtilization {
		t.Errorf("the steady usage %dm is not the target %d%%", steadyMilli, targetUtilization)
	}
}
