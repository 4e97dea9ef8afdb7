package controller

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/tidal-autoscaler/tidal/autoscaler/source"
)

func TestNextDue(t *testing.T) {
	// t0 is on the beat 3s: 12:00:00 is a multiple of 15s since the epoch.
	t0 := time.Date(2026, 11, 21, 12, 0, 3, 0, time.UTC)
	const (
		period = 15 * time.Second
		beat   = 3 * time.Second
	)
	tests := []struct {
		name     string
		due, now time.Time
		aligned  bool
		want     time.Time
	}{
		{name: "reconciled when due", due: t0, now: t0, want: t0.Add(period)},
		{name: "a wait in the queue does not stretch the period", due: t0, now: t0.Add(2 * time.Second), want: t0.Add(period)},
		{name: "a slow reconcile does not stretch it either", due: t0, now: t0.Add(14 * time.Second), want: t0.Add(period)},
		{name: "a period behind: at once", due: t0, now: t0.Add(period), want: t0.Add(period)},
		{name: "more than a period behind: at once, not a catch-up", due: t0, now: t0.Add(40 * time.Second), want: t0.Add(40 * time.Second)},
		{name: "aligned, on the beat: one period", due: t0, now: t0, aligned: true, want: t0.Add(period)},
		{name: "aligned, off the beat: the first beat from due+period", due: t0.Add(5 * time.Second), now: t0.Add(5 * time.Second), aligned: true, want: t0.Add(2 * period)},
		{name: "aligned, just after the beat: almost two periods", due: t0.Add(time.Millisecond), now: t0.Add(time.Millisecond), aligned: true, want: t0.Add(2 * period)},
		{name: "aligned, just before the beat: a period and a moment", due: t0.Add(-time.Millisecond), now: t0, aligned: true, want: t0.Add(period)},
		{name: "aligned, a period behind: at once", due: t0, now: t0.Add(20 * time.Second), aligned: true, want: t0.Add(20 * time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := nextDue(tt.due, tt.now, period, beat, tt.aligned)
			if !got.Equal(tt.want) {
				t.Errorf("nextDue(t0+%s, now t0+%s) = t0+%s, want t0+%s", tt.due.Sub(t0), tt.now.Sub(t0), got.Sub(t0), tt.want.Sub(t0))
			}
			// Never sooner than upstream (a period), never a period late.
			if d := got.Sub(tt.due); got.After(tt.now) && (d < period || d >= 2*period) {
				t.Errorf("interval %s, want in [%s, %s)", d, period, 2*period)
			}
		})
	}
}

func TestNamespaceBeat(t *testing.T) {
	const period = 15 * time.Second
	seen := map[time.Duration]bool{}
	for _, ns := range []string{"default", "team-a", "team-b", "kube-system", "bench-7"} {
		b := namespaceBeat(ns, period)
		if b < 0 || b >= period {
			t.Errorf("namespaceBeat(%q) = %s, want in [0, %s)", ns, b, period)
		}
		if b != namespaceBeat(ns, period) {
			t.Errorf("namespaceBeat(%q) is not stable", ns)
		}
		seen[b] = true
	}
	if len(seen) < 4 {
		t.Errorf("5 namespaces share %d beats, want them spread", len(seen))
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
			c := newCadence()
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
// status write's event while it waits neither pushes that later nor
// queues it again.
func TestWaitInQueueDoesNotStretchThePeriod(t *testing.T) {
	f := newFixture(t, source.ModeNative, world{scale: newScale(3, 3, "app=web"), pods: pods(1000), podMetrics: milliByPod(500)},
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
	// The event finds the key waiting for an earlier time and does not
	// queue it again.
	if len(q.delays) != 1 || q.delays[0] != 13*time.Second {
		t.Fatalf("AddAfter delays = %v, want [13s (after the reconcile due 2s ago)]", q.delays)
	}
}

// TestNamespaceAutoscalersComeDueTogether: two autoscalers of a namespace,
// due 4s apart, are next due at the same instant, the namespace's beat, no
// sooner than a period after each one's last due time.
func TestNamespaceAutoscalersComeDueTogether(t *testing.T) {
	const period = 15 * time.Second
	f := newFixture(t, source.ModeNative, world{scale: newScale(3, 3, "app=web"), pods: pods(1000), podMetrics: milliByPod(500)},
		newHPA("web", nil, 10, cpuUtilization(50)), newHPA("api", nil, 10, cpuUtilization(50)))
	q := &recordingQueue{TypedDelayingInterface: f.ctrl.queue}
	f.ctrl.queue = q
	defer q.ShutDown()
	clk := f.ctrl.r.clock.(*testingclock.FakePassiveClock)
	// onBeat is the namespace's beat just before the fixture's clock.
	onBeat := clk.Now().Truncate(period).Add(namespaceBeat(ns, period))
	for onBeat.After(clk.Now()) {
		onBeat = onBeat.Add(-period)
	}
	dues := map[string]time.Time{ns + "/web": onBeat.Add(time.Second), ns + "/api": onBeat.Add(5 * time.Second)}
	for key, due := range dues {
		f.ctrl.cadence.forget(key)
		f.ctrl.cadence.scheduled(key, due)
	}
	var next []time.Time
	for range 2 {
		clk.SetTime(onBeat.Add(6 * time.Second))
		if !f.ctrl.processNextWorkItem(context.Background()) {
			t.Fatal("queue shut down")
		}
		q.mu.Lock()
		next = append(next, clk.Now().Add(q.delays[len(q.delays)-1]))
		q.mu.Unlock()
	}
	want := onBeat.Add(2 * period)
	for i, n := range next {
		if !n.Equal(want) {
			t.Errorf("autoscaler %d next due at beat+%s, want beat+%s (due at beat+1s and beat+5s)", i, n.Sub(onBeat), want.Sub(onBeat))
		}
	}
}
