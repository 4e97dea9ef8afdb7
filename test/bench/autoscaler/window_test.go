package autoscaler

import (
	"errors"
	"testing"
)

// TestKwokBurst: the figures of kwok's CPU per period measured in the
// fleet rows' windows (2026-11-30 14:07 UTC, 10k autoscalers) are told
// apart: the quiet windows' few CPU-ms from the two bursts'.
func TestKwokBurst(t *testing.T) {
	for _, tc := range []struct {
		name string
		cpu  float64
		want bool
	}{
		{"idle", 0, false},
		{"a quiet window at 50,000 pods", 0.0033, false},
		{"below the threshold", 0.2, false},
		{"the burst in the replicas' window", 3.23, true},
		{"the burst in one replica's window", 3.03, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := kwokBurst(tc.cpu); got != tc.want {
				t.Errorf("kwokBurst(%v) = %v, want %v", tc.cpu, got, tc.want)
			}
		})
	}
}

// TestQuietWindow: a window with a kwok burst is measured again, until a
// quiet one or the last allowed; an error ends it.
func TestQuietWindow(t *testing.T) {
	burst, quiet := 3.0, 0.003
	for _, tc := range []struct {
		name      string
		kwok      []float64 // kwok's CPU per period in each window, in order
		max       int
		wantTries int
		wantKwok  float64
	}{
		{"the first window quiet", []float64{quiet}, 3, 1, quiet},
		{"a burst, then quiet", []float64{burst, quiet}, 3, 2, quiet},
		{"bursts up to the last window", []float64{burst, burst, burst}, 3, 3, burst},
		{"one window allowed", []float64{burst}, 1, 1, burst},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tries := 0
			w, err := quietWindow(func() (phaseResult, error) {
				tries++
				if tries > len(tc.kwok) {
					t.Fatalf("window %d measured, only %d expected", tries, len(tc.kwok))
				}
				return phaseResult{restPerPeriod: map[string]float64{"kwok": tc.kwok[tries-1]}, reconcilesPerPeriod: float64(tries)}, nil
			}, tc.max)
			if err != nil {
				t.Fatal(err)
			}
			if tries != tc.wantTries || w.restPerPeriod["kwok"] != tc.wantKwok || w.reconcilesPerPeriod != float64(tries) {
				t.Errorf("%d windows, kept kwok %v from window %v; want %d windows, kwok %v from the last",
					tries, w.restPerPeriod["kwok"], w.reconcilesPerPeriod, tc.wantTries, tc.wantKwok)
			}
		})
	}
	t.Run("an error ends it", func(t *testing.T) {
		tries := 0
		_, err := quietWindow(func() (phaseResult, error) {
			tries++
			return phaseResult{}, errTest
		}, 3)
		if err != errTest || tries != 1 {
			t.Errorf("error %v after %d windows, want errTest after 1", err, tries)
		}
	})
}

var errTest = errors.New("test")
