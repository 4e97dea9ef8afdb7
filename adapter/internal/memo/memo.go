// Package memo remembers what the adapter derived from its inputs (a
// rendered query from object names, served items from a Prometheus
// result), so that the requests the HPA repeats every few seconds do not
// redo the same work.
//
// A Table keeps, per key, the last value and the version of the inputs it
// was computed from: a Get with the same key and version returns that
// value, a Get with another version recomputes and replaces it. Versions
// are compared with ==, so a version must hold every input the value
// depends on that the key does not. Prometheus results are versioned by
// identity (VectorOf): the prom client hands the same model.Vector to
// every caller while its cache holds it, and a new one after, so a value
// derived from a result is reused exactly as long as the result is.
//
// A value is also forgotten a TTL after it was computed, whether or not
// its key is asked for again: a version that holds a result keeps that
// result alive, and without an age bound a Table would keep up to its
// size in results the prom cache let go long ago.
package memo

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/common/model"
)

// DefaultTTL is how long New's Tables keep a value: far longer than the
// prom cache keeps the results values are derived from (seconds), and
// than the HPA's 15 s between identical requests.
const DefaultTTL = time.Minute

// Table remembers one value per key. It holds at most its size in keys and is
// emptied when a new key would exceed them (an entry per distinct request
// the HPA makes is far below that), and forgets a value its TTL after
// computing it: a Get then recomputes it, and every Get first drops the
// entries past their TTL (once per TTL at most, a walk over the keys).
// Concurrent Gets of one key are serialized, so identical concurrent
// requests compute once.
type Table[K, Ver comparable, V any] struct {
	max int
	ttl time.Duration
	now func() time.Time

	mu sync.Mutex
	m  map[K]*entry[Ver, V]
	// swept is when expired entries were last dropped.
	swept time.Time
}

type entry[Ver comparable, V any] struct {
	mu  sync.Mutex
	ok  bool
	ver Ver
	v   V
	// at is when v was computed, in Unix nanoseconds; 0 while the first
	// computation runs. Read by the sweep without mu.
	at atomic.Int64
}

// New returns a Table of at most size keys (at least 1) that keeps a
// value for DefaultTTL.
func New[K, Ver comparable, V any](size int) *Table[K, Ver, V] {
	return NewWithTTL[K, Ver, V](size, DefaultTTL)
}

// NewWithTTL returns a Table of at most size keys (at least 1) that keeps
// a value for ttl (at least a nanosecond) after computing it.
func NewWithTTL[K, Ver comparable, V any](size int, ttl time.Duration) *Table[K, Ver, V] {
	return &Table[K, Ver, V]{max: max(size, 1), ttl: max(ttl, time.Nanosecond), now: time.Now}
}

// Get returns the value of key at version ver, and whether it was
// remembered; otherwise it calls compute and remembers its result. The
// value is shared by every caller that gets it: treat it as read-only.
func (t *Table[K, Ver, V]) Get(key K, ver Ver, compute func() V) (V, bool) {
	now := t.now()
	t.mu.Lock()
	if now.Sub(t.swept) >= t.ttl {
		t.sweep(now)
	}
	e, ok := t.m[key]
	if !ok {
		if t.m == nil || len(t.m) >= t.max {
			t.m = make(map[K]*entry[Ver, V])
		}
		e = &entry[Ver, V]{}
		t.m[key] = e
	}
	t.mu.Unlock()

	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ok && e.ver == ver && !t.expired(e, now) {
		return e.v, true
	}
	e.v, e.ver, e.ok = compute(), ver, true
	e.at.Store(max(t.now().UnixNano(), 1))
	return e.v, false
}

func (t *Table[K, Ver, V]) expired(e *entry[Ver, V], now time.Time) bool {
	at := e.at.Load()
	return at != 0 && now.UnixNano()-at >= int64(t.ttl)
}

// sweep drops the entries past their TTL; t.mu is held.
func (t *Table[K, Ver, V]) sweep(now time.Time) {
	t.swept = now
	for k, e := range t.m {
		if t.expired(e, now) {
			delete(t.m, k)
		}
	}
}

// Len returns the number of keys held.
func (t *Table[K, Ver, V]) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

// Vector identifies a Prometheus result by its backing array, which it
// keeps alive (so the address cannot be reused by another result while a
// Table remembers it). Empty results are all equal: nothing is derived
// from them but the names asked for, which versions carry separately.
type Vector struct {
	first **model.Sample
	n     int
}

// VectorOf returns v's identity.
func VectorOf(v model.Vector) Vector {
	if len(v) == 0 {
		return Vector{}
	}
	return Vector{first: &v[0], n: len(v)}
}
