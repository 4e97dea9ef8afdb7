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
	// ownRenewal is when this replica last renewed the lease itself.
	ownRenewal time.Time
}

// selfStopped records that this replica's own term ended: its last
// renewal is when its controller was last known to reconcile, and so the
// predecessor's time for the next term, unless a record of another
// replica read later says otherwise.
func (h *handover) selfStopped() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ownRenewal.After(h.alive) {
		h.alive = h.ownRenewal
	}
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

func (l *observedLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Create(ctx, r)
	l.renewed(r, err)
	return err
}

func (l *observedLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Update(ctx, r)
	l.renewed(r, err)
	return err
}

// renewed notes a record this replica wrote for itself.
func (l *observedLock) renewed(r resourcelock.LeaderElectionRecord, err error) {
	if err != nil || r.HolderIdentity != l.Identity() {
		return
	}
	l.h.mu.Lock()
	l.h.ownRenewal = r.RenewTime.Time
	l.h.mu.Unlock()
}
