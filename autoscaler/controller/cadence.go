package controller

import (
	"hash/fnv"
	"sync"
	"time"
)

// cadence keeps each autoscaler on a fixed beat: its next reconcile is due
// one sync period after the previous one was due, not one period after it
// ended. Counting from the end would add every wait in the queue to the
// period: with 1,000 autoscalers in 100 namespaces the queue held up to
// 209 keys, and each autoscaler came round every ~15.7 s instead of 15
// (956 reconciles per period). Upstream's controller counts from the end
// (AddRateLimited after each sync) and falls behind the same way; a
// reconcile's decision does not depend on when in the period it runs, but
// at the edge of a window or policy period, where recordStamp's dating on
// the beat keeps it as upstream's.
type cadence struct {
	mu sync.Mutex
	// due holds, per key waiting in the queue, the earliest time it was
	// scheduled for, as the delaying queue keeps the earliest.
	due map[string]time.Time
	// offBeat holds the keys whose next reconcile was last put off their
	// namespace's beat (see placed).
	offBeat map[string]struct{}
}

func newCadence() *cadence {
	return &cadence{due: map[string]time.Time{}, offBeat: map[string]struct{}{}}
}

// placed records where a reconcile put key's next one: on its
// namespace's beat or not. One whose namespace shares no list has no beat
// to be off.
func (c *cadence) placed(key string, onBeat bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if onBeat {
		delete(c.offBeat, key)
	} else {
		c.offBeat[key] = struct{}{}
	}
}

// offBeatCount is how many keys' next reconciles are off their beats:
// each lists PodMetrics on its own until it joins (tidal_autoscaler_
// autoscalers_off_beat).
func (c *cadence) offBeatCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.offBeat)
}

// scheduled records that key is due at t; an earlier time already
// recorded wins. It reports whether t is now the key's time: when not, the
// key already waits in the queue for an earlier one, and queueing it again
// would change nothing.
func (c *cadence) scheduled(key string, t time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := c.due[key]; ok && !t.Before(d) {
		return false
	}
	c.due[key] = t
	return true
}

// started takes the time key was due, now when unknown (scheduled before
// a restart of the queue, or twice with one record consumed).
func (c *cadence) started(key string, now time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.due[key]
	if !ok || d.After(now) {
		d = now
	}
	delete(c.due, key)
	return d
}

// dueBy reports whether key waits in the queue for a time at or before t.
func (c *cadence) dueBy(key string, t time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.due[key]
	return ok && !d.After(t)
}

// forget drops a deleted key.
func (c *cadence) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.due, key)
	delete(c.offBeat, key)
}

// nextDue is when the reconcile after one due at due, started at start, is
// due: one period after due while that is at least half a period after
// start, else a period less maxDrift after start; and now if that has
// passed (a reconcile that itself took that long: the key is queued at
// once, not skipped).
//
// A wait up to half a period does not move the next time: counting waits
// would stretch every interval (1,000 autoscalers came round every ~15.7 s
// instead of 15 when counted from the end of each reconcile), and the
// autoscalers of a namespace come due together, so the last of a burst
// waits for the rest (300 a namespace at 3,000 autoscalers: about 3 s
// behind 5 workers); moved off the beat by that wait they listed
// PodMetrics on their own, 18 to 27 lists a period instead of 10, and
// fell further behind. Past half a period the key leaves its time: it
// would otherwise come back moments after it ran (due at 0, started at
// 12 s, due again at 15 s), and under a backed-up queue a key reconciled
// twice within a period lets the per-reconcile scale-up limit of the
// legacy rules act twice (3 -> 6 -> 12 where upstream, whose intervals
// are never shorter than the period, reaches 6). Either way each due time
// is at least a period after the one before, so two reconciles are at
// least half a period apart and any k periods hold at most k+1 of them,
// as upstream's can.
//
// An autoscaler that shares its namespace's PodMetrics list (aligned)
// comes due on the namespace's beat instead, the instants congruent to
// beat modulo period, so that the autoscalers of a namespace come due
// together and one list serves them all. One off the beat (just created,
// or its namespace just got a second autoscaler, or the queue fell more
// than half a period behind) moves towards the beat by at most maxDrift
// per interval: the beat adds at most a tenth of a period to an interval,
// so that every autoscaler is still reconciled about once a period while
// it joins the beat (going straight to the beat made one interval up to
// two periods). It joins within ten intervals; from then on every
// interval is exactly the period. Either way the next reconcile is due
// at most 1.1 periods after this one was due or started, whichever is
// later.
func nextDue(due, start, now time.Time, period, beat time.Duration, aligned bool) time.Time {
	next := due.Add(period)
	if next.Before(start.Add(period / 2)) {
		next = start.Add(period - maxDrift(period))
	}
	if aligned {
		next = next.Add(min(untilBeat(next, period, beat), maxDrift(period)))
	}
	if next.After(now) {
		return next
	}
	return now
}

// recordStamp is when a reconcile due at due and started at start dates
// what it records in the history (decision.Input's Stamp): due, so that
// records made on the beat are whole periods apart and a reconcile, which
// starts after its due instant, sees one made k periods before as older
// than k periods, as upstream does (whose intervals are the period plus
// the reconcile's own time; counting from the starts, the two queue waits
// made an event exactly one policy period back fall inside the period or
// outside it by chance). At most a tenth of a period before start: a
// queue far behind would otherwise date its records too early, and its
// scale events would leave the policy periods before their time.
func recordStamp(due, start time.Time, period time.Duration) time.Time {
	if earliest := start.Add(-period / 10); due.Before(earliest) {
		return earliest
	}
	return due
}

// maxDrift is the most an interval exceeds the period to join the beat.
func maxDrift(period time.Duration) time.Duration { return period / 10 }

// untilBeat is the time from t to the first beat instant at or after t.
func untilBeat(t time.Time, period, beat time.Duration) time.Duration {
	off := (t.UnixNano() - int64(beat)) % int64(period)
	if off < 0 {
		off += int64(period)
	}
	if off == 0 {
		return 0
	}
	return period - time.Duration(off)
}

// namespaceBeat spreads namespaces over the period by the hash of their
// name, so their lists and status writes do not all fall due at once.
func namespaceBeat(namespace string, period time.Duration) time.Duration {
	h := fnv.New64a()
	_, _ = h.Write([]byte(namespace))
	return time.Duration(h.Sum64() % uint64(period))
}
