package controller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/tidal-autoscaler/tidal/autoscaler/behavior"
)

// HistoryAnnotation holds the compacted behavior.History of an autoscaler
// (behavior.History.Encode), so that a restarted controller or a new leader
// decides as the controller that never stopped would have.
//
// Why an annotation on the autoscaler itself (and not a status field or a
// ConfigMap):
//   - it works in both modes: native HorizontalPodAutoscalers have no status
//     field tidal could use, and an annotation needs no schema change;
//   - it lives and dies with the object: no garbage to collect when the
//     autoscaler is deleted, no cross-object store that all autoscalers of a
//     namespace would contend for (a ConfigMap would need a read-modify-write
//     per change and grows with the namespace), and the informer the
//     controller already runs delivers it, so seeding costs no extra read;
//   - it is written with a JSON merge patch of metadata only, which never
//     conflicts with the status update and is not dropped as metadata
//     changes in a status update are (CRD status subresource).
//
// Writes are kept minimal: the history is compacted first (entries that can
// no longer change a decision are dropped: see behavior.History.Compact,
// which also bounds the size), and the patch is sent only when the compacted
// history differs from the last one persisted, compared after compacting
// both at the same time (so entries merely expiring never cause a write).
// A history that only repeats its newest recommendation still changes (the
// newest time moves, and that time decides when a held scale-down is
// released), so a steadily recommended count is persisted once per sync
// period: being exact after a failover needs it.
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

// toPersist returns the encoding to store when the history changed, since
// it was last persisted, in a way that can change a decision at now or
// later; ok is false when nothing needs writing.
func (e *historyEntry) toPersist(ret behavior.Retention, now time.Time) (value string, compacted behavior.History, ok bool) {
	compacted = e.h.Compact(ret, now)
	if e.persisted != nil && e.persisted.Compact(ret, now).Equal(compacted) {
		return "", compacted, false
	}
	if e.persisted == nil && len(compacted.Recommendations) == 0 && len(e.h.Recommendations) == 0 {
		return "", compacted, false // never recorded anything
	}
	return compacted.Encode(), compacted, true
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
