package controller

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
	testingclock "k8s.io/utils/clock/testing"
)

func TestNextDue(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	const period = 15 * time.Second
	tests := []struct {
		name     string
		due, now time.Time
		want     time.Time
	}{
		{name: "reconciled when due", due: t0, now: t0, want: t0.Add(period)},
		{name: "a wait in the queue does not stretch the period", due: t0, now: t0.Add(2 * time.Second), want: t0.Add(period)},
		{name: "a slow reconcile does not stretch it either", due: t0, now: t0.Add(14 * time.Second), want: t0.Add(period)},
		{name: "a period behind: at once", due: t0, now: t0.Add(period), want: t0.Add(period)},
		{name: "more than a period behind: at once, not a catch-up", due: t0, now: t0.Add(40 * time.Second), want: t0.Add(40 * time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := nextDue(tt.due, tt.now, period); !got.Equal(tt.want) {
				t.Errorf("nextDue(due, now+%s) = due+%s, want due+%s", tt.now.Sub(tt.due), got.Sub(tt.due), tt.want.Sub(tt.due))
			}
		})
	}
}

func TestCadenceBookkeeping(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		// schedule is applied in order before started at now.
		schedule []time.Time
		forget   bool
		now      time.Time
		want     time.Time
	}{
		{name: "the time it was due", schedule: []time.Time{t0}, now: t0.Add(time.Second), want: t0},
		{name: "the earliest of two, as the queue keeps it", schedule: []time.Time{t0.Add(15 * time.Second), t0}, now: t0.Add(time.Second), want: t0},
		{name: "unknown: now", now: t0, want: t0},
		{name: "forgotten: now", schedule: []time.Time{t0}, forget: true, now: t0.Add(time.Second), want: t0.Add(time.Second)},
		{name: "recorded in the future (a later entry fired early): now", schedule: []time.Time{t0.Add(time.Minute)}, now: t0, want: t0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCadence(15 * time.Second)
			for _, s := range tt.schedule {
				c.scheduled("ns/a", s)
			}
			if tt.forget {
				c.forget("ns/a")
			}
			if got := c.started("ns/a", tt.now); !got.Equal(tt.want) {
				t.Errorf("started = t0+%s, want t0+%s", got.Sub(t0), tt.want.Sub(t0))
			}
			if got := c.started("ns/a", tt.now); !got.Equal(tt.now) {
				t.Errorf("a second started = t0+%s, want now (the record is consumed)", got.Sub(t0))
			}
		})
	}
}

// recordingQueue records the delays of AddAfter.
type recordingQueue struct {
	workqueue.TypedDelayingInterface[string]
	mu     sync.Mutex
	delays []time.Duration
}

func (q *recordingQueue) AddAfter(key string, d time.Duration) {
	q.mu.Lock()
	q.delays = append(q.delays, d)
	q.mu.Unlock()
	q.TypedDelayingInterface.AddAfter(key, d)
}

// TestWaitInQueueDoesNotStretchThePeriod: a key added at t0 and reconciled
// at t0+2s (it waited in the queue) comes back at t0+15s, not t0+17s; a
// status write's event does not push that later.
func TestWaitInQueueDoesNotStretchThePeriod(t *testing.T) {
	f := newFixture(t, ModeNative, world{scale: newScale(3, 3, "app=web"), pods: pods(1000), podMetrics: milliByPod(500)},
		newHPA("web", nil, 10, cpuUtilization(50)))
	q := &recordingQueue{TypedDelayingInterface: f.ctrl.queue}
	f.ctrl.queue = q
	defer q.ShutDown()
	clk := f.ctrl.r.clock.(*testingclock.FakePassiveClock)
	clk.SetTime(clk.Now().Add(2 * time.Second))

	// The informer delivers the status write's event during the reconcile.
	f.ctrl.update(newHPA("web", nil, 10), newHPA("web", nil, 10))
	if !f.ctrl.processNextWorkItem(context.Background()) {
		t.Fatal("queue shut down")
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.delays) != 2 || q.delays[0] != 15*time.Second || q.delays[1] != 13*time.Second {
		t.Fatalf("AddAfter delays = %v, want [15s (the event) 13s (after the reconcile due 2s ago)]", q.delays)
	}
}
