package controller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/tidal-autoscaler/tidal/autoscaler/behavior"
)

// HistoryAnnotation holds the compacted behavior.History of a native
// HorizontalPodAutoscaler (behavior.History.Encode); a HorizontalAutoscaler
// keeps it in status.tidal.history. With it a restarted controller or a new
// leader decides as the controller that never stopped would have.
//
// Why on the autoscaler itself (and not in a ConfigMap):
//   - it lives and dies with the object: no garbage to collect when the
//     autoscaler is deleted, no cross-object store that all autoscalers of a
//     namespace would contend for, and the informer the controller already
//     runs delivers it, so seeding costs no extra read;
//   - it is written by the status update the reconcile makes anyway (an
//     HPA's status update keeps metadata changes; a custom resource's keeps
//     only the status, hence the status field), so it costs no request of
//     its own when the status changes.
//
// Writes are kept few: the history is compacted first (entries that can no
// longer change a decision are dropped: see behavior.History.Compact, which
// also bounds the size), and compared with the last one persisted after
// compacting both at the same time (so entries merely expiring never cause
// a write). When the status is written anyway, a changed history goes with
// it. Otherwise a status write is made for the history alone only when it
// changed in more than the time of its newest recommendation, or that time
// moved by historyRefresh or more: a steadily repeated recommendation is
// refreshed once per historyRefresh, not once per sync. After a failover,
// the newest recommendation a new leader sees is therefore at most
// historyRefresh older than the one the old leader last made, and only
// when nothing else had changed.
const HistoryAnnotation = "autoscaling.tidal.dev/history"

// historyStore keeps the recommendations and scale events of every
// autoscaler in memory, keyed by object UID, as upstream does, and seeds
// each entry from HistoryAnnotation on first sight of the object after a
// restart or failover. A deleted and recreated object starts afresh (new
// UID).
type historyStore struct {
	mu    sync.Mutex
	byUID map[types.UID]*historyEntry
	uids  map[string]types.UID // namespace/name -> UID
}

type historyEntry struct {
	h behavior.History
	// persisted is the last history known to be stored in the annotation
	// (read on first sight or written since); nil when none.
	persisted *behavior.History
	// persistedValue is the encoding of persisted.
	persistedValue string
}

func newHistoryStore() *historyStore {
	return &historyStore{byUID: map[types.UID]*historyEntry{}, uids: map[string]types.UID{}}
}

// get returns the history entry of the object key with uid. On first sight
// it is seeded from annotation (the object's HistoryAnnotation value, ""
// when absent) compacted with ret at now: entries older than their window
// or period are dropped. An unparsable annotation is reported in err and
// ignored (the history starts empty, as upstream's). The workqueue hands a
// key to one worker at a time, so the returned entry is used by one
// goroutine at a time.
func (s *historyStore) get(key string, uid types.UID, annotation string, ret behavior.Retention, now time.Time) (e *historyEntry, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.uids[key]; ok && old != uid {
		delete(s.byUID, old)
	}
	s.uids[key] = uid
	e, ok := s.byUID[uid]
	if !ok {
		e = &historyEntry{}
		if annotation != "" {
			var seed behavior.History
			if seed, err = behavior.Decode(annotation); err == nil {
				e.h = seed.Compact(ret, now)
				e.persisted, e.persistedValue = &seed, annotation
			}
		}
		s.byUID[uid] = e
	}
	return e, err
}

// historyRefresh is how far the newest recommendation's time may move
// before the history is written on its own (see HistoryAnnotation).
const historyRefresh = time.Minute

// persistence says whether and how urgently the history must be written.
type persistence int

const (
	// persistNone: the stored history decides as the current one would.
	persistNone persistence = iota
	// persistWithStatus: only the newest recommendation's time moved, by
	// less than historyRefresh; write it if the status is written anyway.
	persistWithStatus
	// persistNow: write it, with a status write of its own if need be.
	persistNow
)

// toPersist returns the compacted history and how much storing it
// matters at now, compared with what was last persisted. The caller
// encodes it only when it writes.
func (e *historyEntry) toPersist(ret behavior.Retention, now time.Time) (compacted behavior.History, p persistence) {
	compacted = e.h.Compact(ret, now)
	if e.persisted == nil {
		if len(compacted.Recommendations) == 0 && len(e.h.Recommendations) == 0 {
			return compacted, persistNone // never recorded anything
		}
		return compacted, persistNow
	}
	stored := e.persisted.Compact(ret, now)
	switch {
	case stored.Equal(compacted):
		return compacted, persistNone
	case newestMovedBy(stored, compacted) < historyRefresh:
		return compacted, persistWithStatus
	}
	return compacted, persistNow
}

// newestMovedBy returns how far the newest recommendation of b is newer
// than a's when that is all that differs (same replicas, every other entry
// equal); otherwise a duration past any refresh interval.
func newestMovedBy(a, b behavior.History) time.Duration {
	const different = time.Duration(1<<63 - 1)
	n := len(a.Recommendations)
	if n == 0 || n != len(b.Recommendations) || a.Recommendations[n-1].Replicas != b.Recommendations[n-1].Replicas {
		return different
	}
	moved := b.Recommendations[n-1].Time.Sub(a.Recommendations[n-1].Time)
	sameOthers := behavior.History{Recommendations: a.Recommendations[:n-1], ScaleUpEvents: a.ScaleUpEvents, ScaleDownEvents: a.ScaleDownEvents}.
		Equal(behavior.History{Recommendations: b.Recommendations[:n-1], ScaleUpEvents: b.ScaleUpEvents, ScaleDownEvents: b.ScaleDownEvents})
	if !sameOthers || moved < 0 {
		return different
	}
	return moved
}

// persistedAs records that compacted, encoded as value, is now stored.
func (e *historyEntry) persistedAs(compacted behavior.History, value string) {
	e.persisted, e.persistedValue = &compacted, value
}

// forget drops the history of the object key.
func (s *historyStore) forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if uid, ok := s.uids[key]; ok {
		delete(s.byUID, uid)
		delete(s.uids, key)
	}
}

func (s *historyStore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byUID)
}
