package controller

import (
	"sync"
	"time"

	"github.com/tidal-autoscaler/tidal/autoscaler/history"
	"github.com/tidal-autoscaler/tidal/autoscaler/monitor"
)

// --status-metrics-min-interval (Options.StatusMetricsMinInterval): a
// status whose only change is the values of status.currentMetrics (and
// status.tidal.targets, which prints them) is written at most once per
// interval; a change of anything else (replicas, desired count,
// conditions, observedGeneration, lastScaleTime, tidal's decision, failure
// count) and a history that must be persisted now are written at once, as
// without it. Values kept back are written with the next write, at the
// latest by the first reconcile once the interval has passed, or the one
// after it to spread a namespace's writes (see statusWrites). With 0 (the
// default) every change is written, as upstream does.
//
// Decisions do not read status.currentMetrics, so none changes; what the
// status shows of the metrics may lag by up to the interval plus a sync
// period, and once for each autoscaler this controller finds or sees
// created by up to the interval more: their first writes of values are
// spread over one interval (deal) instead of coming all at once.
// The history a new leader reads is as exact as without it: a
// history that changed in more than the time of its newest recommendation
// is written at once (source.HistoryAnnotation).

// statusWrites remembers when each autoscaler's status was last written
// by this controller, and how many of a namespace's autoscalers wrote at
// its newest beat; only kept while the interval is set.
//
// A write is dated as its reconcile's records are (recordStamp: its due
// instant on the beat, at most a tenth of a period before it started), so
// the interval counts whole periods on the beat: two writes of values
// only come at least the interval less a tenth of a period apart in
// wall time. Counted in wall time, the order of a namespace's burst
// decided instead: a write placed later in its burst than the one an
// interval before passed, an earlier one waited a period, and the
// namespace's writes stayed bunched on a few of its beats (at 10,000
// autoscalers in 10 namespaces, 60 s and a 15 s period, a namespace's
// beats carried 0 to 712 writes of its 1,000, and the whole fleet 448
// to 3,100 a period against a client limit of 3,000: the
// workers waited on the limiter and the queue held up to 4,240 keys).
// Spread: when the interval is a whole number k of periods, a namespace's
// writes of values only are held to about 1/k of its autoscalers a beat
// (writeQuota); one over the quota waits one period, which the lag bound
// allows (mayWait), so that their beats spread out within a few
// intervals.
//
// The quota spreads writes a period per interval at most, so that a
// namespace's autoscalers whose writes all came at one beat took k-1
// intervals to spread (100 of them at a 60 s interval: 0 to 100 writes
// in the windows of three periods that began before the eleventh beat,
// 75 in every one after). Two such bunches are common, and are spread from
// the start instead (deal): each autoscaler this controller knows no
// write of is dealt the next of its namespace's k slots, slot i putting
// its next write of values i periods later than the interval alone
// would. One whose status changed in values only is given a last write
// (lastOrSpread), as if written k-i periods before: a new leader, a
// restarted controller or a shard taken over would otherwise write all
// of its moving autoscalers in its first period (at 10,000, 50 s of a
// 200 QPS client, its decisions waiting in the queue behind them). One
// whose first status this controller writes (created together, say) has
// that write dated i periods later (wrote).
type statusWrites struct {
	mu     sync.Mutex
	period time.Duration
	at     map[string]time.Time
	beats  map[string]beatWrites
	// dealt counts the autoscalers of each namespace that deal gave a
	// slot to.
	dealt map[string]int
}

// beatWrites is the newest beat a namespace's autoscalers wrote at and how
// many wrote at it.
type beatWrites struct {
	at time.Time
	n  int
}

func newStatusWrites(period time.Duration) *statusWrites {
	return &statusWrites{period: period, at: map[string]time.Time{}, beats: map[string]beatWrites{}, dealt: map[string]int{}}
}

// wrote records a write of key's status at at; the first one this
// controller knows is dated its dealt slot later.
func (w *statusWrites) wrote(key, namespace string, at time.Time, interval time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.at[key]; !ok {
		at = at.Add(w.deal(namespace, interval))
	}
	w.at[key] = at
}

// lastOrSpread is key's last write, or, when none is known, the one it
// is given and kept: its dealt slot's, making its write of values due
// slot periods after at.
func (w *statusWrites) lastOrSpread(key, namespace string, at time.Time, interval time.Duration) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	if t, ok := w.at[key]; ok {
		return t
	}
	t := at.Add(w.deal(namespace, interval) - interval)
	w.at[key] = t
	return t
}

// deal returns the next of namespace's k slots, k the whole periods in
// interval (at least 1), as the time slot i stands for: i periods. The
// caller holds w.mu.
func (w *statusWrites) deal(namespace string, interval time.Duration) time.Duration {
	slot := w.dealt[namespace] % wholePeriods(interval, w.period)
	w.dealt[namespace]++
	return time.Duration(slot) * w.period
}

func (w *statusWrites) forget(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.at, key)
}

// forgetNamespace drops the beat of a namespace this controller no longer
// has autoscalers in, so that deleted namespaces leave nothing behind.
func (w *statusWrites) forgetNamespace(namespace string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.beats, namespace)
	delete(w.dealt, namespace)
}

// take counts a write of namespace's at its beat instant at and reports
// true; with optional, a write that may wait, it reports false and counts
// nothing once quota writes were counted at that beat. A write dated
// before the namespace's newest beat is let through uncounted.
func (w *statusWrites) take(namespace string, at time.Time, optional bool, quota int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.beats[namespace]
	switch {
	case at.After(b.at):
		b = beatWrites{at: at}
	case at.Before(b.at):
		return true
	}
	if optional && b.n >= quota {
		return false
	}
	b.n++
	w.beats[namespace] = b
	return true
}

// withinInterval reports whether a write at now would come less than
// interval after the last one.
func withinInterval(last, now time.Time, interval time.Duration) bool {
	return interval > 0 && now.Sub(last) < interval
}

// mayWait reports whether a write of values only that the interval lets
// through at now may wait one more period: it comes exactly the interval
// after the last one, so that one period more keeps what the status shows
// within the documented lag (the interval plus a sync period). Only
// writes dated on the beat, a whole number of periods apart, can be.
func mayWait(last, now time.Time, interval time.Duration) bool {
	return interval > 0 && now.Sub(last) == interval
}

// writeQuota is how many of a namespace's n autoscalers write values at
// one beat when their writes are spread evenly over an interval of k
// whole periods: n/k, rounded up; n when the interval is under a period.
func writeQuota(n int, period, interval time.Duration) int {
	k := wholePeriods(interval, period)
	return (n + k - 1) / k
}

// wholePeriods is k, the whole periods in interval: at least 1, and 1
// without a period.
func wholePeriods(interval, period time.Duration) int {
	if period <= 0 {
		return 1
	}
	return max(1, int(interval/period))
}

// deferStatus reports whether this reconcile's status write is left out:
// the interval is set, the status changed in metric values only
// (valuesOnly: status.MetricValuesOnly), the history
// need not be persisted now, and the last write was less than the interval
// ago, or exactly the interval ago with its namespace's quota of writes
// at this beat already taken (statusWrites).
func (r *reconciler) deferStatus(s *step, persist history.Persistence, valuesOnly bool) bool {
	if r.statusInterval <= 0 {
		return false
	}
	at, ns, period := s.recordTime(), s.obj.GetNamespace(), r.statusWrites.period
	onBeat := period > 0 && untilBeat(at, period, namespaceBeat(ns, period)) == 0
	if persist == history.PersistNow || !valuesOnly {
		if onBeat {
			r.statusWrites.take(ns, at, false, 0)
		}
		return false
	}
	last := r.statusWrites.lastOrSpread(s.key, ns, at, r.statusInterval)
	if withinInterval(last, at, r.statusInterval) {
		return true
	}
	if !onBeat {
		return false
	}
	quota := writeQuota(r.selectors.Count(ns), period, r.statusInterval)
	return !r.statusWrites.take(ns, at, mayWait(last, at, r.statusInterval), quota)
}

// writeReason is the reason label of a status write (monitor.Write*):
// changed says whether the status differs from the one read, told
// whether valuesOnly was asked (status.MetricValuesOnly: only
// status.currentMetrics values differ), persist how much the history
// must be stored. A history that must be stored now is the reason only
// when the status alone would not have been written in full: it is
// unchanged, or changed in values only, which
// --status-metrics-min-interval may hold back.
func writeReason(changed, told, valuesOnly bool, persist history.Persistence) string {
	switch {
	case !changed:
		return monitor.WriteHistory
	case !told:
		return monitor.WriteChanged
	case !valuesOnly:
		return monitor.WriteFields
	case persist == history.PersistNow:
		return monitor.WriteHistory
	default:
		return monitor.WriteValues
	}
}

// wroteStatus records a successful status write, when the interval is set.
func (r *reconciler) wroteStatus(s *step) {
	if r.statusInterval > 0 {
		r.statusWrites.wrote(s.key, s.obj.GetNamespace(), s.recordTime(), r.statusInterval)
	}
}
