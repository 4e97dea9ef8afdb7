package extensions

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/autoscaler/status"
)

// rolloutLabel is a node label no node has until the test sets it on the
// kwok node: the rollout's new pods select it, so they stay Pending (kwok
// makes a pod Ready only once it is scheduled) and the rollout, with
// maxUnavailable 0, stays in progress until the label is set.
const rolloutLabel = "e2e.tidal.dev/rollout"

// TestRolloutHold: with holdScaleDownDuringRollout, while the Deployment's
// rollout is in progress a scale-down the metric proposes (4→2) is held,
// sync after sync, with ScaleDownHeld=True/RolloutInProgress and a
// ScaleDownHeld event each sync; a scale-up (4→6) is written; and once the
// new pods can run and the rollout completes, the held scale-down (6→2)
// is written.
func TestRolloutHold(t *testing.T) {
	start(t)
	ctx := testContext(t)
	const ns = "rollout"
	deploy(ctx, t, ns, 4, func(d *appsv1.Deployment) {
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
			MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromInt32(1)),
		}}
	})
	setQueue(ns, 4*perPod)
	createAutoscaler(ctx, t, newAutoscaler(ns, func(ha *v1alpha1.HorizontalAutoscaler) { ha.Spec.HoldScaleDownDuringRollout = true }))
	waitState(ctx, t, ns, "a sync with no rollout (ScaleDownHeld=False/RolloutComplete)", func(s state) bool {
		return conditionIs(s.ha, status.ScaleDownHeldCondition, corev1.ConditionFalse, "RolloutComplete") && s.replicas == 4
	})

	// A new template whose pods cannot be scheduled yet.
	t.Cleanup(func() {
		if err := env.h.SetNodeLabel(context.Background(), env.h.NodeName, rolloutLabel, nil); err != nil {
			t.Error(err)
		}
	})
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"nodeSelector":{%q:"yes"}}}}}`, rolloutLabel)
	_, err := env.h.Client.AppsV1().Deployments(ns).Patch(ctx, app, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	must(t, err)
	waitUntil(ctx, t, "the rollout started, its new pod pending", func() (bool, string) {
		d, err := env.h.Client.AppsV1().Deployments(ns).Get(ctx, app, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st := d.Status
		return st.ObservedGeneration == d.Generation && st.UpdatedReplicas == 1 && st.Replicas == 5,
			fmt.Sprintf("generation %d observed %d, replicas %d updated %d available %d", d.Generation, st.ObservedGeneration, st.Replicas, st.UpdatedReplicas, st.AvailableReplicas)
	})

	// 20/10 proposes 2: held while the rollout is in progress.
	setQueue(ns, 2*perPod)
	const held = "the scale-down 4→2 is held while the rollout is in progress: "
	ev := waitEvents(ctx, t, ns, "ScaleDownHeld", held, 3)
	s, err := observe(ctx, ns)
	must(t, err)
	if s.replicas != 4 {
		t.Errorf("after 3 syncs that held the scale-down, the Deployment has spec.replicas %d, want 4", s.replicas)
	}
	c := condition(s.ha, status.ScaleDownHeldCondition)
	if c == nil || c.Status != corev1.ConditionTrue || c.Reason != "RolloutInProgress" || !strings.HasPrefix(c.Message, held) ||
		!strings.Contains(c.Message, `waiting for deployment "web" rollout to finish`) {
		t.Errorf("condition ScaleDownHeld %+v, want True/RolloutInProgress %q and kubectl's words", c, held)
	}
	if !held4to2(s.ha) {
		t.Errorf("status.tidal.decision %+v, want a RolloutInProgress adjustment 2→4", s.ha.Status.Tidal)
	}
	if ev.Type != corev1.EventTypeNormal || ev.Message != c.Message {
		t.Errorf("ScaleDownHeld event %s %q, want Normal with the condition's message", ev.Type, ev.Message)
	}

	// 60/10 proposes 6: a scale-up goes through during the rollout.
	setQueue(ns, 6*perPod)
	waitState(ctx, t, ns, "scale-up to 6 during the rollout", func(s state) bool { return s.replicas == 6 })
	setQueue(ns, 2*perPod)
	waitEvents(ctx, t, ns, "ScaleDownHeld", "the scale-down 6→2 is held", 1)
	s, err = observe(ctx, ns)
	must(t, err)
	if s.replicas != 6 {
		t.Errorf("a held scale-down 6→2 left spec.replicas %d, want 6", s.replicas)
	}

	// The new pods can run: the rollout completes, the scale-down follows.
	must(t, env.h.SetNodeLabel(ctx, env.h.NodeName, rolloutLabel, ptr.To("yes")))
	waitState(ctx, t, ns, "scale-down to 2 once the rollout completed", func(s state) bool {
		return s.replicas == 2
	})
	_, err = env.h.WaitDeploymentReady(ctx, ns, app, timeout)
	must(t, err)
	waitState(ctx, t, ns, "ScaleDownHeld=False/RolloutComplete", func(s state) bool {
		return conditionIs(s.ha, status.ScaleDownHeldCondition, corev1.ConditionFalse, "RolloutComplete") && s.replicas == 2
	})
}

// held4to2 reports whether the decision recorded the hold of 2 at 4.
func held4to2(ha *v1alpha1.HorizontalAutoscaler) bool {
	if ha.Status.Tidal == nil || ha.Status.Tidal.Decision == nil {
		return false
	}
	return slices.ContainsFunc(ha.Status.Tidal.Decision.Adjustments, func(a v1alpha1.Adjustment) bool {
		return a.Reason == "RolloutInProgress" && a.From == 2 && a.To == 4
	})
}
