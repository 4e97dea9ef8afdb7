package adapter

import (
	"sort"
	"time"
)

// percentile returns the p-th percentile (0..100) of sorted durations,
// nearest rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(float64(len(sorted))*p/100+0.5) - 1
	rank = max(0, min(rank, len(sorted)-1))
	return sorted[rank]
}

func sortDurations(d []time.Duration) {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
}

func median(d []time.Duration) time.Duration {
	c := append([]time.Duration(nil), d...)
	sortDurations(c)
	return percentile(c, 50)
}
