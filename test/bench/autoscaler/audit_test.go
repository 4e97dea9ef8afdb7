package autoscaler

import (
	"testing"
	"time"
)

func TestLongestGap(t *testing.T) {
	at := func(s ...int) []time.Time {
		var out []time.Time
		for _, v := range s {
			out = append(out, time.Unix(int64(v), 0))
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		visits map[string][]time.Time
		want   time.Duration
	}{
		{"none", nil, 0},
		{"one visit has no gap", map[string][]time.Time{"a": at(5)}, 0},
		{"unsorted visits", map[string][]time.Time{"a": at(30, 0, 15)}, 15 * time.Second},
		{"longest over objects", map[string][]time.Time{"a": at(0, 15, 30), "b": at(1, 40)}, 39 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := longestGap(tc.visits); got != tc.want {
				t.Errorf("longestGap = %s, want %s", got, tc.want)
			}
		})
	}
}
