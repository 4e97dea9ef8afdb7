package controller

import (
	"sync"
	"time"

	"github.com/tidal-autoscaler/tidal/autoscaler/history"
	"github.com/tidal-autoscaler/tidal/autoscaler/status"
)

// --status-metrics-min-interval (Options.StatusMetricsMinInterval): a
// status whose only change is the values of status.currentMetrics (and
// status.tidal.targets, which prints them) is written at most once per
// interval; a change of anything else (replicas, desired count,
// conditions, observedGeneration, lastScaleTime, tidal's decision, failure
// count) and a history that must be persisted now are written at once, as
// without it. Values kept back are written with the next write, at the
// latest by the first reconcile once the interval has passed. With 0 (the
// default) every change is written, as upstream does.
//
// Decisions do not read status.currentMetrics, so none changes; what the
// status shows of the metrics may lag by up to the interval plus a sync
// period. The history a new leader reads is as exact as without it: a
// history that changed in more than the time of its newest recommendation
// is written at once (source.HistoryAnnotation).

// statusWrites remembers when each autoscaler's status was last written
// by this controller; only kept while the interval is set.
type statusWrites struct {
	mu sync.Mutex
	at map[string]time.Time
}

func newStatusWrites() *statusWrites { return &statusWrites{at: map[string]time.Time{}} }

func (w *statusWrites) wrote(key string, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.at[key] = now
}

func (w *statusWrites) last(key string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.at[key]
	return t, ok
}

func (w *statusWrites) forget(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.at, key)
}

// withinInterval reports whether a write at now would come less than
// interval after the last one (known: there was one since this controller
// started; an unknown last write lets it through).
func withinInterval(last time.Time, known bool, now time.Time, interval time.Duration) bool {
	return interval > 0 && known && now.Sub(last) < interval
}

// deferStatus reports whether this reconcile's status write is left out:
// the interval is set, the status changed in metric values only, the last
// write was less than the interval ago, and the history need not be
// persisted now.
func (r *reconciler) deferStatus(s *step, persist history.Persistence) bool {
	if r.statusInterval <= 0 || persist == history.PersistNow {
		return false
	}
	last, known := r.statusWrites.last(s.key)
	return withinInterval(last, known, s.now.Time, r.statusInterval) && status.MetricValuesOnly(s.obj, s.original)
}

// wroteStatus records a successful status write, when the interval is set.
func (r *reconciler) wroteStatus(s *step) {
	if r.statusInterval > 0 {
		r.statusWrites.wrote(s.key, s.now.Time)
	}
}
