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
	// A window of 45 s, from 0 to 45.
	from, to := time.Unix(0, 0), time.Unix(45, 0)
	for _, tc := range []struct {
		name    string
		visits  map[string][]time.Time
		objects int
		want    time.Duration
	}{
		{"no objects", nil, 0, 0},
		{"an object never visited went the whole window", map[string][]time.Time{"a": at(0, 15, 30)}, 2, 45 * time.Second},
		{"one visit: the open stretch after it", map[string][]time.Time{"a": at(5)}, 1, 40 * time.Second},
		{"one visit: the open stretch before it", map[string][]time.Time{"a": at(41)}, 1, 41 * time.Second},
		{"unsorted visits", map[string][]time.Time{"a": at(30, 2, 15)}, 1, 15 * time.Second},
		{"longest over objects", map[string][]time.Time{"a": at(0, 15, 30), "b": at(1, 40)}, 2, 39 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := longestGap(tc.visits, from, to, tc.objects); got != tc.want {
				t.Errorf("longestGap = %s, want %s", got, tc.want)
			}
		})
	}
}
