// Package history keeps each autoscaler's stabilization history (the
// recommendations and scale events of behavior.History) in memory, seeds it
// from what the object persisted (source.HistoryAnnotation) after a restart
// or failover, and says when it must be persisted again (Entry.ToPersist).
package history

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/tidal-autoscaler/tidal/autoscaler/behavior"
)

// Store keeps the recommendations and scale events of every
// autoscaler in memory, keyed by object UID, as upstream does, and seeds
// each entry from source.HistoryAnnotation on first sight of the object after a
// restart or failover. A deleted and recreated object starts afresh (new
// UID).
type Store struct {
	mu    sync.Mutex
	byUID map[types.UID]*Entry
	uids  map[string]types.UID // namespace/name -> UID
	// refresh is how far the newest recommendation's time may move before
	// the history is written on its own; 0: never (leader election tells a
	// successor when this controller stopped).
	refresh time.Duration
	// predecessorAlive is when the previous leader was last known to
	// reconcile; zero when unknown. Set before the first get.
	predecessorAlive time.Time
}

// Entry is the history of one autoscaler, and what of it is stored.
type Entry struct {
	h behavior.History
	// persisted is the last history known to be stored in the annotation
	// (read on first sight or written since); nil when none.
	persisted *behavior.History
	// persistedValue is the encoding of persisted.
	persistedValue string
}

// NewStore returns an empty store; refresh is Store.Refresh.
func NewStore(refresh time.Duration) *Store {
	return &Store{byUID: map[types.UID]*Entry{}, uids: map[string]types.UID{}, refresh: refresh}
}

// Succeed records when the previous leader was last known alive (see
// controller.Handover); call it before reconciling.
func (s *Store) Succeed(predecessorAlive time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.predecessorAlive = predecessorAlive
}

// MaxClockSkew is how far in the future a persisted history written in
// an annotation may reach before it is rejected: replicas' clocks differ
// by a little, but an annotation can be written by anyone who may edit
// the object.
const MaxClockSkew = 10 * time.Second

// Get returns the history entry of the object key with uid. On first sight
// it is seeded from stored (the object's persisted history, "" when
// absent; inAnnotation when it was read from an annotation rather than a
// status field) compacted with ret at now: entries older than their window
// or period are dropped, and entries later than now are taken as made
// now. When the stored status says the autoscaler was recommending (see
// source.HistoryAnnotation) and the previous leader was alive later than
// the newest stored recommendation, that recommendation is continued until
// then (never past now). An unparsable history, or one in an annotation
// that reaches more than MaxClockSkew past now, is reported in err and
// ignored (the history starts empty, as upstream's).
// The workqueue hands a key to one worker at a time, so the returned entry
// is used by one goroutine at a time.
func (s *Store) Get(key string, uid types.UID, stored string, inAnnotation, recommending bool, ret behavior.Retention, now time.Time) (e *Entry, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.uids[key]; ok && old != uid {
		delete(s.byUID, old)
	}
	s.uids[key] = uid
	e, ok := s.byUID[uid]
	if !ok {
		e = &Entry{}
		if stored != "" {
			var seed behavior.History
			if seed, err = seedOf(stored, inAnnotation, now); err == nil {
				live := seed.NotAfter(now)
				if alive := s.predecessorAlive; recommending && !alive.IsZero() {
					if alive.After(now) {
						alive = now
					}
					live = continued(live, alive)
				}
				e.h = live.Compact(ret, now)
				// As stored, future times included, so that the
				// history is written again.
				e.persisted, e.persistedValue = &seed, stored
			}
		}
		s.byUID[uid] = e
	}
	return e, err
}

// seedOf decodes a stored history; one in an annotation must not reach
// more than MaxClockSkew past now.
func seedOf(stored string, inAnnotation bool, now time.Time) (behavior.History, error) {
	seed, err := behavior.Decode(stored)
	if err != nil {
		return seed, err
	}
	if newest := seed.Newest(); inAnnotation && newest.Sub(now) > MaxClockSkew {
		return behavior.History{}, fmt.Errorf("the history annotation has an entry at %s, %v after now (more than %v of clock skew): the controller writes it at its own time, so it was edited or written by a replica whose clock is wrong; it is ignored and rewritten with the next status write",
			newest.UTC().Format(time.RFC3339), newest.Sub(now).Round(time.Second), MaxClockSkew)
	}
	return seed, nil
}

// DefaultRefresh is how far the newest recommendation's time may move
// before the history is written on its own, without leader election (see
// source.HistoryAnnotation).
const DefaultRefresh = time.Minute

// Persistence says whether and how urgently the history must be written.
type Persistence int

const (
	// PersistNone: the stored history decides as the current one would.
	PersistNone Persistence = iota
	// PersistWithStatus: only the newest recommendation's time moved
	// (by less than the refresh interval, if there is one); write it if
	// the status is written anyway.
	PersistWithStatus
	// PersistNow: write it, with a status write of its own if need be.
	PersistNow
)

// ToPersist returns the compacted history and how much storing it
// matters at now, compared with what was last persisted; refresh is the
// store's (0: never on its own). The caller encodes it only when it
// writes.
func (e *Entry) ToPersist(ret behavior.Retention, now time.Time, refresh time.Duration) (compacted behavior.History, p Persistence) {
	compacted = e.h.Compact(ret, now)
	if e.persisted == nil {
		if len(compacted.Recommendations) == 0 && len(e.h.Recommendations) == 0 {
			return compacted, PersistNone // never recorded anything
		}
		return compacted, PersistNow
	}
	if e.persisted.Compact(ret, now).Equal(compacted) {
		return compacted, PersistNone
	}
	if moved, ok := newestMoved(*e.persisted, compacted, ret, now); ok && (refresh == 0 || moved < refresh) {
		return compacted, PersistWithStatus
	}
	return compacted, PersistNow
}

// newestMoved reports whether current (compacted at now) is the stored
// history with its newest recommendation continued, the same value
// repeated until a later time, and how far that moved it.
func newestMoved(stored, current behavior.History, ret behavior.Retention, now time.Time) (time.Duration, bool) {
	n, m := len(stored.Recommendations), len(current.Recommendations)
	if n == 0 || m == 0 {
		return 0, false
	}
	last, newest := stored.Recommendations[n-1], current.Recommendations[m-1]
	if last.Replicas != newest.Replicas || newest.Time.Before(last.Time) {
		return 0, false
	}
	if !continued(stored, newest.Time).Compact(ret, now).Equal(current) {
		return 0, false
	}
	return newest.Time.Sub(last.Time), true
}

// continued returns h with its newest recommendation repeated until
// until, when that is later.
func continued(h behavior.History, until time.Time) behavior.History {
	if len(h.Recommendations) == 0 {
		return h
	}
	newest := 0
	for i, r := range h.Recommendations {
		if !r.Time.Before(h.Recommendations[newest].Time) {
			newest = i
		}
	}
	if !until.After(h.Recommendations[newest].Time) {
		return h
	}
	recs := slices.Clone(h.Recommendations)
	recs[newest].Time = until
	h.Recommendations = recs
	return h
}

// PersistedAs records that compacted, encoded as value, is now stored.
func (e *Entry) PersistedAs(compacted behavior.History, value string) {
	e.persisted, e.persistedValue = &compacted, value
}

// Forget drops the history of the object key.
func (s *Store) Forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if uid, ok := s.uids[key]; ok {
		delete(s.byUID, uid)
		delete(s.uids, key)
	}
}

// Refresh is how far the newest recommendation's time may move before
// the history is written on its own; 0: never.
func (s *Store) Refresh() time.Duration { return s.refresh }

// History is the entry's history, which the decision updates.
func (e *Entry) History() *behavior.History { return &e.h }

// PersistedValue is the encoding of the history last known to be stored;
// "" when none.
func (e *Entry) PersistedValue() string { return e.persistedValue }

// Len is the number of histories kept.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byUID)
}
