package guard

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// Write is a status write by a field manager, as the object's managed
// fields record it (the apiserver's clock).
type Write struct {
	Manager string
	Time    time.Time
}

func (w Write) same(o Write) bool { return w.Manager == o.Manager && w.Time.Equal(o.Time) }

// NewestStatusWrites returns, from an object's managed fields, the newest
// write of its status subresource by a manager other than own, and own's
// newest; ok is false when no other manager wrote the status.
func NewestStatusWrites(entries []metav1.ManagedFieldsEntry, own string) (other Write, ownTime time.Time, ok bool) {
	for _, e := range entries {
		if e.Subresource != "status" || e.Time == nil {
			continue
		}
		switch {
		case e.Manager == own:
			if e.Time.After(ownTime) {
				ownTime = e.Time.Time
			}
		case !ok || e.Time.After(other.Time):
			other, ok = Write{Manager: e.Manager, Time: e.Time.Time}, true
		}
	}
	return other, ownTime, ok
}

// StatusWriters remembers, per object, the status writes of other field
// managers seen while the controller watches. A write counts when the
// newest other write changes between two observations of the object (each
// watch event is one write): what was there when watching began is
// history (kube-controller-manager's last write before it was turned off,
// say). Times are not compared with the controller's own: managed fields
// keep seconds, and two controllers reacting to one metric change write
// within the same second. A writer seen stays active for Hold after it was
// last seen (locally timed, so clock skew with the apiserver does not
// matter): the controller's own status write, which sets the condition
// saying so, must not end it.
type StatusWriters struct {
	own   string
	hold  time.Duration
	clock clock.PassiveClock

	mu sync.Mutex
	m  map[string]*watched
}

type watched struct {
	last Write     // newest other write seen
	seen time.Time // when last became an active write; zero: none
	// announced: the controller has said so (its event and condition
	// write) for the present episode of activity; see Announce.
	announced bool
}

// NewStatusWriters tracks writers other than own (tidal's field manager).
func NewStatusWriters(own string, hold time.Duration, c clock.PassiveClock) *StatusWriters {
	if c == nil {
		c = clock.RealClock{}
	}
	return &StatusWriters{own: own, hold: hold, clock: c, m: map[string]*watched{}}
}

// Observe records obj's managed fields; call it on every object the
// informer delivers, before they are stripped.
func (w *StatusWriters) Observe(obj metav1.Object) {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	other, _, ok := NewestStatusWrites(obj.GetManagedFields(), w.own)
	w.mu.Lock()
	defer w.mu.Unlock()
	cur, watching := w.m[key]
	if !watching {
		// The first sight is the baseline.
		w.m[key] = &watched{last: other}
		return
	}
	// An entry that went (tidal's write took all its fields) and came back
	// at the same second is the only write missed.
	if ok && !other.same(cur.last) && !other.Time.Before(cur.last.Time) {
		w.active(cur) // a write after a quiet Hold starts a new episode
		cur.seen = w.clock.Now()
	}
	if ok {
		cur.last = other
	}
}

// Active returns the other writer of key's status last seen within Hold.
func (w *StatusWriters) Active(key string) (Write, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	cur, ok := w.m[key]
	if !ok || !w.active(cur) {
		return Write{}, false
	}
	return cur.last, true
}

// Announce reports whether this is the first call for key's present
// episode of activity (from the other writer becoming active until it has
// been quiet for Hold): the controller says so once per episode, an event
// and one status write, and then leaves the object alone. Were it to
// repeat them every sync, a write the other writer refuses or undoes would
// be retried, and its Warning events recorded, as often as the object
// changes. False when key has no active writer.
func (w *StatusWriters) Announce(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	cur, ok := w.m[key]
	if !ok || !w.active(cur) || cur.announced {
		return false
	}
	cur.announced = true
	return true
}

// active reports whether cur's writer was last seen within Hold; an
// episode that ended is no longer announced.
func (w *StatusWriters) active(cur *watched) bool {
	if cur.seen.IsZero() || w.clock.Since(cur.seen) >= w.hold {
		cur.announced = false
		return false
	}
	return true
}

// Forget drops what is known of key (the object was deleted).
func (w *StatusWriters) Forget(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, key)
}
