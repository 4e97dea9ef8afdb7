package autoscaler

import (
	"testing"
	"time"
)

func TestSettleVerdict(t *testing.T) {
	const period = 15 * time.Second
	s := func(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
	for _, tc := range []struct {
		name    string
		lists   int
		gap     time.Duration
		late    bool
		periods int
		want    settleState
	}{
		{"one list a namespace, every autoscaler on its beat", 10, s(15.6), false, 3, settled},
		{"no gap known (no probe)", 10, 0, false, 1, settled},
		{"one list a namespace but still joining the beats (native mode's start)", 10, s(16.5), false, 1, settling},
		{"on the beats but lists not yet shared", 14, s(15.2), false, 2, settling},
		{"the last period allowed", 14, s(16.5), false, 12, gaveUp},
		{"the queue holds half the objects", 40, s(30), true, 1, behind},
		{"settled wins over the queue", 10, s(15), true, 1, settled},
		{"giving up wins over the queue", 40, s(30), true, 12, gaveUp},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := settleVerdict(tc.lists, 10, tc.gap, period, tc.late, tc.periods, 12); got != tc.want {
				t.Errorf("settleVerdict = %s, want %s", got, tc.want)
			}
		})
	}
}
