package controller

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/autoscaler/behavior"
	"github.com/tidal-autoscaler/tidal/autoscaler/monitor"
	"github.com/tidal-autoscaler/tidal/autoscaler/source"
)

// restartRun is one controller over the steps of TestRestartKeepsDecisions.
type restartRun struct {
	f *fixture
	// world is the target's /scale, which follows the updates as a
	// Deployment's would.
	world *autoscalingv1.Scale
	scale int32
	// decisions are the target's replicas after each step.
	decisions []int32
}

// step reconciles at time at and follows the scale updates.
func (r *restartRun) step(t *testing.T, at time.Time) {
	t.Helper()
	r.f.ctrl.r.clock = testingclock.NewFakePassiveClock(at)
	before := len(r.f.scaleUpdates)
	if err := r.f.reconcile("web"); err != nil {
		t.Fatalf("reconcile at %s: %v", at.Sub(now), err)
	}
	r.f.sync("web")
	if len(r.f.scaleUpdates) > before {
		r.scale = r.f.scaleUpdates[len(r.f.scaleUpdates)-1]
		r.world.Spec.Replicas, r.world.Status.Replicas = r.scale, r.scale
	}
	r.decisions = append(r.decisions, r.scale)
}

// TestRestartKeepsDecisions runs a controller that never restarts and one
// that restarts (a new leader) in the middle of a downscale stabilization
// window, seeded from the annotation the first wrote: both must make the
// same decision at every step. A controller restarted without the
// annotation must not (it holds the scale-down for a window from its
// start).
func TestRestartKeepsDecisions(t *testing.T) {
	const period = 15 * time.Second
	tests := []struct {
		name     string
		behavior *autoscalingv2.HorizontalPodAutoscalerBehavior
	}{
		{name: "legacy rules, 5m window"},
		{name: "behavior, 60s scale-down window, 1 pod per 15s", behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
			ScaleDown: &autoscalingv2.HPAScalingRules{
				StabilizationWindowSeconds: ptr.To[int32](60),
				Policies:                   []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: 45}},
			},
		}},
	}
	for _, mode := range modes {
		for _, tt := range tests {
			t.Run(string(mode)+"/"+tt.name, func(t *testing.T) {
				load := milliByPod(40000, 40000, 40000, 40000)
				hpa := newHPA("web", ptr.To[int32](1), 4, podsMetric("rps", "10"))
				hpa.Spec.Behavior = tt.behavior
				newRun := func(h *autoscalingv2.HorizontalPodAutoscaler, replicas int32, history string) *restartRun {
					w := world{scale: newScale(replicas, replicas, "app=web"), pods: pods(100, 100, 100, 100), customPods: load, history: history}
					return &restartRun{f: newFixture(t, mode, w, h), world: w.scale, scale: replicas}
				}
				never := newRun(hpa, 4, "")
				const restartAt, steps = 5, 30
				var seeded, unseeded *restartRun
				for i := range steps {
					at := now.Add(time.Duration(i) * period)
					if i == 3 {
						for k := range load {
							load[k] = 1000 // desired 1
						}
					}
					if i == restartAt {
						stored := never.f.stored("web")
						history := stored.PersistedHistory()
						if history == "" {
							t.Fatal("no history written")
						}
						h := hpa.DeepCopy()
						h.Status = *stored.HPAStatus()
						seeded = newRun(h, never.scale, history)
						unseeded = newRun(h.DeepCopy(), never.scale, "")
					}
					for _, r := range []*restartRun{never, seeded, unseeded} {
						if r != nil {
							r.step(t, at)
						}
					}
				}
				decidesAsNeverStopped(t, never, restartAt, seeded, "restarted with the persisted history", unseeded, "restarted without it")
			})
		}
	}
}

// decidesAsNeverStopped checks that the run that took over at step from
// (good) decided as the controller that never stopped, until the scale-down
// to 1, and that the run without what good knew (bad) did not, which shows
// that knowledge mattered.
func decidesAsNeverStopped(t *testing.T, never *restartRun, from int, good *restartRun, goodName string, bad *restartRun, badName string) {
	t.Helper()
	want := never.decisions[from:]
	if !slicesEqual(good.decisions, want) {
		t.Errorf("%s decided %v, the controller that never stopped %v", goodName, good.decisions, want)
	}
	if slicesEqual(bad.decisions, want) {
		t.Errorf("%s decided as the controller that never stopped (%v): the test shows nothing", badName, want)
	}
	if want[len(want)-1] != 1 {
		t.Errorf("never scaled down to 1: %v", want)
	}
	t.Logf("decisions from step %d on: %v; %s: %v", from, want, badName, bad.decisions)
}

// TestHandoverKeepsDecisions: with leader election, a steadily repeated
// recommendation is never written on its own, so the stored one can be
// minutes old when the leader changes. A new leader that continues it until
// the previous leader was last alive (Handover) decides as the controller
// that never stopped, when the load falls just as it takes over; one that
// does not know when its predecessor stopped scales down minutes early.
func TestHandoverKeepsDecisions(t *testing.T) {
	const period = 15 * time.Second
	at := func(step int) time.Time { return now.Add(time.Duration(step) * period) }
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			load := milliByPod(40000, 40000, 40000, 40000) // desired 16, held at max 4
			hpa := newHPA("web", ptr.To[int32](1), 4, podsMetric("rps", "10"))
			newRun := func(h *autoscalingv2.HorizontalPodAutoscaler, replicas int32, history string, handover Handover) *restartRun {
				w := world{scale: newScale(replicas, replicas, "app=web"), pods: pods(100, 100, 100, 100), customPods: load,
					history: history, handover: handover}
				return &restartRun{f: newFixture(t, mode, w, h), world: w.scale, scale: replicas}
			}
			never := newRun(hpa, 4, "", staticHandover{})
			const takeOverAt, steps = 12, 40
			var informed, uninformed *restartRun
			for i := range steps {
				if i == takeOverAt {
					stored := never.f.stored("web")
					if writes := never.f.statusUpdates(); writes != 1 {
						t.Fatalf("%d status writes in %d steady periods, want 1", writes, takeOverAt)
					}
					h := hpa.DeepCopy()
					h.Status = *stored.HPAStatus()
					// The previous leader last reconciled one period ago.
					informed = newRun(h, never.scale, stored.PersistedHistory(), staticHandover(at(i-1)))
					uninformed = newRun(h.DeepCopy(), never.scale, stored.PersistedHistory(), staticHandover{})
					for k := range load {
						load[k] = 1000 // desired 1
					}
				}
				for _, r := range []*restartRun{never, informed, uninformed} {
					if r != nil {
						r.step(t, at(i))
					}
				}
			}
			decidesAsNeverStopped(t, never, takeOverAt, informed, "the informed new leader", uninformed, "the uninformed new leader")
		})
	}
}

// TestRecommending reads a stored status's conditions.
func TestRecommending(t *testing.T) {
	cond := func(typ autoscalingv2.HorizontalPodAutoscalerConditionType, ok bool) autoscalingv2.HorizontalPodAutoscalerCondition {
		st := corev1.ConditionFalse
		if ok {
			st = corev1.ConditionTrue
		}
		return autoscalingv2.HorizontalPodAutoscalerCondition{Type: typ, Status: st}
	}
	for _, tc := range []struct {
		name  string
		conds []autoscalingv2.HorizontalPodAutoscalerCondition
		want  bool
	}{
		{"able and active", []autoscalingv2.HorizontalPodAutoscalerCondition{cond(autoscalingv2.AbleToScale, true), cond(autoscalingv2.ScalingActive, true)}, true},
		{"metrics failed", []autoscalingv2.HorizontalPodAutoscalerCondition{cond(autoscalingv2.AbleToScale, true), cond(autoscalingv2.ScalingActive, false)}, false},
		{"scale unreadable", []autoscalingv2.HorizontalPodAutoscalerCondition{cond(autoscalingv2.AbleToScale, false), cond(autoscalingv2.ScalingActive, true)}, false},
		{"never reconciled", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := recommending(&autoscalingv2.HorizontalPodAutoscalerStatus{Conditions: tc.conds}); got != tc.want {
				t.Errorf("recommending = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestHistoryWrittenWithStatus follows the writes of one autoscaler whose
// recommendation stays the same: the history goes with status writes, and
// a status write of its own is made only once the newest recommendation's
// time has moved by history.DefaultRefresh.
func TestHistoryWrittenWithStatus(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			w := world{scale: newScale(3, 3, "app=web"), pods: pods(100, 100, 100), customPods: milliByPod(10000, 10000, 10000)}
			f := newFixture(t, mode, w, newHPA("web", ptr.To[int32](1), 10, podsMetric("rps", "10")))
			steps := []struct {
				name string
				at   time.Duration
				// rps changes the metric (and so the status) when set.
				rps        int64
				wantWrites int
				// wantNewest is the newest persisted recommendation's time.
				wantNewest time.Duration
				// wantHistoryWrites counts the writes made for the history.
				wantHistoryWrites float64
			}{
				{name: "first reconcile: status and history", at: 0, wantWrites: 1, wantNewest: 0},
				{name: "same time, same status: nothing", at: 0, wantWrites: 1, wantNewest: 0},
				{name: "newest moved 15s, status unchanged: nothing", at: 15 * time.Second, wantWrites: 1, wantNewest: 0},
				{name: "newest moved 45s: nothing", at: 45 * time.Second, wantWrites: 1, wantNewest: 0},
				{name: "newest moved 60s (history.DefaultRefresh): history alone", at: 60 * time.Second, wantWrites: 2, wantNewest: 60 * time.Second, wantHistoryWrites: 1},
				{name: "status changes: history goes with it", at: 75 * time.Second, rps: 10500, wantWrites: 3, wantNewest: 75 * time.Second, wantHistoryWrites: 1},
			}
			for _, st := range steps {
				if st.rps != 0 {
					for k := range w.customPods {
						w.customPods[k] = st.rps
					}
				}
				f.ctrl.r.clock = testingclock.NewFakePassiveClock(now.Add(st.at))
				must(t, f.reconcile("web"))
				f.sync("web")
				if n := f.statusUpdates(); n != st.wantWrites {
					t.Fatalf("%s: status writes = %d, want %d", st.name, n, st.wantWrites)
				}
				// The write of the history alone is counted as such.
				if got := metricValue(t, f.reg, "tidal_autoscaler_status_writes_total", map[string]string{"reason": monitor.WriteHistory}); got != st.wantHistoryWrites {
					t.Fatalf("%s: status_writes_total{reason=history} = %v, want %v", st.name, got, st.wantHistoryWrites)
				}
				h, err := behavior.Decode(f.stored("web").PersistedHistory())
				must(t, err)
				if len(h.Recommendations) != 1 || h.Recommendations[0].Replicas != 3 || !h.Recommendations[0].Time.Equal(now.Add(st.wantNewest)) {
					t.Fatalf("%s: persisted %+v, want the one recommendation 3 at +%s", st.name, h.Recommendations, st.wantNewest)
				}
			}
		})
	}
}

// TestHistorySeededFromAnnotation: a HorizontalAutoscaler whose history an
// earlier tidal kept in the annotation is seeded from it.
func TestHistorySeededFromAnnotation(t *testing.T) {
	stored := behavior.History{Recommendations: []behavior.Recommendation{{Replicas: 7, Time: now.Add(-time.Minute)}}}.Encode()
	hpa := newHPA("web", ptr.To[int32](1), 10, podsMetric("rps", "10"))
	hpa.Annotations = map[string]string{source.HistoryAnnotation: stored}
	w := world{scale: newScale(7, 7, "app=web"), pods: pods(100, 100, 100), customPods: milliByPod(1000, 1000, 1000)}
	f := newFixture(t, source.ModeCRD, w, hpa)
	must(t, f.reconcile("web"))
	// The load wants 1, the seeded 7 of a minute ago holds the scale-down.
	if len(f.scaleUpdates) != 0 {
		t.Errorf("scaled to %v; the seeded recommendation 7 should hold the scale-down", f.scaleUpdates)
	}
	h, err := behavior.Decode(f.stored("web").PersistedHistory())
	must(t, err)
	if len(h.Recommendations) != 2 || h.Recommendations[0].Replicas != 7 {
		t.Errorf("persisted %+v, want the seeded 7 then the new recommendation", h.Recommendations)
	}
}

// TestInvalidHistoryAnnotationIsIgnored: a corrupt annotation is reported
// and the object starts with an empty history, as upstream.
func TestInvalidHistoryAnnotationIsIgnored(t *testing.T) {
	w := world{scale: newScale(3, 3, "app=web"), pods: pods(100, 100, 100), customPods: milliByPod(10000, 10000, 10000)}
	hpa := newHPA("web", ptr.To[int32](1), 10, podsMetric("rps", "10"))
	hpa.Annotations = map[string]string{source.HistoryAnnotation: "{not json"}
	f := newFixture(t, source.ModeNative, w, hpa)
	must(t, f.reconcile("web"))
	h, err := behavior.Decode(f.stored("web").PersistedHistory())
	must(t, err)
	if len(h.Recommendations) != 1 {
		t.Errorf("persisted %+v, want one recommendation", h.Recommendations)
	}
}

// TestFutureHistoryDoesNotPinScaleDown: a persisted history with a
// recommendation 5 minutes in the future (written by a replica whose clock
// is ahead, or edited) holds the scale-down for one window from now, as a
// recommendation made now would, not until 5 minutes past that. A native
// HPA's annotation, which anyone who may edit the HPA can write, is
// rejected and logged instead (the history starts empty, as upstream's).
func TestFutureHistoryDoesNotPinScaleDown(t *testing.T) {
	stored := behavior.History{Recommendations: []behavior.Recommendation{
		{Replicas: 7, Time: now.Add(-6 * time.Minute)}, {Replicas: 7, Time: now.Add(5 * time.Minute)},
	}}.Encode()
	tests := []struct {
		mode source.Mode
		// wantLog is in the log; "" wants no complaint.
		wantLog string
	}{
		{mode: source.ModeCRD},
		{mode: source.ModeNative, wantLog: "the history annotation has an entry at 2026-03-01T12:05:00Z, 5m0s after now"},
	}
	for _, tt := range tests {
		t.Run(string(tt.mode), func(t *testing.T) {
			logs := captureKlog(t)
			// The load wants 1 replica of the 7.
			w := world{scale: newScale(7, 7, "app=web"), pods: pods(100, 100, 100), customPods: milliByPod(1000, 1000, 1000), history: stored}
			run := &restartRun{f: newFixture(t, tt.mode, w, newHPA("web", ptr.To[int32](1), 10, podsMetric("rps", "10"))), world: w.scale, scale: 7}
			run.step(t, now)
			run.step(t, now.Add(5*time.Minute+time.Second))
			if want := []int32{7, 1}; !slices.Equal(run.decisions, want) {
				t.Errorf("replicas %v at now and 5m1s later, want %v: the scale-down waits one window from now", run.decisions, want)
			}
			klog.Flush()
			if got := logs.String(); tt.wantLog == "" && strings.Contains(got, "Ignoring the persisted history") || !strings.Contains(got, tt.wantLog) {
				t.Errorf("log %q, want %q", got, tt.wantLog)
			}
		})
	}
}

// captureKlog sends klog's output to the returned buffer for the test.
func captureKlog(t *testing.T) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	klog.LogToStderr(false)
	klog.SetOutput(&buf)
	t.Cleanup(func() {
		klog.SetOutput(os.Stderr)
		klog.LogToStderr(true)
	})
	return &buf
}
