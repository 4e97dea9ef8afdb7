package controller

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/autoscaler/source"
)

// conflictFixture is an autoscaler whose reconcile scales its target
// from 3 to 5 replicas (3 pods at 50% of their request, target 30%), and
// that target's scale, at resourceVersion 1.
func conflictFixture(t *testing.T, mode source.Mode) (*fixture, *autoscalingv1.Scale) {
	sc := newScale(3, 3, "app=web")
	sc.ResourceVersion = "1"
	f := newFixture(t, mode, world{scale: sc, pods: pods(2000, 2000, 2000), podMetrics: milliByPod(600, 1000, 1400)},
		newHPA("web", ptr.To[int32](1), 10, cpuUtilization(30)))
	return f, sc
}

// errScaleConflict is the API server's answer to a write of the target's
// scale at an old resourceVersion.
func errScaleConflict() error {
	return apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web",
		fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
}

// TestConflictOnScaleNeverWritesAStaleCount: someone (`kubectl scale`)
// writes the target's replicas between Tidal's read of /scale and its
// write, so the write answers 409 Conflict. Tidal must not write the count
// it decided from the stale read: the reconcile fails as upstream records
// a failed update (a FailedRescale event, AbleToScale=False with reason
// FailedUpdateScale) and is requeued, and the next reconcile reads the
// new replicas and decides again from them.
func TestConflictOnScaleNeverWritesAStaleCount(t *testing.T) {
	type write struct {
		replicas        int32
		resourceVersion string
		accepted        bool
	}
	tests := []struct {
		name string
		// kubectl is the replicas someone else writes while Tidal decides.
		kubectl int32
		// wantNext are the writes of the reconcile after the conflict.
		wantNext []write
		// wantNextEvents are prefixes of that reconcile's events.
		wantNextEvents []string
	}{{
		// spec.replicas 0 disables autoscaling, as upstream: the stale
		// decision (5) would have turned the workload back on.
		name: "kubectl scale to 0 pauses the target", kubectl: 0,
	}, {
		// From 10 replicas the same metrics ask for fewer, and the event
		// says so: the decision is made again from the count read.
		name: "kubectl scale to 10 is decided again from 10", kubectl: 10,
		wantNext:       []write{{replicas: 5, resourceVersion: "2", accepted: true}},
		wantNextEvents: []string{"Normal SuccessfulRescale New size: 5; reason: All metrics below target"},
	}}
	for _, mode := range []source.Mode{source.ModeNative, source.ModeCRD} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/%s", mode, tt.name), func(t *testing.T) {
				f, sc := conflictFixture(t, mode)
				var writes []write
				f.scales.PrependReactor("update", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
					in := a.(k8stesting.UpdateAction).GetObject().(*autoscalingv1.Scale)
					if sc.ResourceVersion == "1" {
						// kubectl scale, just before Tidal's write.
						sc.Spec.Replicas, sc.ResourceVersion = tt.kubectl, "2"
					}
					w := write{replicas: in.Spec.Replicas, resourceVersion: in.ResourceVersion}
					if in.ResourceVersion != sc.ResourceVersion {
						writes = append(writes, w)
						return true, nil, errScaleConflict()
					}
					w.accepted = true
					writes = append(writes, w)
					sc.Spec.Replicas = in.Spec.Replicas
					out := sc.DeepCopy()
					return true, out, nil
				})

				err := f.reconcile("web")
				if err == nil || !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "failed to rescale") {
					t.Errorf("reconcile error = %v, want the conflict", err)
				}
				if want := []write{{replicas: 5, resourceVersion: "1"}}; !slices.Equal(writes, want) {
					t.Errorf("writes = %+v, want only the one refused, %+v: the stale count is never written again", writes, want)
				}
				if sc.Spec.Replicas != tt.kubectl {
					t.Errorf("the target has %d replicas, want kubectl's %d", sc.Spec.Replicas, tt.kubectl)
				}
				events := f.events()
				if len(events) != 1 || !strings.HasPrefix(events[0], "Warning FailedRescale New size: 5; reason: cpu resource utilization (percentage of request) above target; error: Operation cannot be fulfilled") {
					t.Errorf("events = %q, want one FailedRescale", events)
				}
				c := condition(f.stored("web").HPAStatus(), autoscalingv2.AbleToScale)
				if c == nil || c.Status != corev1.ConditionFalse || c.Reason != "FailedUpdateScale" {
					t.Errorf("AbleToScale = %+v, want False, FailedUpdateScale", c)
				}

				// The requeued reconcile reads the scale kubectl wrote.
				f.sync("web")
				writes = nil
				if err := f.reconcile("web"); err != nil {
					t.Fatalf("next reconcile: %v", err)
				}
				if !slices.Equal(writes, tt.wantNext) {
					t.Errorf("next reconcile wrote %+v, want %+v", writes, tt.wantNext)
				}
				events = f.events()
				if len(events) != len(tt.wantNextEvents) {
					t.Fatalf("next reconcile's events = %q, want %q", events, tt.wantNextEvents)
				}
				for i, want := range tt.wantNextEvents {
					if !strings.HasPrefix(events[i], want) {
						t.Errorf("event %d = %q, want %q", i, events[i], want)
					}
				}
			})
		}
	}
}

// TestConflictOnScaleWithTheSameCount: the target was written between
// Tidal's read of its scale and its write, but its count and selector are
// the ones the decision came from (the workload controller wrote its
// status, which the scale cache had not seen yet; or someone wrote the same
// count). The decision stands: it is written once more on a fresh read,
// and the rescale succeeds with no FailedRescale, as upstream's, which
// reads /scale fresh, would; conflicts on the fresh reads are retried as
// client-go's RetryOnConflict does (5 tries). Conflicts on every try, or a
// count or selector changed, fail the reconcile as any other conflict does.
func TestConflictOnScaleWithTheSameCount(t *testing.T) {
	tests := []struct {
		name string
		// change is what the other writer does to the target.
		change func(*autoscalingv1.Scale)
		// conflicts is how many writes are refused.
		conflicts  int
		wantWrites int
		wantErr    bool
		wantEvent  string
		wantCount  int32
	}{
		{name: "status only", change: func(*autoscalingv1.Scale) {}, conflicts: 1,
			wantWrites: 2, wantEvent: "Normal SuccessfulRescale New size: 5", wantCount: 5},
		{name: "the same count written", change: func(sc *autoscalingv1.Scale) { sc.Spec.Replicas = 3 }, conflicts: 1,
			wantWrites: 2, wantEvent: "Normal SuccessfulRescale New size: 5", wantCount: 5},
		{name: "refused three times", change: func(*autoscalingv1.Scale) {}, conflicts: 3,
			wantWrites: 4, wantEvent: "Normal SuccessfulRescale New size: 5", wantCount: 5},
		{name: "refused on every fresh read", change: func(*autoscalingv1.Scale) {}, conflicts: 100,
			wantWrites: 6, wantErr: true, wantEvent: "Warning FailedRescale New size: 5", wantCount: 3},
		{name: "the count changed after a conflict on a fresh read", change: func(sc *autoscalingv1.Scale) {
			if sc.ResourceVersion != "1" { // the second writer: kubectl scale
				sc.Spec.Replicas = 4
			}
		}, conflicts: 2, wantWrites: 2, wantErr: true, wantEvent: "Warning FailedRescale New size: 5", wantCount: 4},
		{name: "selector changed", change: func(sc *autoscalingv1.Scale) { sc.Status.Selector = "app=web,track=canary" }, conflicts: 1,
			wantWrites: 1, wantErr: true, wantEvent: "Warning FailedRescale New size: 5", wantCount: 3},
	}
	for _, mode := range []source.Mode{source.ModeNative, source.ModeCRD} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/%s", mode, tt.name), func(t *testing.T) {
				f, sc := conflictFixture(t, mode)
				writes := 0
				f.scales.PrependReactor("update", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
					in := a.(k8stesting.UpdateAction).GetObject().(*autoscalingv1.Scale)
					writes++
					if writes <= tt.conflicts {
						// Written by someone else just before Tidal's write.
						tt.change(sc)
						sc.ResourceVersion = fmt.Sprint(writes + 1)
					}
					if in.ResourceVersion != sc.ResourceVersion {
						return true, nil, errScaleConflict()
					}
					sc.Spec.Replicas = in.Spec.Replicas
					return true, sc.DeepCopy(), nil
				})
				err := f.reconcile("web")
				if gotErr := err != nil; gotErr != tt.wantErr {
					t.Errorf("reconcile error = %v, want an error: %v", err, tt.wantErr)
				}
				if writes != tt.wantWrites {
					t.Errorf("%d writes, want %d", writes, tt.wantWrites)
				}
				if sc.Spec.Replicas != tt.wantCount {
					t.Errorf("the target has %d replicas, want %d", sc.Spec.Replicas, tt.wantCount)
				}
				if events := f.events(); len(events) != 1 || !strings.HasPrefix(events[0], tt.wantEvent) {
					t.Errorf("events = %q, want one %q", events, tt.wantEvent)
				}
			})
		}
	}
}

// countingMapper counts the questions asked of a RESTMapper; it knows
// more kinds once reset (discovery refreshed), and calls whileAsking, if
// set, in the middle of its first question.
type countingMapper struct {
	meta.RESTMapper
	asked, resets int
	afterReset    meta.RESTMapper
	whileAsking   func()
}

func (m *countingMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	m.asked++
	if m.whileAsking != nil {
		f := m.whileAsking
		m.whileAsking = nil
		f()
	}
	return m.RESTMapper.RESTMappings(gk, versions...)
}

func (m *countingMapper) Reset() {
	m.resets++
	if m.afterReset != nil {
		m.RESTMapper = m.afterReset
	}
}

// TestMappingsAreKept: a kind's mappings are asked of a CountedMapper once
// until it is reset (the mapper allocates a NoMatch error per API group
// that lacks the kind), an unknown kind refreshes discovery each time it
// is asked for, a kind found by that refresh is kept from then on, and
// mappings asked while a reset happens are not kept past it.
func TestMappingsAreKept(t *testing.T) {
	deployment := schema.GroupKind{Group: "apps", Kind: "Deployment"}
	widget := schema.GroupKind{Group: "example.com", Kind: "Widget"}
	mapperOf := func(kinds ...schema.GroupVersionKind) meta.RESTMapper {
		var gvs []schema.GroupVersion
		for _, k := range kinds {
			gvs = append(gvs, k.GroupVersion())
		}
		m := meta.NewDefaultRESTMapper(gvs)
		for _, k := range kinds {
			m.Add(k, meta.RESTScopeNamespace)
		}
		return m
	}
	withWidgets := mapperOf(appsv1.SchemeGroupVersion.WithKind("Deployment"), widget.WithVersion("v1"))
	// reset stands in the asks for the 30 s refresh of discovery.
	reset := schema.GroupKind{Kind: "(reset)"}
	tests := []struct {
		name string
		// asks are the kinds asked for, in order, and the resets between.
		asks []schema.GroupKind
		// installed: the Widget CRD is found once discovery is refreshed.
		installed bool
		// uncounted: the scaler is given the mapper itself, not a
		// CountedMapper; resetWhileAsking: the first ask races a reset.
		uncounted, resetWhileAsking bool
		// wantAsked and wantResets count the mapper's questions and
		// discovery refreshes; wantErrs counts the failed asks.
		wantAsked, wantResets, wantErrs int
	}{
		{name: "a known kind is asked once until the mapper is reset", asks: []schema.GroupKind{deployment, deployment, deployment}, wantAsked: 1},
		{name: "a known kind is asked again after a reset", asks: []schema.GroupKind{deployment, deployment, reset, deployment, deployment}, wantAsked: 2, wantResets: 1},
		{name: "mappings asked across a reset are not kept", asks: []schema.GroupKind{deployment, deployment, deployment}, resetWhileAsking: true, wantAsked: 2, wantResets: 1},
		{name: "an unknown kind refreshes discovery each time", asks: []schema.GroupKind{widget, widget}, wantAsked: 4, wantResets: 2, wantErrs: 2},
		{name: "a kind found by the refresh is kept", asks: []schema.GroupKind{widget, widget}, installed: true, wantAsked: 2, wantResets: 1},
		{name: "a mapper that does not count its resets is asked each time", asks: []schema.GroupKind{deployment, deployment}, uncounted: true, wantAsked: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &countingMapper{RESTMapper: mapperOf(appsv1.SchemeGroupVersion.WithKind("Deployment"))}
			if tt.installed {
				m.afterReset = withWidgets
			}
			counted := NewCountedMapper(m)
			s := &scaler{mapper: counted}
			if tt.uncounted {
				s.mapper = m
			}
			if tt.resetWhileAsking {
				m.whileAsking = counted.Reset
			}
			errs := 0
			for _, gk := range tt.asks {
				if gk == reset {
					counted.Reset()
					continue
				}
				got, err := s.mappings(gk)
				if err != nil {
					errs++
					continue
				}
				if len(got) != 1 || got[0].GroupVersionKind.Kind != gk.Kind {
					t.Errorf("mappings of %v = %v", gk, got)
				}
			}
			if m.asked != tt.wantAsked || m.resets != tt.wantResets || errs != tt.wantErrs {
				t.Errorf("asked %d, reset %d, %d errors; want %d, %d, %d", m.asked, m.resets, errs, tt.wantAsked, tt.wantResets, tt.wantErrs)
			}
		})
	}
}
