package controller

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/autoscaler/source"
	"github.com/tidal-autoscaler/tidal/autoscaler/status"
)

// hasSeries reports whether reg has a series of name for the autoscaler
// default/web.
func hasSeries(t *testing.T, reg *prometheus.Registry, name string) bool {
	t.Helper()
	mfs, err := reg.Gather()
	must(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "hpa_name" && l.GetValue() == "web" {
					return true
				}
			}
		}
	}
	return false
}

var webLabels = map[string]string{"namespace": ns, "hpa_name": "web"}

func wantCond(t *testing.T, st *autoscalingv2.HorizontalPodAutoscalerStatus, typ autoscalingv2.HorizontalPodAutoscalerConditionType, s corev1.ConditionStatus, reason string, msgHas ...string) {
	t.Helper()
	c := condition(st, typ)
	if c == nil {
		t.Errorf("no %s condition in %+v", typ, st.Conditions)
		return
	}
	if c.Status != s || c.Reason != reason {
		t.Errorf("condition %s = %s/%s (%s), want %s/%s", typ, c.Status, c.Reason, c.Message, s, reason)
	}
	for _, m := range msgHas {
		if !strings.Contains(c.Message, m) {
			t.Errorf("condition %s message %q does not contain %q", typ, c.Message, m)
		}
	}
}

// cpuScaleUp is worked example 1: 3 replicas, cpu proposes 5.
func cpuScaleUp() (*autoscalingv2.HorizontalPodAutoscaler, world) {
	return newHPA("web", ptr.To[int32](1), 10, cpuUtilization(30)),
		world{scale: newScale(3, 3, "app=web"), pods: pods(2000, 2000, 2000), podMetrics: milliByPod(600, 1000, 1400)}
}

// TestDryRunNeverWritesScale: the decision is made and recorded (status,
// DryRun condition, event, gauge, status.tidal.decision), /scale is never
// written, in every branch that would write it.
func TestDryRunNeverWritesScale(t *testing.T) {
	const cpuReason = "cpu resource utilization (percentage of request) above target"
	tests := []struct {
		name        string
		hpa         *autoscalingv2.HorizontalPodAutoscaler
		world       world
		wantDesired int32
		wantReason  string
		wantEvent   string // "" for no DryRun event
	}{{
		name: "metrics would scale up",
		hpa:  func() *autoscalingv2.HorizontalPodAutoscaler { h, _ := cpuScaleUp(); return h }(),
		world: func() world {
			_, w := cpuScaleUp()
			return w
		}(),
		wantDesired: 5, wantReason: "WouldScale",
		wantEvent: "Normal DryRun would scale 3→5: " + cpuReason,
	}, {
		name:        "above maxReplicas would clamp",
		hpa:         newHPA("web", ptr.To[int32](1), 4, cpuUtilization(30)),
		world:       world{scale: newScale(6, 6, "app=web")},
		wantDesired: 4, wantReason: "WouldScale",
		wantEvent: "Normal DryRun would scale 6→4: Current number of replicas above Spec.MaxReplicas",
	}, {
		name: "steady: no event",
		hpa:  newHPA("web", ptr.To[int32](1), 10, cpuUtilization(50)),
		world: world{scale: newScale(3, 3, "app=web"), pods: pods(1000, 1000, 1000),
			podMetrics: milliByPod(500, 500, 500)},
		wantDesired: 3, wantReason: "WouldNotScale",
	}}
	for _, tt := range tests {
		for _, mode := range modes {
			t.Run(tt.name+"/"+string(mode), func(t *testing.T) {
				tt.world.tidal = v1alpha1.TidalSpec{DryRun: true}
				f := newFixture(t, mode, tt.world, tt.hpa)
				for i := range 3 {
					if err := f.reconcile("web"); err != nil {
						t.Fatalf("reconcile %d: %v", i, err)
					}
					f.sync("web")
				}
				if len(f.scaleUpdates) != 0 {
					t.Fatalf("dry run wrote /scale: %v", f.scaleUpdates)
				}
				stored := f.stored("web")
				st := stored.HPAStatus()
				if st.DesiredReplicas != tt.wantDesired || st.LastScaleTime != nil {
					t.Errorf("status desired %d lastScaleTime %v, want %d and none", st.DesiredReplicas, st.LastScaleTime, tt.wantDesired)
				}
				wantCond(t, st, status.DryRunCondition, corev1.ConditionTrue, tt.wantReason, "/scale is not written")
				if c := condition(st, autoscalingv2.AbleToScale); c != nil && c.Reason == "SucceededRescale" {
					t.Errorf("AbleToScale says it rescaled: %+v", c)
				}
				events := f.events()
				var dry []string
				for _, e := range events {
					if strings.Contains(e, "SuccessfulRescale") {
						t.Errorf("rescale event in dry run: %q", e)
					}
					if strings.HasPrefix(e, "Normal DryRun") {
						dry = append(dry, e)
					}
				}
				switch {
				case tt.wantEvent == "" && len(dry) != 0:
					t.Errorf("DryRun events %q, want none (the count would not change)", dry)
				case tt.wantEvent != "" && (len(dry) != 3 || dry[0] != tt.wantEvent):
					t.Errorf("DryRun events %q, want %q once per sync", dry, tt.wantEvent)
				}
				if got := metricValue(t, f.reg, "tidal_autoscaler_dry_run_desired_replicas", webLabels); got != float64(tt.wantDesired) || !hasSeries(t, f.reg, "tidal_autoscaler_dry_run_desired_replicas") {
					t.Errorf("dry_run_desired_replicas = %v, want %d", got, tt.wantDesired)
				}
				if ha, ok := stored.Runtime().(*v1alpha1.HorizontalAutoscaler); ok && tt.wantReason == "WouldScale" && tt.name == "metrics would scale up" {
					if d := ha.Status.Tidal.Decision; d == nil || d.DesiredReplicas != tt.wantDesired || d.CurrentReplicas != 3 {
						t.Errorf("status.tidal.decision = %+v", d)
					}
				}
			})
		}
	}
}

// TestDryRunOff: turning dry run off removes its condition and gauge, and
// the autoscaler acts.
func TestDryRunOff(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			hpa, w := cpuScaleUp()
			hpa.Status.Conditions = []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: status.DryRunCondition, Status: corev1.ConditionTrue, Reason: "WouldScale"}}
			f := newFixture(t, mode, w, hpa)
			must(t, f.reconcile("web"))
			if !slicesEqual(f.scaleUpdates, []int32{5}) {
				t.Errorf("scale updates %v, want [5]", f.scaleUpdates)
			}
			if c := condition(f.stored("web").HPAStatus(), status.DryRunCondition); c != nil {
				t.Errorf("DryRun condition kept: %+v", c)
			}
			if hasSeries(t, f.reg, "tidal_autoscaler_dry_run_desired_replicas") {
				t.Error("dry_run_desired_replicas series without dry run")
			}
		})
	}
}

// TestDryRunAnnotationInvalid: a value other than "true" or "false" is
// taken as a dry run (no /scale writes), with a Warning event and a
// condition that name the annotation and what to change.
func TestDryRunAnnotationInvalid(t *testing.T) {
	hpa, w := cpuScaleUp()
	hpa.Annotations = map[string]string{source.DryRunAnnotation: "yes"}
	f := newFixture(t, source.ModeNative, w, hpa)
	must(t, f.reconcile("web"))
	if len(f.scaleUpdates) != 0 {
		t.Errorf("scale updates %v, want none", f.scaleUpdates)
	}
	wantCond(t, f.stored("web").HPAStatus(), status.DryRunCondition, corev1.ConditionTrue, "InvalidDryRun", source.DryRunAnnotation, `"yes"`, `neither "true" nor "false"`)
	if ev := f.events(); !hasEvent(ev, "Warning InvalidDryRun annotation "+source.DryRunAnnotation) {
		t.Errorf("events %q, want an InvalidDryRun Warning", ev)
	}
	// "false" is read as such.
	hpa.Annotations[source.DryRunAnnotation] = "false"
	f = newFixture(t, source.ModeNative, w, hpa)
	must(t, f.reconcile("web"))
	if !slicesEqual(f.scaleUpdates, []int32{5}) {
		t.Errorf("dry-run false: scale updates %v, want [5]", f.scaleUpdates)
	}
}

// failingRPS is an autoscaler on a pods metric rps whose values the test
// controls: absent (every metric fails) until the map is filled.
func failingRPS(minR int32, maxR int32, replicas int32) (*autoscalingv2.HorizontalPodAutoscaler, world) {
	return newHPA("web", ptr.To(minR), maxR, podsMetric("rps", "10")),
		world{scale: newScale(replicas, replicas, "app=web"), pods: pods(100, 100, 100), customPods: map[string]int64{}}
}

// TestFallbackEntersAndLeaves: failing syncs are counted (and persisted),
// the failureThreshold-th enters fallback (scale write, Fallback=True
// naming the metric, a Warning event, the gauge), later failing syncs keep
// it, and the first healthy sync leaves it.
func TestFallbackEntersAndLeaves(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			hpa, w := failingRPS(1, 10, 3)
			w.tidal.Fallback = &v1alpha1.Fallback{FailureThreshold: 3, Replicas: 6, Behavior: v1alpha1.FallbackStatic}
			f := newFixture(t, mode, w, hpa)
			for i := int32(1); i <= 2; i++ {
				if err := f.reconcile("web"); err == nil || !strings.Contains(err.Error(), "failed to compute desired number of replicas") {
					t.Fatalf("sync %d: error %v", i, err)
				}
				f.sync("web")
				stored := f.stored("web")
				if got := stored.MetricFailures(); got != i {
					t.Errorf("sync %d: persisted failures %d, want %d", i, got, i)
				}
				wantCond(t, stored.HPAStatus(), status.FallbackCondition, corev1.ConditionFalse, "MetricsFailing", "pods metric rps")
				if len(f.scaleUpdates) != 0 {
					t.Fatalf("sync %d: scaled to %v before the threshold", i, f.scaleUpdates)
				}
				if ev := f.events(); !hasEvent(ev, "Warning FailedComputeMetricsReplicas") || hasEvent(ev, "Warning Fallback") {
					t.Errorf("sync %d: events %q", i, ev)
				}
			}

			err := f.reconcile("web")
			if err == nil {
				t.Error("a fallback sync reports the metrics error")
			}
			f.sync("web")
			if !slicesEqual(f.scaleUpdates, []int32{6}) {
				t.Fatalf("third failing sync: scale updates %v, want [6]", f.scaleUpdates)
			}
			stored := f.stored("web")
			st := stored.HPAStatus()
			wantCond(t, st, status.FallbackCondition, corev1.ConditionTrue, "AllMetricsFailed", "3 consecutive syncs", "pods metric rps: failed to get pods metric value", "fallback count is 6")
			wantCond(t, st, autoscalingv2.AbleToScale, corev1.ConditionTrue, "SucceededRescale")
			wantCond(t, st, autoscalingv2.ScalingActive, corev1.ConditionFalse, "FailedGetPodsMetric")
			if st.DesiredReplicas != 6 || st.LastScaleTime == nil || stored.MetricFailures() != 3 {
				t.Errorf("status desired %d lastScaleTime %v failures %d, want 6, set, 3", st.DesiredReplicas, st.LastScaleTime, stored.MetricFailures())
			}
			ev := f.events()
			for _, want := range []string{"Warning Fallback every metric failed in 3 consecutive syncs", "Warning FailedComputeMetricsReplicas",
				"Normal SuccessfulRescale New size: 6; reason: fallback: every metric failed in 3 consecutive syncs"} {
				if !hasEvent(ev, want) {
					t.Errorf("events %q, want %q", ev, want)
				}
			}
			if got := metricValue(t, f.reg, "tidal_autoscaler_fallback_active", webLabels); got != 1 {
				t.Errorf("fallback_active = %v, want 1", got)
			}
			if ha, ok := stored.Runtime().(*v1alpha1.HorizontalAutoscaler); ok {
				d := ha.Status.Tidal.Decision
				if d == nil || len(d.Adjustments) == 0 || d.Adjustments[len(d.Adjustments)-1].Reason != "Fallback" || d.DesiredReplicas != 6 {
					t.Errorf("status.tidal.decision = %+v, want a Fallback adjustment to 6", d)
				}
			}

			// The workload now runs 6; metrics still fail: fallback holds,
			// no new write, no new Fallback event.
			w.scale.Spec.Replicas, w.scale.Status.Replicas = 6, 6
			_ = f.reconcile("web")
			f.sync("web")
			if len(f.scaleUpdates) != 1 {
				t.Errorf("still failing: scale updates %v, want the one", f.scaleUpdates)
			}
			if ev := f.events(); hasEvent(ev, "Warning Fallback ") {
				t.Errorf("Fallback event repeated: %q", ev)
			}
			wantCond(t, f.stored("web").HPAStatus(), status.FallbackCondition, corev1.ConditionTrue, "AllMetricsFailed")

			// The metric is back: fallback ends on this first healthy sync.
			for i := range 3 {
				w.customPods[podName(i)] = 10000
			}
			must(t, f.reconcile("web"))
			f.sync("web")
			stored = f.stored("web")
			wantCond(t, stored.HPAStatus(), status.FallbackCondition, corev1.ConditionFalse, "MetricsAvailable")
			wantCond(t, stored.HPAStatus(), autoscalingv2.ScalingActive, corev1.ConditionTrue, "ValidMetricFound")
			if stored.MetricFailures() != 0 {
				t.Errorf("failures after a healthy sync: %d", stored.MetricFailures())
			}
			if ev := f.events(); !hasEvent(ev, "Normal FallbackEnded") {
				t.Errorf("events %q, want FallbackEnded", ev)
			}
			if got := metricValue(t, f.reg, "tidal_autoscaler_fallback_active", webLabels); got != 0 || !hasSeries(t, f.reg, "tidal_autoscaler_fallback_active") {
				t.Errorf("fallback_active = %v, want 0", got)
			}
		})
	}
}

func podName(i int) string { return "web-" + string(rune('0'+i)) }

// TestFallbackBehaviors: the fallback count per behavior, within
// [minReplicas, maxReplicas] (with a condition saying so when replicas
// are outside). Each autoscaler starts with failureThreshold-1 failures
// persisted, as a restarted controller or a new leader finds them: its
// first failing sync enters fallback.
func TestFallbackBehaviors(t *testing.T) {
	tests := []struct {
		name        string
		behavior    v1alpha1.FallbackBehavior
		replicas    int32
		minR, maxR  int32
		current     int32
		wantScale   int32 // 0: no write
		wantDesired int32
		wantMsgHas  string
	}{
		{"static", v1alpha1.FallbackStatic, 6, 1, 10, 3, 6, 6, "behavior static"},
		{"currentReplicas keeps the count", v1alpha1.FallbackCurrentReplicas, 6, 1, 10, 3, 0, 3, "fallback count is 3"},
		{"currentReplicasIfHigher, current higher", v1alpha1.FallbackCurrentReplicasIfHigher, 2, 1, 10, 3, 0, 3, "fallback count is 3"},
		{"currentReplicasIfHigher, fallback higher", v1alpha1.FallbackCurrentReplicasIfHigher, 8, 1, 10, 3, 8, 8, "fallback count is 8"},
		{"currentReplicasIfLower, fallback lower", v1alpha1.FallbackCurrentReplicasIfLower, 2, 1, 10, 3, 2, 2, "fallback count is 2"},
		{"currentReplicasIfLower, current lower", v1alpha1.FallbackCurrentReplicasIfLower, 8, 1, 10, 3, 0, 3, "fallback count is 3"},
		{"replicas above maxReplicas are clamped", v1alpha1.FallbackStatic, 15, 1, 10, 3, 10, 10, "fallback.replicas 15 is above maxReplicas 10, so 10 is used"},
		{"replicas below minReplicas are clamped", v1alpha1.FallbackStatic, 0, 2, 10, 3, 2, 2, "fallback.replicas 0 is below minReplicas 2, so 2 is used"},
	}
	for _, tt := range tests {
		for _, mode := range modes {
			t.Run(tt.name+"/"+string(mode), func(t *testing.T) {
				hpa, w := failingRPS(tt.minR, tt.maxR, tt.current)
				w.tidal.Fallback = &v1alpha1.Fallback{FailureThreshold: 4, Replicas: tt.replicas, Behavior: tt.behavior}
				w.metricFailures = 3
				f := newFixture(t, mode, w, hpa)
				_ = f.reconcile("web")
				var want []int32
				if tt.wantScale != 0 {
					want = []int32{tt.wantScale}
				}
				if !slicesEqual(f.scaleUpdates, want) {
					t.Errorf("scale updates %v, want %v", f.scaleUpdates, want)
				}
				stored := f.stored("web")
				wantCond(t, stored.HPAStatus(), status.FallbackCondition, corev1.ConditionTrue, "AllMetricsFailed", tt.wantMsgHas)
				if got := stored.HPAStatus().DesiredReplicas; got != tt.wantDesired {
					t.Errorf("desired %d, want %d", got, tt.wantDesired)
				}
				if got := stored.MetricFailures(); got != 4 {
					t.Errorf("persisted failures %d, want 4", got)
				}
			})
		}
	}
}

// TestFallbackPartialFailureIsHealthy: a sync in which one metric fails
// and another is computed resets the count (not every metric failed).
func TestFallbackPartialFailureIsHealthy(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			hpa := newHPA("web", ptr.To[int32](1), 10, podsMetric("rps", "10"), cpuUtilization(50))
			w := world{scale: newScale(3, 3, "app=web"), pods: pods(1000, 1000, 1000), podMetrics: milliByPod(500, 500, 500),
				tidal: v1alpha1.TidalSpec{Fallback: &v1alpha1.Fallback{FailureThreshold: 2, Replicas: 6}}, metricFailures: 1}
			f := newFixture(t, mode, w, hpa)
			_ = f.reconcile("web")
			stored := f.stored("web")
			if len(f.scaleUpdates) != 0 || stored.MetricFailures() != 0 {
				t.Errorf("scale updates %v, failures %d; want none and 0", f.scaleUpdates, stored.MetricFailures())
			}
			wantCond(t, stored.HPAStatus(), status.FallbackCondition, corev1.ConditionFalse, "MetricsAvailable")
		})
	}
}

// TestFallbackInDryRun: the fallback count is what a dry run would write.
func TestFallbackInDryRun(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			hpa, w := failingRPS(1, 10, 3)
			w.tidal = v1alpha1.TidalSpec{DryRun: true, Fallback: &v1alpha1.Fallback{FailureThreshold: 1, Replicas: 6}}
			f := newFixture(t, mode, w, hpa)
			_ = f.reconcile("web")
			if len(f.scaleUpdates) != 0 {
				t.Errorf("dry run wrote /scale: %v", f.scaleUpdates)
			}
			if ev := f.events(); !hasEvent(ev, "Normal DryRun would scale 3→6: fallback: every metric failed in 1 consecutive syncs") {
				t.Errorf("events %q", ev)
			}
			st := f.stored("web").HPAStatus()
			wantCond(t, st, status.FallbackCondition, corev1.ConditionTrue, "AllMetricsFailed")
			wantCond(t, st, status.DryRunCondition, corev1.ConditionTrue, "WouldScale")
		})
	}
}

// TestFallbackInvalid: a fallback that cannot be used is ignored (failing
// metrics change nothing, as upstream) with a Warning event and a
// condition naming where it is given and what to change.
func TestFallbackInvalid(t *testing.T) {
	tests := []struct {
		name       string
		mode       source.Mode
		annotation string
		fallback   *v1alpha1.Fallback
		wantHas    []string
	}{
		{"annotation not JSON", source.ModeNative, "replicas=3", nil, []string{source.FallbackAnnotation, `{"failureThreshold":3,"replicas":5,"behavior":"static"}`}},
		{"annotation with an unknown field", source.ModeNative, `{"failureThreshold":3,"replica":3}`, nil, []string{source.FallbackAnnotation, `unknown field "replica"`}},
		{"annotation threshold 0", source.ModeNative, `{"failureThreshold":0,"replicas":3}`, nil, []string{"failureThreshold must be at least 1"}},
		{"annotation unknown behavior", source.ModeNative, `{"failureThreshold":1,"replicas":3,"behavior":"max"}`, nil, []string{`behavior must be one of`, `"max"`}},
		{"spec without schema: negative replicas", source.ModeCRD, "", &v1alpha1.Fallback{FailureThreshold: 1, Replicas: -1}, []string{"spec.fallback is invalid", "replicas must not be negative"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hpa, w := failingRPS(1, 10, 3)
			if tt.annotation != "" {
				hpa.Annotations = map[string]string{source.FallbackAnnotation: tt.annotation}
			}
			w.tidal.Fallback = tt.fallback
			f := newFixture(t, tt.mode, w, hpa)
			for range 3 {
				_ = f.reconcile("web")
				f.sync("web")
			}
			if len(f.scaleUpdates) != 0 {
				t.Errorf("scale updates %v, want none", f.scaleUpdates)
			}
			stored := f.stored("web")
			wantCond(t, stored.HPAStatus(), status.FallbackCondition, corev1.ConditionFalse, "InvalidFallback", tt.wantHas...)
			if stored.MetricFailures() != 0 {
				t.Errorf("failures counted for an unusable fallback: %d", stored.MetricFailures())
			}
			if ev := f.events(); !hasEvent(ev, "Warning InvalidFallback") {
				t.Errorf("events %q, want InvalidFallback", ev)
			}
		})
	}
}

// upstreamConditions are the condition types upstream sets.
var upstreamConditions = map[autoscalingv2.HorizontalPodAutoscalerConditionType]bool{
	autoscalingv2.AbleToScale: true, autoscalingv2.ScalingActive: true, autoscalingv2.ScalingLimited: true, autoscalingv2.ScaledToZero: true,
}

// TestWithoutExtensionsNothingChanges: with none of tidal's fields set,
// the reconcile is upstream's: the same scale writes, status, conditions
// (no tidal ones), no tidal annotation, events or series, and failing
// metrics never change the count however long they fail, and no pod is
// written. A fallback that is set but not triggered, a rollout hold with
// no rollout in progress and a pod selection change no decision or status
// either (their own conditions aside).
func TestWithoutExtensionsNothingChanges(t *testing.T) {
	scenarios := []struct {
		name  string
		build func() (*autoscalingv2.HorizontalPodAutoscaler, world)
		// wantFirst is the first scale write; 0 for none in all syncs.
		wantFirst int32
	}{
		{"scale up", cpuScaleUp, 5},
		{"metrics failing for 10 syncs", func() (*autoscalingv2.HorizontalPodAutoscaler, world) { return failingRPS(1, 10, 3) }, 0},
		{"above max", func() (*autoscalingv2.HorizontalPodAutoscaler, world) {
			return newHPA("web", ptr.To[int32](1), 4, cpuUtilization(30)), world{scale: newScale(6, 6, "app=web")}
		}, 4},
	}
	// run reconciles 10 times, the scale following the writes, and
	// returns the status after each sync.
	run := func(f *fixture, w world) []autoscalingv2.HorizontalPodAutoscalerStatus {
		var out []autoscalingv2.HorizontalPodAutoscalerStatus
		for range 10 {
			_ = f.reconcile("web")
			if n := len(f.scaleUpdates); n > 0 {
				w.scale.Spec.Replicas = f.scaleUpdates[n-1]
			}
			f.sync("web")
			out = append(out, *f.stored("web").HPAStatus().DeepCopy())
		}
		return out
	}
	for _, sc := range scenarios {
		for _, mode := range modes {
			t.Run(sc.name+"/"+string(mode), func(t *testing.T) {
				hpa, w := sc.build()
				f := newFixture(t, mode, w, hpa)
				statuses := run(f, w)
				if sc.wantFirst == 0 && len(f.scaleUpdates) != 0 || sc.wantFirst != 0 && (len(f.scaleUpdates) == 0 || f.scaleUpdates[0] != sc.wantFirst) {
					t.Errorf("scale updates %v, want the first %d", f.scaleUpdates, sc.wantFirst)
				}
				stored := f.stored("web")
				for _, c := range stored.HPAStatus().Conditions {
					if !upstreamConditions[c.Type] {
						t.Errorf("condition %s is not upstream's", c.Type)
					}
				}
				// What native mode writes always, and which no decision
				// reads (the history it keeps in status.tidal elsewhere).
				for k := range stored.GetAnnotations() {
					if k != source.HistoryAnnotation && k != source.DecisionAnnotation {
						t.Errorf("annotation %s written", k)
					}
				}
				if stored.MetricFailures() != 0 {
					t.Errorf("failures persisted: %d", stored.MetricFailures())
				}
				for _, e := range f.events() {
					for _, r := range []string{"DryRun", "Fallback", "InvalidDryRun", "InvalidFallback",
						"PodDeletionCost", "PodSelection", "InvalidPodSelection", "FailedSetPodDeletionCost", "ScaleDownHeld", "InvalidHoldScaleDownDuringRollout"} {
						if strings.HasPrefix(strings.SplitN(e, " ", 3)[1], r) {
							t.Errorf("tidal event %q", e)
						}
					}
				}
				for _, m := range []string{"tidal_autoscaler_dry_run_desired_replicas", "tidal_autoscaler_fallback_active"} {
					if hasSeries(t, f.reg, m) {
						t.Errorf("series %s", m)
					}
				}

				// The same with a fallback that never triggers (threshold
				// above the number of syncs): the same writes and statuses,
				// the Fallback condition aside.
				hpa, w = sc.build()
				w.tidal.Fallback = &v1alpha1.Fallback{FailureThreshold: 11, Replicas: 2}
				g := newFixture(t, mode, w, hpa)
				for i, st := range run(g, w) {
					status.RemoveCondition(&st, status.FallbackCondition)
					if !equalStatus(&st, &statuses[i]) {
						t.Errorf("sync %d with an untriggered fallback: status\n%+v\nwant\n%+v", i, st, statuses[i])
					}
				}
				if !slicesEqual(g.scaleUpdates, f.scaleUpdates) {
					t.Errorf("untriggered fallback: scale updates %v, want %v", g.scaleUpdates, f.scaleUpdates)
				}
				for _, a := range f.kube.Actions() {
					if a.GetResource().Resource == "pods" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
						t.Errorf("pods written without pod selection: %s %s", a.GetVerb(), a.GetResource())
					}
				}

				// The same with a rollout hold and no rollout in progress,
				// and with a pod selection: the same /scale writes and
				// statuses, their conditions aside.
				for _, v := range []struct {
					name string
					set  func(*v1alpha1.TidalSpec)
					cond autoscalingv2.HorizontalPodAutoscalerConditionType
				}{
					{"hold, no rollout", func(ts *v1alpha1.TidalSpec) { ts.HoldScaleDownDuringRollout = true }, status.ScaleDownHeldCondition},
					{"pod selection", func(ts *v1alpha1.TidalSpec) {
						ts.ScaleDownPodSelection = &v1alpha1.ScaleDownPodSelection{Metric: v1alpha1.PodSelectionMetric{Type: autoscalingv2.ResourceMetricSourceType, Name: "cpu"}}
					}, status.PodSelectionCondition},
				} {
					hpa, w = sc.build()
					v.set(&w.tidal)
					g := newFixture(t, mode, w, hpa)
					g.ctrl.r.deployment = func(string, string) (*appsv1.Deployment, bool) {
						return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, true
					}
					for i, st := range run(g, w) {
						status.RemoveCondition(&st, v.cond)
						if !equalStatus(&st, &statuses[i]) {
							t.Errorf("sync %d with %s: status\n%+v\nwant\n%+v", i, v.name, st, statuses[i])
						}
					}
					if !slicesEqual(g.scaleUpdates, f.scaleUpdates) {
						t.Errorf("%s: scale updates %v, want %v", v.name, g.scaleUpdates, f.scaleUpdates)
					}
				}
			})
		}
	}
}

func equalStatus(a, b *autoscalingv2.HorizontalPodAutoscalerStatus) bool {
	return source.ObjectOfHPA(&autoscalingv2.HorizontalPodAutoscaler{Status: *a}).StatusEqual(source.ObjectOfHPA(&autoscalingv2.HorizontalPodAutoscaler{Status: *b}))
}
