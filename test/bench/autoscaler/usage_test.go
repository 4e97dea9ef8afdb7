package autoscaler

import (
	"testing"
	"time"
)

// Every reconcile must see a new usage, as both controllers' arithmetic
// sees it: the utilization (whole percent) and the average (whole
// millicores) of a Deployment's pods, truncated as upstream's
// GetResourceUtilizationRatio truncates them. A reconcile comes 0.9 to
// 1.1 periods after the one before when every object is reconciled each
// period, and later in the rows that cannot reconcile every object.
func TestUsageMovesEveryReconcile(t *testing.T) {
	const pods, requestMilli = 5, 100
	type seen struct{ utilization, average int64 }
	status := func(step int) seen {
		var total int64
		for range pods {
			total += int64(usageMilli(step))
		}
		return seen{total * 100 / (pods * requestMilli), total / pods}
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
		{"four periods", 4 * period},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The interval spans floor or ceil of interval/step steps,
			// depending on where in its step the first reconcile fell.
			gaps := []int{int(tc.interval / step), int((tc.interval + step - 1) / step)}
			for start := range 9 {
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
	for i := range 9 {
		if u := usageMilli(i); u < 46 || u > 54 {
			t.Errorf("step %d: %dm is outside 46m..54m, the tolerance of a 50%% target", i, u)
		}
	}
}
