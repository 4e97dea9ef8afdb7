package controller

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/autoscaler/decision"
	"github.com/tidal-autoscaler/tidal/autoscaler/source"
	"github.com/tidal-autoscaler/tidal/autoscaler/status"
)

// cpuScaleDown: 4 pods requesting 1 cpu use 100m, 900m, 50m and 400m
// (36% on average); a target of 80% proposes 2. Each pod's deletion cost
// is its usage in thousandths of its target (800m): 125, 1125, 63, 500.
// No scale-down stabilization, so that the first sync scales down.
func cpuScaleDown() (*autoscalingv2.HorizontalPodAutoscaler, world) {
	return noDownscaleWindow(newHPA("web", ptr.To[int32](1), 10, cpuUtilization(80))),
		world{scale: newScale(4, 4, "app=web"), pods: pods(1000, 1000, 1000, 1000), podMetrics: milliByPod(100, 900, 50, 400)}
}

func noDownscaleWindow(hpa *autoscalingv2.HorizontalPodAutoscaler) *autoscalingv2.HorizontalPodAutoscaler {
	hpa.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0)}}
	return hpa
}

var wantCPUCosts = map[string]string{"web-0": "125", "web-1": "1125", "web-2": "63", "web-3": "500"}

func selectBy(typ autoscalingv2.MetricSourceType, name string) *v1alpha1.ScaleDownPodSelection {
	return &v1alpha1.ScaleDownPodSelection{Metric: v1alpha1.PodSelectionMetric{Type: typ, Name: name}}
}

// podPatches are the pod patches the fixture's clientset received: pod
// name -> the annotation value written (nil: removed), in order.
type podPatch struct {
	pod   string
	value *string
	// scalesBefore is the number of /scale writes made before it.
	scalesBefore int
}

func recordPodPatches(f *fixture) *[]podPatch {
	var out []podPatch
	f.kube.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pa := a.(k8stesting.PatchAction)
		if pa.GetPatchType() != "application/merge-patch+json" {
			f.t.Errorf("patch type %s, want a merge patch", pa.GetPatchType())
		}
		var body struct {
			Metadata struct {
				Annotations map[string]*string `json:"annotations"`
			} `json:"metadata"`
		}
		must(f.t, json.Unmarshal(pa.GetPatch(), &body))
		if len(body.Metadata.Annotations) != 1 {
			f.t.Errorf("patch %s writes more than the deletion cost", pa.GetPatch())
		}
		out = append(out, podPatch{pod: pa.GetName(), value: body.Metadata.Annotations[decision.DeletionCostAnnotation], scalesBefore: len(f.scaleUpdates)})
		return false, nil, nil // the clientset applies it
	})
	return &out
}

func costsOf(ps []podPatch) map[string]string {
	m := map[string]string{}
	for _, p := range ps {
		v := "<removed>"
		if p.value != nil {
			v = *p.value
		}
		m[p.pod] = v
	}
	return m
}

// TestPodSelectionSetsCostsBeforeScaleDown: before writing the smaller
// count, every pod gets its cost (a merge patch of the annotation alone),
// the least loaded the lowest; pods already holding their cost are not
// written, and a stale cost of a pod without a value is removed.
func TestPodSelectionSetsCostsBeforeScaleDown(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			hpa, w := cpuScaleDown()
			w.tidal.ScaleDownPodSelection = selectBy(autoscalingv2.ResourceMetricSourceType, "cpu")
			f := newFixture(t, mode, w, hpa)
			patches := recordPodPatches(f)
			must(t, f.reconcile("web"))
			if !slices.Equal(f.scaleUpdates, []int32{2}) {
				t.Fatalf("scale updates %v, want [2]", f.scaleUpdates)
			}
			if got := costsOf(*patches); !mapsEqual(got, wantCPUCosts) {
				t.Errorf("costs written %v, want %v", got, wantCPUCosts)
			}
			for _, p := range *patches {
				if p.scalesBefore != 0 {
					t.Errorf("pod %s patched after the /scale write", p.pod)
				}
			}
			for name, want := range wantCPUCosts {
				p, err := f.kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
				must(t, err)
				if p.Annotations[decision.DeletionCostAnnotation] != want {
					t.Errorf("pod %s has cost %q, want %q", name, p.Annotations[decision.DeletionCostAnnotation], want)
				}
			}
			st := f.stored("web").HPAStatus()
			wantCond(t, st, status.PodSelectionCondition, corev1.ConditionTrue, "Applies", "cpu resource utilization")
			if ev := f.events(); !hasEvent(ev, "Normal PodDeletionCost before scaling 4→2, set "+decision.DeletionCostAnnotation+" on 4 pods") {
				t.Errorf("events %v, want the PodDeletionCost event", ev)
			}

			// Unchanged costs are not written again; a pod without a
			// sample loses its stale cost.
			hpa, w = cpuScaleDown()
			w.tidal.ScaleDownPodSelection = selectBy(autoscalingv2.ResourceMetricSourceType, "cpu")
			w.pods = append(w.pods, newPod("web-4", 1000))
			w.pods[0].Annotations = map[string]string{decision.DeletionCostAnnotation: "125"}
			w.pods[1].Annotations = map[string]string{decision.DeletionCostAnnotation: "1125"}
			w.pods[2].Annotations = map[string]string{decision.DeletionCostAnnotation: "7"}
			w.pods[4].Annotations = map[string]string{decision.DeletionCostAnnotation: "900"}
			w.scale = newScale(5, 5, "app=web")
			g := newFixture(t, mode, w, hpa)
			patches = recordPodPatches(g)
			must(t, g.reconcile("web"))
			if want := map[string]string{"web-2": "63", "web-3": "500", "web-4": "<removed>"}; !mapsEqual(costsOf(*patches), want) {
				t.Errorf("costs written %v, want %v", costsOf(*patches), want)
			}
			if len(g.scaleUpdates) != 1 || g.scaleUpdates[0] >= 5 {
				t.Errorf("scale updates %v, want one scale-down", g.scaleUpdates)
			}
		})
	}
}

// TestPodSelectionPodsMetric: a Pods metric's per-pod values, in
// thousandths of its averageValue target.
func TestPodSelectionPodsMetric(t *testing.T) {
	hpa := noDownscaleWindow(newHPA("web", ptr.To[int32](1), 10, cpuUtilization(80), podsMetric("rps", "10")))
	w := world{scale: newScale(4, 4, "app=web"), pods: pods(1000, 1000, 1000, 1000),
		podMetrics: milliByPod(100, 100, 100, 100), customPods: milliByPod(2000, 9000, 0, 4000)}
	w.tidal.ScaleDownPodSelection = selectBy(autoscalingv2.PodsMetricSourceType, "rps")
	f := newFixture(t, source.ModeCRD, w, hpa)
	patches := recordPodPatches(f)
	must(t, f.reconcile("web"))
	if !slices.Equal(f.scaleUpdates, []int32{2}) {
		t.Fatalf("scale updates %v, want [2]", f.scaleUpdates)
	}
	if want := map[string]string{"web-0": "200", "web-1": "900", "web-2": "0", "web-3": "400"}; !mapsEqual(costsOf(*patches), want) {
		t.Errorf("costs written %v, want %v", costsOf(*patches), want)
	}
}

// TestPodSelectionOnlyOnScaleDown: no pod is written in a sync that does
// not scale down, nor in dry run.
func TestPodSelectionOnlyOnScaleDown(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func() (*autoscalingv2.HorizontalPodAutoscaler, world)
	}{
		{"scale up", cpuScaleUp},
		{"dry run", func() (*autoscalingv2.HorizontalPodAutoscaler, world) {
			hpa, w := cpuScaleDown()
			w.tidal.DryRun = true
			return hpa, w
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hpa, w := tc.build()
			w.tidal.ScaleDownPodSelection = selectBy(autoscalingv2.ResourceMetricSourceType, "cpu")
			f := newFixture(t, source.ModeCRD, w, hpa)
			patches := recordPodPatches(f)
			_ = f.reconcile("web")
			if len(*patches) != 0 {
				t.Errorf("pods patched: %v", costsOf(*patches))
			}
			wantCond(t, f.stored("web").HPAStatus(), status.PodSelectionCondition, corev1.ConditionTrue, "Applies")
		})
	}
}

// TestPodSelectionBadInput: a metric that is not a Resource or Pods metric
// of spec.metrics is a condition and a Warning event naming it and where
// it is set; the scale-down proceeds without writing pods.
func TestPodSelectionBadInput(t *testing.T) {
	for _, tc := range []struct {
		name      string
		selection *v1alpha1.ScaleDownPodSelection
		msgHas    []string
	}{
		{"not in spec.metrics", selectBy(autoscalingv2.ResourceMetricSourceType, "memory"), []string{`Resource metric "memory" is not among spec.metrics`, "Resource cpu"}},
		{"a Pods metric of another name", selectBy(autoscalingv2.PodsMetricSourceType, "cpu"), []string{`Pods metric "cpu"`}},
		{"not a per-pod type", selectBy(autoscalingv2.ExternalMetricSourceType, "queue"), []string{`"External" cannot select pods`}},
	} {
		for _, mode := range modes {
			t.Run(tc.name+"/"+string(mode), func(t *testing.T) {
				hpa, w := cpuScaleDown()
				w.tidal.ScaleDownPodSelection = tc.selection
				f := newFixture(t, mode, w, hpa)
				patches := recordPodPatches(f)
				must(t, f.reconcile("web"))
				if len(*patches) != 0 {
					t.Errorf("pods patched: %v", costsOf(*patches))
				}
				if !slices.Equal(f.scaleUpdates, []int32{2}) {
					t.Errorf("scale updates %v, want [2]", f.scaleUpdates)
				}
				where := "spec.scaleDownPodSelection.metric"
				if mode == source.ModeNative {
					where = source.ScaleDownPodSelectionAnnotation
				}
				wantCond(t, f.stored("web").HPAStatus(), status.PodSelectionCondition, corev1.ConditionFalse, "InvalidMetric", append([]string{where}, tc.msgHas...)...)
				ev := f.events()
				if !hasEvent(ev, "Warning InvalidPodSelection") || !strings.Contains(strings.Join(ev, "\n"), where) {
					t.Errorf("events %v, want InvalidPodSelection naming %s", ev, where)
				}
			})
		}
	}

	// An unreadable annotation.
	hpa, w := cpuScaleDown()
	hpa.Annotations = map[string]string{source.ScaleDownPodSelectionAnnotation: "cpu"}
	f := newFixture(t, source.ModeNative, w, hpa)
	patches := recordPodPatches(f)
	must(t, f.reconcile("web"))
	if len(*patches) != 0 {
		t.Errorf("pods patched: %v", costsOf(*patches))
	}
	wantCond(t, f.stored("web").HPAStatus(), status.PodSelectionCondition, corev1.ConditionFalse, "InvalidPodSelection", source.ScaleDownPodSelectionAnnotation)
	if ev := f.events(); !hasEvent(ev, "Warning InvalidPodSelection annotation "+source.ScaleDownPodSelectionAnnotation) {
		t.Errorf("events %v", ev)
	}
}

// withStatefulSetTarget points the fixture's autoscalers at a StatefulSet
// "web" whose scale is w.scale.
func withStatefulSetTarget(f *fixture, w world) {
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{appsv1.SchemeGroupVersion})
	mapper.Add(appsv1.SchemeGroupVersion.WithKind("StatefulSet"), meta.RESTScopeNamespace)
	f.ctrl.r.scales.mapper = mapper
	f.scales.AddReactor("get", "statefulsets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, w.scale.DeepCopy(), nil
	})
	f.scales.AddReactor("update", "statefulsets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sc := a.(k8stesting.UpdateAction).GetObject().(*autoscalingv1.Scale)
		f.scaleUpdates = append(f.scaleUpdates, sc.Spec.Replicas)
		return true, sc, nil
	})
}

func statefulSetHPA(hpa *autoscalingv2.HorizontalPodAutoscaler) *autoscalingv2.HorizontalPodAutoscaler {
	hpa.Spec.ScaleTargetRef.Kind = "StatefulSet"
	return hpa
}

// TestPodSelectionNotApplicable: a target that is not a Deployment or
// ReplicaSet gets a condition and event saying pod selection does not
// apply, and its pods are not written.
func TestPodSelectionNotApplicable(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			hpa, w := cpuScaleDown()
			w.tidal.ScaleDownPodSelection = selectBy(autoscalingv2.ResourceMetricSourceType, "cpu")
			f := newFixture(t, mode, w, statefulSetHPA(hpa))
			withStatefulSetTarget(f, w)
			patches := recordPodPatches(f)
			must(t, f.reconcile("web"))
			if len(*patches) != 0 || !slices.Equal(f.scaleUpdates, []int32{2}) {
				t.Errorf("patches %v, scale updates %v; want none and [2]", costsOf(*patches), f.scaleUpdates)
			}
			wantCond(t, f.stored("web").HPAStatus(), status.PodSelectionCondition, corev1.ConditionFalse, "NotApplicable", "StatefulSet")
			if ev := f.events(); !hasEvent(ev, "Warning PodSelectionNotApplicable pod selection does not apply to a StatefulSet") {
				t.Errorf("events %v", ev)
			}
		})
	}
}

// TestPodSelectionRemovedWhenUnset: the condition goes with the field.
func TestPodSelectionRemovedWhenUnset(t *testing.T) {
	hpa, w := cpuScaleUp()
	w.tidal.ScaleDownPodSelection = selectBy(autoscalingv2.ResourceMetricSourceType, "cpu")
	w.tidal.HoldScaleDownDuringRollout = true
	f := newFixture(t, source.ModeCRD, w, hpa)
	f.ctrl.r.deployment = rolloutOf(nil)
	must(t, f.reconcile("web"))
	f.sync("web")
	st := f.stored("web").HPAStatus()
	if condition(st, status.PodSelectionCondition) == nil || condition(st, status.ScaleDownHeldCondition) == nil {
		t.Fatalf("conditions %+v, want PodSelection and ScaleDownHeld", st.Conditions)
	}
	ha := f.stored("web").Runtime().(*v1alpha1.HorizontalAutoscaler)
	ha.Spec.ScaleDownPodSelection, ha.Spec.HoldScaleDownDuringRollout = nil, false
	must(t, f.source.Informer().GetIndexer().Update(ha))
	w.scale.Spec.Replicas = f.scaleUpdates[len(f.scaleUpdates)-1]
	must(t, f.reconcile("web"))
	st = f.stored("web").HPAStatus()
	if condition(st, status.PodSelectionCondition) != nil || condition(st, status.ScaleDownHeldCondition) != nil {
		t.Errorf("conditions %+v after unsetting both", st.Conditions)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
