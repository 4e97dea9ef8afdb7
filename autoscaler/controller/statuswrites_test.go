package controller

import (
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/autoscaler/source"
)

func TestWithinInterval(t *testing.T) {
	last := now
	tests := []struct {
		name     string
		known    bool
		at       time.Duration
		interval time.Duration
		want     bool
	}{
		{name: "off", known: true, at: time.Second, interval: 0, want: false},
		{name: "no write known", known: false, at: time.Second, interval: time.Minute, want: false},
		{name: "within", known: true, at: 59 * time.Second, interval: time.Minute, want: true},
		{name: "interval passed", known: true, at: time.Minute, interval: time.Minute, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := withinInterval(last, tt.known, now.Add(tt.at), tt.interval); got != tt.want {
				t.Errorf("withinInterval = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestStatusMetricsMinInterval follows one autoscaler whose pods metric
// moves: with an interval, a status that changed in metric values only
// waits for it; a new desired count or condition is written at once; with
// 0 every change is written, as upstream does.
func TestStatusMetricsMinInterval(t *testing.T) {
	type step struct {
		name string
		at   time.Duration
		// rps is every pod's value (milli); -1: the metric fails.
		rps        int64
		wantWrites int
	}
	// 3 pods, target 10 per pod: 9.5 to 10.5 are within the tolerance.
	moving := []int64{10000, 10200, 9900, 10100, 10300}
	tests := []struct {
		name         string
		interval     time.Duration
		steps        []step
		wantDeferred float64
	}{{
		name: "off: every change written", interval: 0,
		steps: []step{
			{"first reconcile", 0, moving[0], 1},
			{"values move", 15 * time.Second, moving[1], 2},
			{"values move", 30 * time.Second, moving[2], 3},
			{"values move", 45 * time.Second, moving[3], 4},
		},
	}, {
		name: "60s: values wait, the rest goes at once", interval: time.Minute,
		steps: []step{
			{"first reconcile", 0, moving[0], 1},
			{"values move within the interval: no write", 15 * time.Second, moving[1], 1},
			{"again: no write", 30 * time.Second, moving[2], 1},
			{"the interval has passed: written", 60 * time.Second, moving[3], 2},
			{"values move within the next interval: no write", 75 * time.Second, moving[4], 2},
			{"the metric fails (condition): written at once", 90 * time.Second, -1, 3},
			{"it is back (condition): written at once", 105 * time.Second, moving[0], 4},
			{"values move: no write", 120 * time.Second, moving[1], 4},
			{"usage doubles (desired and replicas): written at once", 135 * time.Second, 20000, 5},
		},
		wantDeferred: 4,
	}}
	for _, tt := range tests {
		for _, mode := range modes {
			t.Run(tt.name+"/"+string(mode), func(t *testing.T) {
				// With leader election, a repeated recommendation is never
				// written on its own: only the interval decides here.
				w := world{scale: newScale(3, 3, "app=web"), pods: pods(100, 100, 100), customPods: milliByPod(0, 0, 0),
					handover: staticHandover(now.Add(-time.Hour))}
				f := newFixture(t, mode, w, newHPA("web", ptr.To[int32](1), 10, podsMetric("rps", "10")))
				f.ctrl.r.statusInterval = tt.interval
				for _, st := range tt.steps {
					for _, name := range []string{"web-0", "web-1", "web-2"} {
						if st.rps < 0 {
							delete(w.customPods, name)
						} else {
							w.customPods[name] = st.rps
						}
					}
					f.ctrl.r.clock = testingclock.NewFakePassiveClock(now.Add(st.at))
					_ = f.reconcile("web")
					f.sync("web")
					if n := f.statusUpdates(); n != st.wantWrites {
						t.Fatalf("+%s %s: status writes = %d, want %d", st.at, st.name, n, st.wantWrites)
					}
				}
				if got := metricValue(t, f.reg, "tidal_autoscaler_status_writes_deferred_total", nil); got != tt.wantDeferred {
					t.Errorf("status_writes_deferred_total = %v, want %v", got, tt.wantDeferred)
				}
			})
		}
	}
}

// TestStatusMetricsMinIntervalForgets: a deleted autoscaler's last write
// is forgotten.
func TestStatusMetricsMinIntervalForgets(t *testing.T) {
	w := world{scale: newScale(3, 3, "app=web"), pods: pods(100, 100, 100), customPods: milliByPod(10000, 10000, 10000)}
	hpa := newHPA("web", ptr.To[int32](1), 10, podsMetric("rps", "10"))
	f := newFixture(t, source.ModeNative, w, hpa)
	f.ctrl.r.statusInterval = time.Minute
	must(t, f.reconcile("web"))
	if _, ok := f.ctrl.r.statusWrites.last(ns + "/web"); !ok {
		t.Fatal("the write was not recorded")
	}
	f.ctrl.delete(hpa)
	if _, ok := f.ctrl.r.statusWrites.last(ns + "/web"); ok {
		t.Error("the write of a deleted autoscaler is still kept")
	}
}
