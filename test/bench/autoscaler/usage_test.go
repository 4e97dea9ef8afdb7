package autoscaler

import "testing"

// Every reconcile must see a new average: whatever the namespace and the
// step, a 5-pod Deployment's usage sum differs between steps 4, 5 or 6
// apart (a 15 s period is 5 steps of 3 s, give or take one).
func TestUsageMovesEveryPeriod(t *testing.T) {
	sum := func(step int) int {
		s := 0
		for rank := range 5 {
			s += usageStep(step + rank)
		}
		return s
	}
	for start := range 9 {
		for _, gap := range []int{4, 5, 6} {
			if a, b := sum(start), sum(start+gap); a == b {
				t.Errorf("steps %d and %d: same sum %d", start, start+gap, a)
			}
		}
	}
}
