package decision

import (
	"strings"
	"testing"
)

func TestFallbackNext(t *testing.T) {
	f := Fallback{FailureThreshold: 3, Replicas: 5}
	for _, tc := range []struct {
		name string
		prev int32
		h    SyncHealth
		want FallbackStep
	}{
		{"first failure counts", 0, MetricsAllFailed, FallbackStep{Failures: 1}},
		{"below the threshold", 1, MetricsAllFailed, FallbackStep{Failures: 2}},
		{"reaching the threshold enters", 2, MetricsAllFailed, FallbackStep{Failures: 3, Active: true, Entered: true}},
		{"staying in fallback, count capped", 3, MetricsAllFailed, FallbackStep{Failures: 3, Active: true}},
		{"a count above the threshold (lowered threshold) is capped", 7, MetricsAllFailed, FallbackStep{Failures: 3, Active: true}},
		{"a negative persisted count is 0", -4, MetricsAllFailed, FallbackStep{Failures: 1}},
		{"healthy resets", 2, MetricsHealthy, FallbackStep{}},
		{"healthy leaves fallback", 3, MetricsHealthy, FallbackStep{Left: true}},
		{"healthy and never failing", 0, MetricsHealthy, FallbackStep{}},
		{"no metrics computed keeps the count", 2, MetricsNotComputed, FallbackStep{Failures: 2}},
		{"no metrics computed does not leave", 3, MetricsNotComputed, FallbackStep{Failures: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := f.Next(tc.prev, tc.h); got != tc.want {
				t.Errorf("Next(%d, %v) = %+v, want %+v", tc.prev, tc.h, got, tc.want)
			}
		})
	}
	t.Run("threshold 1 enters on the first failure", func(t *testing.T) {
		got := Fallback{FailureThreshold: 1}.Next(0, MetricsAllFailed)
		if want := (FallbackStep{Failures: 1, Active: true, Entered: true}); got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})
	t.Run("threshold 0 (bypassed validation) is 1", func(t *testing.T) {
		if got := (Fallback{}).Next(0, MetricsAllFailed); !got.Active {
			t.Errorf("got %+v", got)
		}
	})
}

func TestFallbackCount(t *testing.T) {
	for _, tc := range []struct {
		name              string
		behavior          FallbackBehavior
		replicas          int32
		current, min, max int32
		want              int32
		noteHas           string
	}{
		{"static", FallbackStatic, 5, 2, 1, 10, 5, ""},
		{"empty behavior is static", "", 5, 8, 1, 10, 5, ""},
		{"currentReplicas keeps the count", FallbackCurrentReplicas, 5, 8, 1, 10, 8, ""},
		{"currentReplicas ignores replicas out of range", FallbackCurrentReplicas, 50, 8, 1, 10, 8, ""},
		{"ifHigher: current higher", FallbackCurrentReplicasIfHigher, 5, 8, 1, 10, 8, ""},
		{"ifHigher: fallback higher", FallbackCurrentReplicasIfHigher, 5, 2, 1, 10, 5, ""},
		{"ifLower: current lower", FallbackCurrentReplicasIfLower, 5, 2, 1, 10, 2, ""},
		{"ifLower: fallback lower", FallbackCurrentReplicasIfLower, 5, 8, 1, 10, 5, ""},
		{"static above max is max", FallbackStatic, 12, 3, 1, 10, 10, "above maxReplicas 10, so 10 is used"},
		{"static below min is min", FallbackStatic, 1, 3, 2, 10, 2, "below minReplicas 2, so 2 is used"},
		{"ifHigher above max is max", FallbackCurrentReplicasIfHigher, 12, 3, 1, 10, 10, "above maxReplicas"},
		{"ifLower: current below min (before the clamp branch) is min", FallbackCurrentReplicasIfLower, 5, 0, 1, 10, 1, ""},
		{"zero replicas with min 0", FallbackStatic, 0, 3, 0, 10, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := Fallback{FailureThreshold: 3, Replicas: tc.replicas, Behavior: tc.behavior}
			got, note := f.Count(tc.current, tc.min, tc.max)
			if got != tc.want {
				t.Errorf("Count(%d, %d, %d) = %d, want %d", tc.current, tc.min, tc.max, got, tc.want)
			}
			if (tc.noteHas == "") != (note == "") || !strings.Contains(note, tc.noteHas) {
				t.Errorf("note = %q, want one containing %q", note, tc.noteHas)
			}
		})
	}
}
