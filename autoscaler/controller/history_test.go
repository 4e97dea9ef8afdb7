package controller

import (
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/autoscaler/behavior"
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
				newRun := func(h *autoscalingv2.HorizontalPodAutoscaler, replicas int32) *restartRun {
					w := world{scale: newScale(replicas, replicas, "app=web"), pods: pods(100, 100, 100, 100), customPods: load}
					return &restartRun{f: newFixture(t, mode, w, h), world: w.scale, scale: replicas}
				}
				never := newRun(hpa, 4)
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
						if stored.GetAnnotations()[HistoryAnnotation] == "" {
							t.Fatal("no history annotation written")
						}
						h := hpa.DeepCopy()
						h.Annotations = stored.GetAnnotations()
						h.Status = *stored.HPAStatus()
						seeded = newRun(h, never.scale)
						h = h.DeepCopy()
						h.Annotations = nil
						unseeded = newRun(h, never.scale)
					}
					for _, r := range []*restartRun{never, seeded, unseeded} {
						if r != nil {
							r.step(t, at)
						}
					}
				}
				want := never.decisions[restartAt:]
				if !slicesEqual(seeded.decisions, want) {
					t.Errorf("restarted with the persisted history decided %v, the controller that never restarted %v", seeded.decisions, want)
				}
				if slicesEqual(unseeded.decisions, want) {
					t.Errorf("restarted without the persisted history decided as the controller that never restarted (%v): the test shows nothing", want)
				}
				if want[len(want)-1] != 1 {
					t.Errorf("never scaled down to 1: %v", want)
				}
				t.Logf("decisions from the restart on: %v; without the history: %v", want, unseeded.decisions)
			})
		}
	}
}

// TestHistoryWrittenOnlyWhenItMatters checks that a reconcile that does not
// change the compacted history (here: same recommendation at the same time)
// writes nothing, and that one that changes it writes once.
func TestHistoryWrittenOnlyWhenItMatters(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			w := world{scale: newScale(3, 3, "app=web"), pods: pods(100, 100, 100), customPods: milliByPod(10000, 10000, 10000)}
			f := newFixture(t, mode, w, newHPA("web", ptr.To[int32](1), 10, podsMetric("rps", "10")))
			patches := func() int {
				n := 0
				actions := f.kube.Actions()
				if mode == ModeCRD {
					actions = f.dyn.Actions()
				}
				for _, a := range actions {
					if a.GetVerb() == "patch" {
						n++
					}
				}
				return n
			}
			must(t, f.reconcile("web"))
			f.sync("web")
			if n := patches(); n != 1 {
				t.Fatalf("patches after the first reconcile = %d, want 1", n)
			}
			must(t, f.reconcile("web")) // same time: same history
			f.sync("web")
			if n := patches(); n != 1 {
				t.Fatalf("patches after an unchanged reconcile = %d, want 1", n)
			}
			f.ctrl.r.clock = testingclock.NewFakePassiveClock(now.Add(15 * time.Second))
			must(t, f.reconcile("web"))
			if n := patches(); n != 2 {
				t.Fatalf("patches after a new recommendation = %d, want 2", n)
			}
			h, err := behavior.Decode(f.stored("web").GetAnnotations()[HistoryAnnotation])
			must(t, err)
			if len(h.Recommendations) != 1 || h.Recommendations[0].Replicas != 3 || !h.Recommendations[0].Time.Equal(now.Add(15*time.Second)) {
				t.Errorf("persisted %+v, want the one recommendation 3 at +15s", h.Recommendations)
			}
		})
	}
}

// TestInvalidHistoryAnnotationIsIgnored: a corrupt annotation is reported
// and the object starts with an empty history, as upstream.
func TestInvalidHistoryAnnotationIsIgnored(t *testing.T) {
	w := world{scale: newScale(3, 3, "app=web"), pods: pods(100, 100, 100), customPods: milliByPod(10000, 10000, 10000)}
	hpa := newHPA("web", ptr.To[int32](1), 10, podsMetric("rps", "10"))
	hpa.Annotations = map[string]string{HistoryAnnotation: "{not json"}
	f := newFixture(t, ModeNative, w, hpa)
	must(t, f.reconcile("web"))
	h, err := behavior.Decode(f.stored("web").GetAnnotations()[HistoryAnnotation])
	must(t, err)
	if len(h.Recommendations) != 1 {
		t.Errorf("persisted %+v, want one recommendation", h.Recommendations)
	}
}
