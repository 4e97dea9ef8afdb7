package controller

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/autoscaler/source"
)

var modes = []source.Mode{source.ModeNative, source.ModeCRD}

// wantCondition is a condition's expected status and reason.
type wantCondition struct {
	status corev1.ConditionStatus
	reason string
}

func TestReconcile(t *testing.T) {
	minOne := ptr.To[int32](1)
	tests := []struct {
		name  string
		hpa   *autoscalingv2.HorizontalPodAutoscaler
		world world
		// wantErr is a substring of the reconcile error; "" for none.
		wantErr string
		// wantScale is the replica count written to /scale; 0 for no write.
		wantScale   int32
		wantDesired int32
		wantCurrent int32
		wantConds   map[autoscalingv2.HorizontalPodAutoscalerConditionType]wantCondition
		// wantEvents are prefixes of the recorded events, in order.
		wantEvents []string
		// noScaleGet: the target's scale must not even be read.
		noScaleGet bool
	}{{
		// Worked example 1: 3 pods at 2000m, usage 600/1000/1400m, target
		// 30%: utilization 50, 5 replicas.
		name: "cpu utilization scales up",
		hpa:  newHPA("web", minOne, 10, cpuUtilization(30)),
		world: world{scale: newScale(3, 3, "app=web"), pods: pods(2000, 2000, 2000),
			podMetrics: milliByPod(600, 1000, 1400)},
		wantScale: 5, wantDesired: 5, wantCurrent: 3,
		wantConds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]wantCondition{
			autoscalingv2.AbleToScale:    {corev1.ConditionTrue, "SucceededRescale"},
			autoscalingv2.ScalingActive:  {corev1.ConditionTrue, "ValidMetricFound"},
			autoscalingv2.ScalingLimited: {corev1.ConditionFalse, "DesiredWithinRange"},
		},
		wantEvents: []string{"Normal SuccessfulRescale New size: 5; reason: cpu resource utilization (percentage of request) above target"},
	}, {
		// Worked example 9: values 20/10/30, target 15: 4 replicas.
		name: "pods metric scales up",
		hpa:  newHPA("web", minOne, 10, podsMetric("rps", "15")),
		world: world{scale: newScale(3, 3, "app=web"), pods: pods(100, 100, 100),
			customPods: milliByPod(20000, 10000, 30000)},
		wantScale: 4, wantDesired: 4, wantCurrent: 3,
		wantConds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]wantCondition{
			autoscalingv2.ScalingActive: {corev1.ConditionTrue, "ValidMetricFound"},
		},
		wantEvents: []string{"Normal SuccessfulRescale New size: 4; reason: pods metric rps above target"},
	}, {
		// Worked example 11: value 20 vs 15 with 3 ready pods: 4 replicas.
		name: "object metric scales up",
		hpa:  newHPA("web", minOne, 10, objectMetric("requests", "15")),
		world: world{scale: newScale(3, 3, "app=web"), pods: pods(100, 100, 100),
			objectValue: ptr.To[int64](20000)},
		wantScale: 4, wantDesired: 4, wantCurrent: 3,
		wantEvents: []string{"Normal SuccessfulRescale New size: 4; reason: Ingress metric requests above target"},
	}, {
		// Worked example 13: sum 8.6 vs Value 4.4 from 1 replica: 2.
		name: "external metric scales up",
		hpa:  newHPA("web", minOne, 10, externalMetric("queue_depth", "4400m")),
		world: world{scale: newScale(1, 1, "app=web"), pods: pods(100),
			external: []int64{5000, 3600}},
		wantScale: 2, wantDesired: 2, wantCurrent: 1,
		wantEvents: []string{"Normal SuccessfulRescale New size: 2; reason: external metric queue_depth(&LabelSelector{MatchLabels:map[string]string{queue: jobs,},MatchExpressions:[]LabelSelectorRequirement{},}) above target"},
	}, {
		name:    "missing resource metrics",
		hpa:     newHPA("web", minOne, 10, cpuUtilization(30)),
		world:   world{scale: newScale(3, 3, "app=web"), pods: pods(2000, 2000, 2000)},
		wantErr: "failed to compute desired number of replicas", wantCurrent: 3,
		wantConds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]wantCondition{
			autoscalingv2.AbleToScale:   {corev1.ConditionTrue, "SucceededGetScale"},
			autoscalingv2.ScalingActive: {corev1.ConditionFalse, "FailedGetResourceMetric"},
		},
		wantEvents: []string{
			"Warning FailedGetResourceMetric failed to get cpu utilization: unable to get metrics for resource cpu: no metrics returned from resource metrics API",
			"Warning FailedComputeMetricsReplicas invalid metrics (1 invalid out of 1), first error is: failed to get cpu resource metric value",
		},
	}, {
		name:    "missing pods metric",
		hpa:     newHPA("web", minOne, 10, podsMetric("rps", "15")),
		world:   world{scale: newScale(3, 3, "app=web"), pods: pods(100, 100, 100)},
		wantErr: "failed to compute desired number of replicas", wantCurrent: 3,
		wantConds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]wantCondition{
			autoscalingv2.ScalingActive: {corev1.ConditionFalse, "FailedGetPodsMetric"},
		},
		wantEvents: []string{"Warning FailedGetPodsMetric unable to get metric rps: unable to fetch metrics from custom metrics API", "Warning FailedComputeMetricsReplicas"},
	}, {
		name:    "minReplicas above maxReplicas",
		hpa:     newHPA("web", ptr.To[int32](5), 2, cpuUtilization(30)),
		world:   world{scale: newScale(3, 3, "app=web"), pods: pods(2000, 2000, 2000), podMetrics: milliByPod(600, 1000, 1400)},
		wantErr: "invalid spec",
		wantConds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]wantCondition{
			autoscalingv2.ScalingActive: {corev1.ConditionFalse, "InvalidSpec"},
		},
		wantEvents: []string{"Warning InvalidSpec maxReplicas (2) must be greater than or equal to minReplicas (5)"},
		noScaleGet: true,
	}, {
		// An object the CRD's schema did not validate: a zero target would
		// make every usage infinitely above it.
		name:    "zero target and negative tolerance",
		hpa:     withScaleUpTolerance(newHPA("web", minOne, 10, podsMetric("rps", "0")), "-50m"),
		world:   world{scale: newScale(3, 3, "app=web"), pods: pods(100, 100, 100), customPods: milliByPod(20000, 20000, 20000)},
		wantErr: "invalid spec",
		wantConds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]wantCondition{
			autoscalingv2.ScalingActive: {corev1.ConditionFalse, "InvalidSpec"},
		},
		wantEvents: []string{"Warning InvalidSpec metrics[0] target averageValue (0) must be positive\nbehavior.scaleUp.tolerance (-50m) must be greater than or equal to 0"},
		noScaleGet: true,
	}, {
		name:    "unknown metric type",
		hpa:     newHPA("web", minOne, 10, autoscalingv2.MetricSpec{Type: "Magic"}),
		world:   world{scale: newScale(3, 3, "app=web"), pods: pods(2000, 2000, 2000)},
		wantErr: "unknown metric source type", wantCurrent: 3,
		wantConds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]wantCondition{
			autoscalingv2.ScalingActive: {corev1.ConditionFalse, "InvalidMetricSourceType"},
		},
		wantEvents: []string{`Warning InvalidMetricSourceType unknown metric source type "Magic"`, "Warning FailedComputeMetricsReplicas"},
	}, {
		name:    "target without a scale subresource",
		hpa:     newHPA("web", minOne, 10, cpuUtilization(30)),
		world:   world{pods: pods(2000)},
		wantErr: "failed to query scale subresource for Deployment/default/web",
		wantConds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]wantCondition{
			autoscalingv2.AbleToScale: {corev1.ConditionFalse, "FailedGetScale"},
		},
		wantEvents: []string{`Warning FailedGetScale deployments.apps "web" not found`},
	}, {
		name: "unknown target kind",
		hpa: func() *autoscalingv2.HorizontalPodAutoscaler {
			h := newHPA("web", minOne, 10, cpuUtilization(30))
			h.Spec.ScaleTargetRef.Kind = "Widget"
			return h
		}(),
		world:   world{scale: newScale(3, 3, "app=web")},
		wantErr: "unable to determine resource for scale target reference",
		wantConds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]wantCondition{
			autoscalingv2.AbleToScale: {corev1.ConditionFalse, "FailedGetScale"},
		},
		wantEvents: []string{"Warning FailedGetScale no matches for apps/, Resource=Widget"},
		noScaleGet: true,
	}, {
		name:    "scale without selector",
		hpa:     newHPA("web", minOne, 10, cpuUtilization(30)),
		world:   world{scale: newScale(3, 3, ""), pods: pods(2000)},
		wantErr: "selector is required", wantCurrent: 3,
		wantConds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]wantCondition{
			autoscalingv2.ScalingActive: {corev1.ConditionFalse, "InvalidSelector"},
		},
		wantEvents: []string{"Warning SelectorRequired selector is required", "Warning FailedComputeMetricsReplicas selector is required"},
	}, {
		name:      "above maxReplicas is clamped without metrics",
		hpa:       newHPA("web", minOne, 4, cpuUtilization(30)),
		world:     world{scale: newScale(6, 6, "app=web")},
		wantScale: 4, wantDesired: 4, wantCurrent: 6,
		wantEvents: []string{"Normal SuccessfulRescale New size: 4; reason: Current number of replicas above Spec.MaxReplicas"},
	}, {
		name:  "zero replicas disables scaling",
		hpa:   newHPA("web", minOne, 4, cpuUtilization(30)),
		world: world{scale: newScale(0, 0, "app=web")},
		wantConds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]wantCondition{
			autoscalingv2.ScalingActive: {corev1.ConditionFalse, "ScalingDisabled"},
		},
	}}
	for _, tt := range tests {
		for _, mode := range modes {
			t.Run(tt.name+"/"+string(mode), func(t *testing.T) {
				f := newFixture(t, mode, tt.world, tt.hpa)
				err := f.reconcile("web")
				if tt.wantErr == "" && err != nil {
					t.Fatalf("reconcile: %v", err)
				}
				if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
					t.Fatalf("reconcile error = %v, want one containing %q", err, tt.wantErr)
				}
				var wantUpdates []int32
				if tt.wantScale != 0 {
					wantUpdates = []int32{tt.wantScale}
				}
				if !slicesEqual(f.scaleUpdates, wantUpdates) {
					t.Errorf("scale updates = %v, want %v", f.scaleUpdates, wantUpdates)
				}
				if tt.noScaleGet && f.scaleGets != 0 {
					t.Errorf("the scale was read %d times, want none", f.scaleGets)
				}
				st := f.stored("web").HPAStatus()
				if st.DesiredReplicas != tt.wantDesired || st.CurrentReplicas != tt.wantCurrent {
					t.Errorf("status replicas current %d desired %d, want %d %d", st.CurrentReplicas, st.DesiredReplicas, tt.wantCurrent, tt.wantDesired)
				}
				if st.ObservedGeneration == nil || *st.ObservedGeneration != 1 {
					if tt.wantCurrent != 0 || tt.wantScale != 0 {
						t.Errorf("observedGeneration = %v, want 1", st.ObservedGeneration)
					}
				}
				for typ, want := range tt.wantConds {
					c := condition(st, typ)
					if c == nil || c.Status != want.status || c.Reason != want.reason {
						t.Errorf("condition %s = %+v, want %s/%s", typ, c, want.status, want.reason)
					}
				}
				events := f.events()
				if len(events) != len(tt.wantEvents) {
					t.Errorf("events = %q, want %d like %q", events, len(tt.wantEvents), tt.wantEvents)
				}
				for i, want := range tt.wantEvents {
					if i < len(events) && !strings.HasPrefix(events[i], want) {
						t.Errorf("event %d = %q, want prefix %q", i, events[i], want)
					}
				}
			})
		}
	}
}

func slicesEqual(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestStatusWrittenOnlyWhenChanged(t *testing.T) {
	tests := []struct {
		name  string
		hpa   *autoscalingv2.HorizontalPodAutoscaler
		world world
	}{{
		// 3 pods at 1000m request using 500m each, target 50%: steady.
		name: "steady cpu",
		hpa:  newHPA("web", ptr.To[int32](1), 10, cpuUtilization(50)),
		world: world{scale: newScale(3, 3, "app=web"), pods: pods(1000, 1000, 1000),
			podMetrics: milliByPod(500, 500, 500)},
	}, {
		name:  "failing metrics",
		hpa:   newHPA("web", ptr.To[int32](1), 10, podsMetric("rps", "15")),
		world: world{scale: newScale(3, 3, "app=web"), pods: pods(100, 100, 100)},
	}, {
		name:  "target without scale",
		hpa:   newHPA("web", ptr.To[int32](1), 10, cpuUtilization(50)),
		world: world{},
	}}
	for _, tt := range tests {
		for _, mode := range modes {
			t.Run(tt.name+"/"+string(mode), func(t *testing.T) {
				f := newFixture(t, mode, tt.world, tt.hpa)
				_ = f.reconcile("web")
				if got := f.statusUpdates(); got != 1 {
					t.Fatalf("first reconcile wrote the status %d times, want 1", got)
				}
				for range 3 {
					f.sync("web")
					_ = f.reconcile("web")
				}
				if got := f.statusUpdates(); got != 1 {
					t.Errorf("unchanged reconciles wrote the status: %d writes in all, want 1", got)
				}
				if len(f.scaleUpdates) != 0 {
					t.Errorf("scale updates %v, want none", f.scaleUpdates)
				}
			})
		}
	}
}

func TestAmbiguousSelector(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			w := world{scale: newScale(3, 3, "app=web"), pods: pods(1000, 1000, 1000), podMetrics: milliByPod(500, 500, 500)}
			f := newFixture(t, mode, w, newHPA("a", nil, 10, cpuUtilization(50)), newHPA("b", nil, 10, cpuUtilization(50)))
			// a sees only itself: b has no selector yet. Then b, then a again,
			// both overlapping.
			if err := f.reconcile("a"); err != nil {
				t.Fatalf("first reconcile of a: %v", err)
			}
			for _, name := range []string{"b", "a"} {
				err := f.reconcile(name)
				if err == nil || !strings.Contains(err.Error(), "controlled by more than one HPA") {
					t.Errorf("reconcile %s = %v, want an ambiguous selector error", name, err)
				}
				c := condition(f.stored(name).HPAStatus(), autoscalingv2.ScalingActive)
				if c == nil || c.Reason != "AmbiguousSelector" || !strings.Contains(c.Message, "[default/a default/b]") {
					t.Errorf("%s ScalingActive = %+v", name, c)
				}
			}
			if !hasEvent(f.events(), "Warning AmbiguousSelector pods by selector app=web are controlled by more than one HPA") {
				t.Error("no AmbiguousSelector event")
			}
		})
	}
}

// TestPodChangesReachTheNextReconcile: the pods a reconcile selected are
// not reused once a pod of the namespace was added, changed or deleted
// (clustercache.Selections): each change shows in the next reconcile's
// utilization. web-3's metrics are listed throughout; it counts while
// its pod exists and requests cpu.
func TestPodChangesReachTheNextReconcile(t *testing.T) {
	steps := []struct {
		name   string
		change func(t *testing.T, pods cache.Indexer)
		want   int32
	}{
		{name: "three pods", change: func(*testing.T, cache.Indexer) {}, want: 50},
		{name: "a pod added", want: 87, change: func(t *testing.T, pods cache.Indexer) {
			must(t, pods.Add(newPod("web-3", 1000)))
		}},
		{name: "a pod changed", want: 70, change: func(t *testing.T, pods cache.Indexer) {
			must(t, pods.Update(newPod("web-3", 2000)))
		}},
		{name: "a pod deleted", want: 50, change: func(t *testing.T, pods cache.Indexer) {
			must(t, pods.Delete(newPod("web-3", 2000)))
		}},
	}
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			w := world{scale: newScale(3, 3, "app=web"), pods: pods(1000, 1000, 1000), podMetrics: milliByPod(500, 500, 500, 2000)}
			f := newFixture(t, mode, w, newHPA("web", nil, 10, cpuUtilization(100)))
			for _, step := range steps {
				step.change(t, f.pods)
				if err := f.reconcile("web"); err != nil {
					t.Fatalf("%s: %v", step.name, err)
				}
				f.sync("web")
				cur := f.stored("web").HPAStatus().CurrentMetrics
				if len(cur) != 1 || cur[0].Resource == nil || cur[0].Resource.Current.AverageUtilization == nil {
					t.Fatalf("%s: current metrics %+v", step.name, cur)
				}
				if got := *cur[0].Resource.Current.AverageUtilization; got != step.want {
					t.Errorf("%s: utilization %d%%, want %d%%", step.name, got, step.want)
				}
			}
		})
	}
}

func TestTidalStatusExplainsTheDecision(t *testing.T) {
	// Example 16 shape: legacy rules limit 3 -> 1000 wanted to 6.
	hpa := newHPA("web", ptr.To[int32](1), 2000, cpuUtilization(10), podsMetric("rps", "1"))
	w := world{scale: newScale(3, 3, "app=web"), pods: pods(1000, 1000, 1000),
		podMetrics: milliByPod(100, 100, 100), customPods: milliByPod(333000, 333000, 334000)}
	f := newFixture(t, source.ModeCRD, w, hpa)
	if err := f.reconcile("web"); err != nil {
		t.Fatal(err)
	}
	ha := f.stored("web").Runtime().(*v1alpha1.HorizontalAutoscaler)
	got := ha.Status.Tidal
	if got == nil || got.Decision == nil {
		t.Fatalf("status.tidal = %+v", got)
	}
	if got.Reference != "Deployment/web" || got.Targets != "cpu: 10%/10%, 333333m/1" {
		t.Errorf("reference %q targets %q", got.Reference, got.Targets)
	}
	d := got.Decision
	if d.Winner != "pods metric rps" || d.ProposedReplicas != 1000 || d.DesiredReplicas != 6 || len(d.Proposals) != 2 {
		t.Errorf("decision = %+v", d)
	}
	// cpu at its target (ratio 1): the current count, by the tolerance.
	if *d.Proposals[0].Replicas != 3 || d.Proposals[0].Name != "cpu resource utilization (percentage of request)" || !d.Proposals[0].WithinTolerance {
		t.Errorf("cpu proposal = %+v", d.Proposals[0])
	}
	if d.Proposals[1].WithinTolerance {
		t.Errorf("rps proposal = %+v, far outside the tolerance", d.Proposals[1])
	}
	want := []v1alpha1.Adjustment{{Reason: "ScaleUpLimit", From: 1000, To: 6}}
	if len(d.Adjustments) != 1 || d.Adjustments[0].Reason != want[0].Reason || d.Adjustments[0].From != 1000 || d.Adjustments[0].To != 6 {
		t.Errorf("adjustments = %+v, want %+v", d.Adjustments, want)
	}
}

func TestErrorLabel(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"none", nil, "none"},
		{"spec", &specError{errors.New("invalid spec of HorizontalAutoscaler default/web: maxReplicas (0) must be at least 1")}, "spec"},
		{"spec wrapped", fmt.Errorf("reconciling: %w", &specError{errors.New("bad")}), "spec"},
		{"internal", errors.New("failed to query scale subresource"), "internal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := errorLabel(tc.err); got != tc.want {
				t.Errorf("errorLabel(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}

// TestReconcileLeavesTheCacheUnchanged: the reconcile works on a copy of
// the informer's object (source.Get returns the cache's own), so a
// reconcile that rescales and writes the status leaves the cache as it
// was for the watch to update.
func TestReconcileLeavesTheCacheUnchanged(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			w := world{scale: newScale(3, 3, "app=web"), pods: pods(2000, 2000, 2000), podMetrics: milliByPod(600, 1000, 1400)}
			f := newFixture(t, mode, w, newHPA("web", nil, 10, cpuUtilization(30)))
			cached, err := f.source.Get(ns, "web")
			must(t, err)
			before := cached.DeepCopy()
			must(t, f.reconcile("web"))
			if f.statusUpdates() != 1 || !slicesEqual(f.scaleUpdates, []int32{5}) {
				t.Fatalf("%d status writes and scale updates %v, want 1 and [5]", f.statusUpdates(), f.scaleUpdates)
			}
			if !reflect.DeepEqual(cached.Runtime(), before.Runtime()) {
				t.Errorf("the reconcile changed the informer's object: %+v, was %+v", cached.Runtime(), before.Runtime())
			}
		})
	}
}
