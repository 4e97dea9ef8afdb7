package status

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/tidal-autoscaler/tidal/autoscaler/decision"
)

func TestDryRunCondition(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		current, desired        int32
		reason, problem         string
		wantReason, wantMessage string
	}{
		{"would scale", 4, 9, "pods metric rps above target", "", "WouldScale", "dry run, /scale is not written: would scale 4→9: pods metric rps above target"},
		{"would keep", 4, 4, "", "", "WouldNotScale", "dry run, /scale is not written: would keep 4 replicas"},
		{"unreadable annotation", 4, 9, "x", "annotation is bad", "InvalidDryRun", "annotation is bad; dry run, /scale is not written: would scale 4→9: x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DryRun(tc.current, tc.desired, tc.reason, tc.problem)
			if c.Type != DryRunCondition || c.Status != corev1.ConditionTrue || c.Reason != tc.wantReason || c.Message != tc.wantMessage {
				t.Errorf("got %+v, want %s %q", c, tc.wantReason, tc.wantMessage)
			}
		})
	}
}

func TestFallbackConditions(t *testing.T) {
	f := decision.Fallback{FailureThreshold: 3, Replicas: 12}
	failing := []string{"pods metric rps: no data", "cpu resource utilization (percentage of request): no metrics"}
	for _, tc := range []struct {
		name       string
		c          decision.Condition
		wantStatus corev1.ConditionStatus
		wantReason string
		wantHas    []string
	}{
		{"active", FallbackActive(f, 3, failing, 10, f.RangeNote(1, 10)), corev1.ConditionTrue, "AllMetricsFailed",
			[]string{"3 consecutive syncs", "pods metric rps: no data; cpu resource", "fallback count is 10 (behavior static, replicas 12)", "above maxReplicas 10"}},
		{"pending", FallbackPending(f, 1, failing[:1], ""), corev1.ConditionFalse, "MetricsFailing", []string{"1 of the 3", "pods metric rps"}},
		{"inactive", FallbackInactive(f, ""), corev1.ConditionFalse, "MetricsAvailable", []string{"after 3 consecutive syncs"}},
		{"invalid", FallbackInvalid("annotation x is bad"), corev1.ConditionFalse, "InvalidFallback", []string{"annotation x is bad"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.c.Type != FallbackCondition || tc.c.Status != tc.wantStatus || tc.c.Reason != tc.wantReason {
				t.Errorf("got %+v", tc.c)
			}
			for _, h := range tc.wantHas {
				if !strings.Contains(tc.c.Message, h) {
					t.Errorf("message %q does not contain %q", tc.c.Message, h)
				}
			}
		})
	}
}
