package controller

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/tidal-autoscaler/tidal/autoscaler/behavior"
)

// historyStore keeps the recommendations and scale events of every
// autoscaler in memory, keyed by object UID, as upstream keeps them (lost
// on restart or failover). A deleted and recreated object starts afresh.
//
// behavior.History is plain data (counts and times), so a persistent store
// can serialize it as JSON (for example into a status field) and seed
// entries from it on first sight of an object; only this type would change.
type historyStore struct {
	mu    sync.Mutex
	byUID map[types.UID]*behavior.History
	uids  map[string]types.UID // namespace/name -> UID
}

func newHistoryStore() *historyStore {
	return &historyStore{byUID: map[types.UID]*behavior.History{}, uids: map[string]types.UID{}}
}

// get returns the history of the object key with uid, creating an empty
// one. The workqueue hands a key to one worker at a time, so the returned
// history is used by one goroutine at a time.
func (s *historyStore) get(key string, uid types.UID) *behavior.History {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.uids[key]; ok && old != uid {
		delete(s.byUID, old)
	}
	s.uids[key] = uid
	h, ok := s.byUID[uid]
	if !ok {
		h = &behavior.History{}
		s.byUID[uid] = h
	}
	return h
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
