package app

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// handover remembers, from the leader election records this replica
// reads while it waits to lead, when the previous leader was last known
// alive: the renew time of the last record held by another replica, or of
// its release. The controller reads it when this replica starts leading
// (controller.Handover) and continues the previous leader's steady
// recommendations until then, so that they need not be written once a
// minute just in case (see source.HistoryAnnotation).
type handover struct {
	mu    sync.Mutex
	alive time.Time
}

// PredecessorAlive implements controller.Handover.
func (h *handover) PredecessorAlive() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.alive
}

// observe wraps lock so that the records it reads update h.
func (h *handover) observe(lock resourcelock.Interface) resourcelock.Interface {
	return &observedLock{Interface: lock, h: h}
}

// observedLock is a leader election lock whose reads are observed.
type observedLock struct {
	resourcelock.Interface
	h *handover
}

func (l *observedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	r, raw, err := l.Interface.Get(ctx)
	if err == nil && r != nil && r.HolderIdentity != l.Identity() {
		l.h.mu.Lock()
		l.h.alive = r.RenewTime.Time
		l.h.mu.Unlock()
	}
	return r, raw, err
}
