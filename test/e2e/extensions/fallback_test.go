package extensions

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/autoscaler/status"
)

// TestFallback: with fallback {failureThreshold 3, replicas 6, static},
// a metric that stops answering takes the Deployment from 2 to 6 after 3
// failed syncs, with Fallback=True naming the metric and a Warning event;
// the first sync that reads the metric again leaves fallback
// (Fallback=False, a FallbackEnded event) and scales on the metric (to 3).
// Then with currentReplicasIfHigher and fallback.replicas 2, below the
// current 3, the metric failing again changes nothing.
func TestFallback(t *testing.T) {
	start(t)
	ctx := testContext(t)
	const ns = "fallback"
	deploy(ctx, t, ns, 2, nil)
	setQueue(ns, 2*perPod)
	createAutoscaler(ctx, t, newAutoscaler(ns, func(ha *v1alpha1.HorizontalAutoscaler) {
		ha.Spec.Fallback = &v1alpha1.Fallback{FailureThreshold: 3, Replicas: 6, Behavior: v1alpha1.FallbackStatic}
	}))
	waitState(ctx, t, ns, "a healthy sync (Fallback=False/MetricsAvailable)", func(s state) bool {
		return conditionIs(s.ha, status.FallbackCondition, corev1.ConditionFalse, "MetricsAvailable") && s.replicas == 2
	})

	setQueue(ns, -1)
	// Before the third failed sync the count stays: every status written
	// with fallback pending (False/MetricsFailing) says 2 current and 2
	// desired, and so does the Deployment.
	var pending []string
	s := waitState(ctx, t, ns, "fallback to 6 replicas", func(s state) bool {
		if !conditionIs(s.ha, status.FallbackCondition, corev1.ConditionFalse, "MetricsFailing") {
			return s.replicas == 6 && conditionIs(s.ha, status.FallbackCondition, corev1.ConditionTrue, "AllMetricsFailed")
		}
		pending = append(pending, fmt.Sprintf("%d failures: %d replicas", failures(s.ha), s.replicas))
		if st := s.ha.Status; st.CurrentReplicas != 2 || st.DesiredReplicas != 2 {
			t.Errorf("fallback pending, yet the status says current %d desired %d: %s", st.CurrentReplicas, st.DesiredReplicas, s)
		}
		if s.replicas != 2 {
			scaledByFallback(ctx, t, ns, s)
		}
		return false
	})
	t.Logf("states seen while fallback was pending: %d (%s)", len(pending), strings.Join(slices.Compact(pending), ", "))
	c := condition(s.ha, status.FallbackCondition)
	for _, want := range []string{"every metric failed in 3 consecutive syncs (failureThreshold 3)", "external metric " + queue, "the fallback count is 6 (behavior static, replicas 6)"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("Fallback condition message %q does not say %q", c.Message, want)
		}
	}
	if n := failures(s.ha); n != 3 {
		t.Errorf("status.tidal.metricFailures %d, want 3", n)
	}
	ev := waitEvents(ctx, t, ns, "Fallback", "every metric failed in 3 consecutive syncs", 1)
	if ev.Type != corev1.EventTypeWarning || ev.Message != c.Message {
		t.Errorf("Fallback event %s %q, want Warning with the condition's message %q", ev.Type, ev.Message, c.Message)
	}

	// Healthy again: 30/10 proposes 3, written at once (no stabilization).
	setQueue(ns, 3*perPod)
	waitState(ctx, t, ns, "fallback left, scaled on the metric to 3", func(s state) bool {
		return s.replicas == 3 && conditionIs(s.ha, status.FallbackCondition, corev1.ConditionFalse, "MetricsAvailable")
	})
	waitEvents(ctx, t, ns, "FallbackEnded", "a metric was computed again", 1)

	// currentReplicasIfHigher with replicas 2 below the current 3: fallback
	// applies and keeps 3.
	patchAutoscaler(ctx, t, ns, `{"fallback":{"failureThreshold":3,"replicas":2,"behavior":"currentReplicasIfHigher"}}`)
	setQueue(ns, -1)
	s = waitState(ctx, t, ns, "fallback active with currentReplicasIfHigher", func(s state) bool {
		return conditionIs(s.ha, status.FallbackCondition, corev1.ConditionTrue, "AllMetricsFailed")
	})
	c = condition(s.ha, status.FallbackCondition)
	if want := "the fallback count is 3 (behavior currentReplicasIfHigher, replicas 2)"; !strings.Contains(c.Message, want) {
		t.Errorf("Fallback condition message %q does not say %q", c.Message, want)
	}
	// Two more failed syncs (the Fallback condition message is unchanged,
	// so count the autoscaler's reconciles) leave the count at 3.
	waitSyncs(ctx, t, 2)
	s, err := observe(ctx, ns)
	must(t, err)
	if s.replicas != 3 || s.ha.Status.DesiredReplicas != 3 {
		t.Errorf("with currentReplicasIfHigher and fallback.replicas 2 below the current 3: %s; want 3 kept", s)
	}
}

// scaledByFallback checks a pending state whose Deployment was not at 2:
// the two objects are read one after the other, and the autoscaler writes
// the scale a few milliseconds before the status of the same reconcile, so
// a read between the two writes sees the new count beside the old status.
// That is what happened only if the next status written is the one that
// entered fallback, written by a reconcile that read 2 and wanted 6; a
// scale made while fallback was pending fails here.
func scaledByFallback(ctx context.Context, t *testing.T, ns string, seen state) {
	t.Helper()
	var next *v1alpha1.HorizontalAutoscaler
	waitUntil(ctx, t, "the status written after "+seen.ha.ResourceVersion, func() (bool, string) {
		ha, err := getAutoscaler(ctx, ns, app)
		if err != nil {
			return false, err.Error()
		}
		next = ha
		return ha.ResourceVersion != seen.ha.ResourceVersion, describe(ha)
	})
	st := next.Status
	if !conditionIs(next, status.FallbackCondition, corev1.ConditionTrue, "AllMetricsFailed") || st.CurrentReplicas != 2 || st.DesiredReplicas != 6 {
		t.Errorf("fallback pending, yet the Deployment has %d replicas: %s; the next status is not the one entering fallback from 2 to 6: %s", seen.replicas, seen, describe(next))
	}
}

// failures is status.tidal.metricFailures.
func failures(ha *v1alpha1.HorizontalAutoscaler) int32 {
	if ha.Status.Tidal == nil {
		return 0
	}
	return ha.Status.Tidal.MetricFailures
}
