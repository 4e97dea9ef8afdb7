package autoscaler

import "testing"

func TestSettleVerdict(t *testing.T) {
	const objects = 1000
	for _, tc := range []struct {
		name       string
		lists      int
		reconciles float64
		offBeat    int
		late       int
		periods    int
		want       settleState
	}{
		{"one list a namespace, every autoscaler on its beat", 10, 1000, 0, 0, 3, settled},
		{"a period's edge cut through a burst", 10, 985, 0, 0, 3, settled},
		{"one list a namespace but the fleet still joining the beats (native mode's start)", 10, 786, 1000, 0, 1, settling},
		{"one list a namespace, a quarter of the fleet still joining", 10, 975, 0, 0, 2, settling},
		{"the fleet joining in one clump, which the period held whole", 10, 1000, 1000, 0, 1, settling},
		{"one autoscaler still joining", 10, 1000, 1, 0, 5, settling},
		{"on the beats but lists not yet shared", 14, 1000, 0, 0, 2, settling},
		{"a burst's tail off the beat listing on its own", 12, 1000, 0, 0, 4, settling},
		{"the last period allowed", 14, 950, 40, 0, 12, gaveUp},
		{"the queue holds half the objects at two probes in a row", 40, 600, 500, 2, 2, behind},
		{"the queue has held half the objects for longer", 40, 600, 500, 5, 5, behind},
		// The first sharded round of the 2026-12-06 10:54 run: after the
		// objects' first reconciles, 4,023 of 10,000 in the first period
		// and 1,795 keys queued at its end.
		{"the queue holds half the objects at one probe (the start's backlog)", 160, 402.3, 760, 1, 1, settling},
		{"the queue held half the objects a probe ago but not now", 40, 900, 100, 0, 2, settling},
		{"settled wins over the queue", 10, 1000, 0, 2, 2, settled},
		{"giving up wins over the queue", 40, 600, 500, 2, 12, gaveUp},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := settleWait{periods: tc.periods, lists: tc.lists, reconciles: tc.reconciles, offBeat: tc.offBeat, late: tc.late}
			if got := settleVerdict(w, 10, objects, 12); got != tc.want {
				t.Errorf("settleVerdict = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestLateProbe(t *testing.T) {
	const share = 3000 // a replica's share of 9,000 objects
	queued := func(depth float64) settleProbe {
		return settleProbe{queued: true, share: share, queueSample: queueSample{depth: depth}}
	}
	for _, tc := range []struct {
		name     string
		prev, p  settleProbe
		wantLate bool
	}{
		{"a short queue", queued(200), queued(100), false},
		{"half the share, held", queued(1600), queued(1500), true},
		{"the whole share, growing", queued(2000), queued(2900), true},
		{"half the share, draining a tenth a period", queued(2500), queued(2200), false},
		{"half the share, draining less than a tenth", queued(2500), queued(2250), true},
		// The start's backlog: the objects' first reconciles still queued.
		{"most of the share, draining fast", queued(2900), queued(1900), false},
		{"no queue before to compare with", settleProbe{}, queued(1500), true},
		{"no queue gauge", queued(2000), settleProbe{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lateProbe(tc.prev, tc.p); got != tc.wantLate {
				t.Errorf("lateProbe = %v, want %v", got, tc.wantLate)
			}
		})
	}
}
