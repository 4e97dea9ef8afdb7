package autoscaler

import "testing"

func TestSettleVerdict(t *testing.T) {
	const objects = 1000
	for _, tc := range []struct {
		name       string
		lists      int
		reconciles float64
		offBeat    int
		late       bool
		periods    int
		want       settleState
	}{
		{"one list a namespace, every autoscaler on its beat", 10, 1000, 0, false, 3, settled},
		{"a period's edge cut through a burst", 10, 985, 0, false, 3, settled},
		{"one list a namespace but the fleet still joining the beats (native mode's start)", 10, 786, 1000, false, 1, settling},
		{"one list a namespace, a quarter of the fleet still joining", 10, 975, 0, false, 2, settling},
		{"the fleet joining in one clump, which the period held whole", 10, 1000, 1000, false, 1, settling},
		{"one autoscaler still joining", 10, 1000, 1, false, 5, settling},
		{"on the beats but lists not yet shared", 14, 1000, 0, false, 2, settling},
		{"a burst's tail off the beat listing on its own", 12, 1000, 0, false, 4, settling},
		{"the last period allowed", 14, 950, 40, false, 12, gaveUp},
		{"the queue holds half the objects", 40, 600, 500, true, 1, behind},
		{"settled wins over the queue", 10, 1000, 0, true, 1, settled},
		{"giving up wins over the queue", 40, 600, 500, true, 12, gaveUp},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := settleWait{periods: tc.periods, lists: tc.lists, reconciles: tc.reconciles, offBeat: tc.offBeat}
			if got := settleVerdict(w, 10, objects, tc.late, 12); got != tc.want {
				t.Errorf("settleVerdict = %s, want %s", got, tc.want)
			}
		})
	}
}
