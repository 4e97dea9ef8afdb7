package controller

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/autoscaler/source"
	"github.com/tidal-autoscaler/tidal/autoscaler/status"
)

// rolloutOf is a reconciler.deployment that answers d (nil: unknown).
func rolloutOf(d *appsv1.Deployment) func(string, string) (*appsv1.Deployment, bool) {
	return func(namespace, name string) (*appsv1.Deployment, bool) {
		if d == nil || namespace != ns || name != d.Name {
			return nil, false
		}
		return d, true
	}
}

// rollingDeployment is web with replicas pods, updated of them updated.
func rollingDeployment(replicas, updated int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, Generation: 2},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(replicas)},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: replicas, UpdatedReplicas: updated,
			AvailableReplicas: replicas},
	}
}

// TestHoldScaleDownDuringRollout: a scale-down decided while the rollout
// is in progress keeps the count (condition, event, status.tidal
// adjustment), and goes through once the rollout is complete; a scale-up
// is never held.
func TestHoldScaleDownDuringRollout(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			hpa, w := cpuScaleDown()
			w.tidal.HoldScaleDownDuringRollout = true
			f := newFixture(t, mode, w, hpa)
			d := rollingDeployment(4, 2)
			f.ctrl.r.deployment = rolloutOf(d)
			must(t, f.reconcile("web"))
			if len(f.scaleUpdates) != 0 {
				t.Fatalf("scale updates %v during the rollout, want none", f.scaleUpdates)
			}
			stored := f.stored("web")
			st := stored.HPAStatus()
			wantCond(t, st, status.ScaleDownHeldCondition, corev1.ConditionTrue, "RolloutInProgress", "4→2", "2 out of 4 new replicas have been updated")
			if st.DesiredReplicas != 4 {
				t.Errorf("desiredReplicas %d, want 4 (held)", st.DesiredReplicas)
			}
			if ev := f.events(); !hasEvent(ev, "Normal ScaleDownHeld the scale-down 4→2 is held") {
				t.Errorf("events %v", ev)
			}
			f.sync("web")

			// The rollout completes: the scale-down goes through.
			d.Status.UpdatedReplicas = 4
			must(t, f.reconcile("web"))
			if !slices.Equal(f.scaleUpdates, []int32{2}) {
				t.Errorf("scale updates %v after the rollout, want [2]", f.scaleUpdates)
			}
			wantCond(t, f.stored("web").HPAStatus(), status.ScaleDownHeldCondition, corev1.ConditionFalse, "RolloutComplete", "successfully rolled out")

			// A scale-up during a rollout is not held.
			hpa, w = cpuScaleUp()
			w.tidal.HoldScaleDownDuringRollout = true
			g := newFixture(t, mode, w, hpa)
			g.ctrl.r.deployment = rolloutOf(rollingDeployment(3, 1))
			must(t, g.reconcile("web"))
			if !slices.Equal(g.scaleUpdates, []int32{5}) {
				t.Errorf("scale-up during a rollout: scale updates %v, want [5]", g.scaleUpdates)
			}
			wantCond(t, g.stored("web").HPAStatus(), status.ScaleDownHeldCondition, corev1.ConditionFalse, "NoScaleDown")
		})
	}
}

// TestHoldScaleDownExplained: status.tidal.decision says the scale-down
// was held.
func TestHoldScaleDownExplained(t *testing.T) {
	hpa, w := cpuScaleDown()
	w.tidal.HoldScaleDownDuringRollout = true
	f := newFixture(t, source.ModeCRD, w, hpa)
	f.ctrl.r.deployment = rolloutOf(rollingDeployment(4, 2))
	must(t, f.reconcile("web"))
	why := f.stored("web").Runtime().(*v1alpha1.HorizontalAutoscaler).Status.Tidal
	if why == nil || why.Decision == nil {
		t.Fatalf("no status.tidal.decision")
	}
	adj := why.Decision.Adjustments
	if len(adj) == 0 || adj[len(adj)-1].Reason != "RolloutInProgress" || adj[len(adj)-1].From != 2 || adj[len(adj)-1].To != 4 || why.Decision.DesiredReplicas != 4 {
		t.Errorf("decision %+v, want a RolloutInProgress adjustment 2→4", why.Decision)
	}
}

// TestHoldScaleDownUnknownAndNotApplicable: an unknown rollout state holds
// a scale-down (RolloutUnknown); a target that is not a Deployment is
// never held (NotApplicable); an unreadable annotation is taken as set,
// with a Warning event.
func TestHoldScaleDownUnknownAndNotApplicable(t *testing.T) {
	hpa, w := cpuScaleDown()
	w.tidal.HoldScaleDownDuringRollout = true
	f := newFixture(t, source.ModeCRD, w, hpa)
	f.ctrl.r.deployment = rolloutOf(nil)
	must(t, f.reconcile("web"))
	if len(f.scaleUpdates) != 0 {
		t.Errorf("unknown rollout: scale updates %v", f.scaleUpdates)
	}
	wantCond(t, f.stored("web").HPAStatus(), status.ScaleDownHeldCondition, corev1.ConditionTrue, "RolloutUnknown")

	hpa, w = cpuScaleDown()
	w.tidal.HoldScaleDownDuringRollout = true
	g := newFixture(t, source.ModeCRD, w, statefulSetHPA(hpa))
	withStatefulSetTarget(g, w)
	g.ctrl.r.deployment = rolloutOf(rollingDeployment(4, 2))
	must(t, g.reconcile("web"))
	if !slices.Equal(g.scaleUpdates, []int32{2}) {
		t.Errorf("StatefulSet: scale updates %v, want [2]", g.scaleUpdates)
	}
	wantCond(t, g.stored("web").HPAStatus(), status.ScaleDownHeldCondition, corev1.ConditionFalse, "NotApplicable", "StatefulSet")

	hpa, w = cpuScaleDown()
	hpa.Annotations = map[string]string{source.HoldScaleDownDuringRolloutAnnotation: "yes"}
	h := newFixture(t, source.ModeNative, w, hpa)
	h.ctrl.r.deployment = rolloutOf(rollingDeployment(4, 2))
	must(t, h.reconcile("web"))
	if len(h.scaleUpdates) != 0 {
		t.Errorf("unreadable annotation: scale updates %v, want none (taken as set)", h.scaleUpdates)
	}
	wantCond(t, h.stored("web").HPAStatus(), status.ScaleDownHeldCondition, corev1.ConditionTrue, "RolloutInProgress", source.HoldScaleDownDuringRolloutAnnotation)
	if ev := h.events(); !hasEvent(ev, "Warning InvalidHoldScaleDownDuringRollout annotation "+source.HoldScaleDownDuringRolloutAnnotation) {
		t.Errorf("events %v", ev)
	}
}
