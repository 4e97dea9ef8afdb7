package controller

import (
	"sync"
	"time"
)

// visits measures how long autoscalers wait between two reconciles, for
// tidal_autoscaler_reconcile_gap_max_seconds: the longest of the gaps
// that ended in the last window (one sync period), and of the gaps still
// open (the time since each autoscaler's last reconcile began, or since
// it became known). Each gap stays in it for one window after it ended, so
// scrapes one window apart see every gap once, and a scrape at the end of
// a window of one period sees that window's longest gap.
//
// It holds one time per autoscaler and a short queue of recent gaps; a
// scrape walks the autoscalers once (the open gaps).
type visits struct {
	mu     sync.Mutex
	window time.Duration
	last   map[string]time.Time
	// ended holds the gaps ended in the window that a later, longer gap
	// has not outdone: ends ascending, gaps descending, so the first is
	// the window's longest (a sliding-window maximum).
	ended []endedGap
}

type endedGap struct {
	end time.Time
	gap time.Duration
}

func newVisits(window time.Duration) *visits {
	return &visits{window: window, last: map[string]time.Time{}}
}

// known starts the open gap of an autoscaler not known yet at now.
func (v *visits) known(key string, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.last[key]; !ok {
		v.last[key] = now
	}
}

// visited records a reconcile of key beginning at now, which ends its gap.
func (v *visits) visited(key string, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if prev, ok := v.last[key]; ok {
		v.ended = pushGap(v.ended, endedGap{end: now, gap: now.Sub(prev)})
	}
	v.last[key] = now
	v.ended = dropBefore(v.ended, now.Add(-v.window))
}

// forget drops a deleted autoscaler.
func (v *visits) forget(key string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.last, key)
}

// longest is the longest gap at now: ended in (now-window, now], or open.
func (v *visits) longest(now time.Time) time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.ended = dropBefore(v.ended, now.Add(-v.window))
	var out time.Duration
	if len(v.ended) > 0 {
		out = v.ended[0].gap
	}
	for _, t := range v.last {
		out = max(out, now.Sub(t))
	}
	return out
}

// pushGap appends g to a queue whose gaps descend, dropping the gaps g
// outdoes: they ended earlier and are no longer, so they can never be the
// window's longest again.
func pushGap(q []endedGap, g endedGap) []endedGap {
	for len(q) > 0 && q[len(q)-1].gap <= g.gap {
		q = q[:len(q)-1]
	}
	return append(q, g)
}

// dropBefore drops the gaps that ended at or before since.
func dropBefore(q []endedGap, since time.Time) []endedGap {
	i := 0
	for i < len(q) && !q[i].end.After(since) {
		i++
	}
	return q[i:]
}
