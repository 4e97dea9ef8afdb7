package controller

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/tidal-autoscaler/tidal/autoscaler/source"
)

// TestVisits follows two autoscalers on a fake clock: the longest gap is
// the longest that ended in the last window or is still open.
func TestVisits(t *testing.T) {
	const window = 15 * time.Second
	sec := func(s float64) time.Time { return now.Add(time.Duration(s * float64(time.Second))) }
	type event struct {
		do   string // "known", "visited", "forget", or "longest" (checks want)
		key  string
		at   float64
		want float64 // seconds, for "longest"
		why  string
	}
	events := []event{
		{do: "known", key: "a", at: 0},
		{do: "known", key: "b", at: 0},
		{do: "longest", at: 0, want: 0, why: "nothing waited yet"},
		{do: "visited", key: "a", at: 1},
		{do: "visited", key: "b", at: 2},
		{do: "longest", at: 2, want: 2, why: "b waited 2s for its first reconcile"},
		{do: "visited", key: "a", at: 16},
		{do: "visited", key: "b", at: 19},
		{do: "longest", at: 19, want: 17, why: "b's gap of 17s ended now"},
		{do: "longest", at: 33.9, want: 17.9, why: "a has waited 17.9s so far"},
		{do: "visited", key: "a", at: 34},
		{do: "longest", at: 34, want: 18, why: "a's gap of 18s ended now"},
		{do: "visited", key: "b", at: 35},
		{do: "longest", at: 48.9, want: 18, why: "a's 18s ended 14.9s ago, within the window"},
		{do: "longest", at: 49, want: 16, why: "a's 18s ended a window ago: out; b's 16s is in"},
		{do: "forget", key: "a"},
		{do: "longest", at: 80, want: 45, why: "b not reconciled since 35 (a is gone)"},
	}
	v := newVisits(window)
	for _, e := range events {
		switch e.do {
		case "known":
			v.known(e.key, sec(e.at))
		case "visited":
			v.visited(e.key, sec(e.at))
		case "forget":
			v.forget(e.key)
		case "longest":
			if got := v.longest(sec(e.at)).Seconds(); fmt.Sprintf("%.3f", got) != fmt.Sprintf("%.3f", e.want) {
				t.Errorf("longest at +%vs = %vs, want %vs (%s)", e.at, got, e.want, e.why)
			}
		}
	}
}

// TestVisitsSlidingMaximum: over random reconciles, the ended part of
// longest is the longest gap that ended in the window, as a scan of every
// gap finds it.
func TestVisitsSlidingMaximum(t *testing.T) {
	const window = 15 * time.Second
	rng := rand.New(rand.NewPCG(1, 2))
	v := newVisits(window)
	last := map[string]time.Time{}
	type gap struct {
		end time.Time
		d   time.Duration
	}
	var all []gap
	at := now
	for i := range 2000 {
		at = at.Add(time.Duration(rng.IntN(500)) * time.Millisecond)
		key := fmt.Sprint(rng.IntN(20))
		if prev, ok := last[key]; ok {
			all = append(all, gap{at, at.Sub(prev)})
		}
		last[key] = at
		v.visited(key, at)
		// Only ended gaps: forget the open ones by scanning a copy.
		var want time.Duration
		for _, g := range all {
			if g.end.After(at.Add(-window)) {
				want = max(want, g.d)
			}
		}
		v.mu.Lock()
		q := dropBefore(v.ended, at.Add(-window))
		v.mu.Unlock()
		var got time.Duration
		if len(q) > 0 {
			got = q[0].gap
		}
		if got != want {
			t.Fatalf("step %d: longest ended gap %s, want %s", i, got, want)
		}
	}
}

// TestReconcileGapWiring: the wait from an autoscaler's add to its first
// reconcile is a gap, and a deleted autoscaler leaves none open.
func TestReconcileGapWiring(t *testing.T) {
	w := world{scale: newScale(3, 3, "app=web"), pods: pods(1000, 1000, 1000), podMetrics: milliByPod(500, 500, 500)}
	hpa := newHPA("web", nil, 10, cpuUtilization(50))
	f := newFixture(t, source.ModeNative, w, hpa) // added at now
	f.ctrl.r.clock = testingclock.NewFakePassiveClock(now.Add(5 * time.Second))
	if !f.ctrl.processNextWorkItem(context.Background()) {
		t.Fatal("the queue shut down")
	}
	if got := f.ctrl.visits.longest(now.Add(5 * time.Second)); got != 5*time.Second {
		t.Errorf("longest gap %s, want 5s (added at +0, reconciled at +5s)", got)
	}
	f.ctrl.delete(hpa)
	if got := f.ctrl.visits.longest(now.Add(time.Hour)); got != 0 {
		t.Errorf("longest gap an hour later %s, want 0: the gap ended a window ago and the autoscaler is gone", got)
	}
	f.ctrl.queue.ShutDown()
}
