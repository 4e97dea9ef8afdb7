package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tidalv1 "github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/test/harness"
)

func readRepoFile(t *testing.T, rel string) []byte {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

const (
	cpuName   = "cpu resource utilization (percentage of request)"
	rpsName   = "pods metric http_requests_per_second"
	queueName = "external metric queue_length(&LabelSelector{MatchLabels:map[string]string{queue: jobs,},MatchExpressions:[]LabelSelectorRequirement{},})"
)

// run builds samples one second apart: each step is the Deployment's
// replicas and, when dec is set, the decision the status shows then.
type step struct {
	spec, desired int32
	dec           *tidalv1.Decision
	dryRun        string
}

func run(steps ...step) []Sample {
	var out []Sample
	for i, s := range steps {
		smp := Sample{T: time.Duration(i+1) * time.Second, Spec: s.spec, Desired: s.desired, Decision: s.dec, DryRun: s.dryRun}
		if s.dec != nil {
			smp.Winner = s.dec.Winner
		}
		out = append(out, smp)
	}
	return out
}

func dec(current, desired, proposed int32, winner string, adj ...tidalv1.Adjustment) *tidalv1.Decision {
	return &tidalv1.Decision{CurrentReplicas: current, DesiredReplicas: desired, ProposedReplicas: proposed, Winner: winner, Adjustments: adj}
}

func TestScaleEventDrivers(t *testing.T) {
	curve := Curve{Phases: DefaultCurve, Duration: 100 * time.Second}
	for _, tc := range []struct {
		name    string
		samples []Sample
		want    []string // driver per change
		leaders map[string]int
		// unmatched: no recorded decision made the change.
		unmatched bool
	}{
		{
			name: "the winner of the decision that made the change",
			samples: run(step{spec: 2, dec: dec(2, 2, 2, rpsName)}, step{spec: 3, dec: dec(2, 2, 2, rpsName)},
				step{spec: 3, dec: dec(2, 3, 3, rpsName)}),
			want: []string{"rps"}, leaders: map[string]int{"rps": 1},
		},
		{
			name: "a rate-limited scale-up is its winner's",
			samples: run(step{spec: 6, dec: dec(6, 6, 6, cpuName)}, step{spec: 12, dec: dec(6, 12, 40, queueName,
				tidalv1.Adjustment{Reason: "ScaleUpLimit", From: 40, To: 12})}),
			want: []string{"queue"}, leaders: map[string]int{"queue": 1},
		},
		{
			name: "a stabilized scale-down is credited to the proposal the window kept",
			samples: run(
				step{spec: 15, dec: dec(15, 15, 15, queueName)},
				step{spec: 15, dec: dec(15, 15, 10, cpuName, tidalv1.Adjustment{Reason: "ScaleDownStabilized", From: 10, To: 15})},
				step{spec: 15, dec: dec(15, 15, 2, rpsName, tidalv1.Adjustment{Reason: "ScaleDownStabilized", From: 2, To: 15})},
				step{spec: 10, dec: dec(15, 10, 2, rpsName, tidalv1.Adjustment{Reason: "ScaleDownStabilized", From: 2, To: 10})}),
			want: []string{"cpu"}, leaders: map[string]int{"cpu": 1},
		},
		{
			name:    "an unstabilized scale-down is the winner's",
			samples: run(step{spec: 4, dec: dec(4, 4, 4, cpuName)}, step{spec: 2, dec: dec(4, 2, 2, cpuName)}),
			want:    []string{"cpu"}, leaders: map[string]int{"cpu": 1},
		},
		{
			name: "fallback",
			samples: run(step{spec: 1, dec: dec(1, 1, 1, cpuName)},
				step{spec: 4, dec: dec(1, 4, -1, "", tidalv1.Adjustment{Reason: "Fallback", From: 1, To: 4})}),
			want: []string{Fallback}, leaders: map[string]int{Fallback: 1},
		},
		{
			name: "dry run: the counts the autoscaler would write",
			samples: run(step{spec: 2, desired: 2, dec: dec(2, 2, 2, cpuName), dryRun: "True/WouldNotScale"},
				step{spec: 2, desired: 5, dec: dec(2, 5, 5, queueName), dryRun: "True/WouldScale"},
				step{spec: 2, desired: 3, dec: dec(2, 3, 3, rpsName), dryRun: "True/WouldScale"}),
			// Each decision starts from the Deployment's 2; its outcome
			// matches the change.
			want: []string{"queue", "rps"}, leaders: map[string]int{"queue": 1, "rps": 1},
		},
		{
			name:    "no decision recorded: the winner at the time",
			samples: run(step{spec: 2}, step{spec: 3}),
			want:    []string{""}, leaders: map[string]int{}, unmatched: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := ScaleEvents(curve, tc.samples)
			if len(events) != len(tc.want) {
				t.Fatalf("%d changes %+v, want %d", len(events), events, len(tc.want))
			}
			for i, e := range events {
				if e.Driver != tc.want[i] {
					t.Errorf("change %d→%d at %s driven by %q (%s), want %q", e.From, e.To, e.At, e.Driver, e.Note, tc.want[i])
				}
				if got := strings.HasPrefix(e.Note, "no decision"); got != tc.unmatched {
					t.Errorf("change %d→%d at %s: note %q, want a decision matched: %v", e.From, e.To, e.At, e.Note, !tc.unmatched)
				}
			}
			got := Leaders(events)
			if len(got) != len(tc.leaders) {
				t.Errorf("Leaders = %v, want %v", got, tc.leaders)
			}
			for k, v := range tc.leaders {
				if got[k] != v {
					t.Errorf("Leaders = %v, want %v", got, tc.leaders)
				}
			}
		})
	}
}

func TestFallbackSpans(t *testing.T) {
	samples := []Sample{{T: 1 * time.Second}, {T: 2 * time.Second, Fallback: "False/MetricsFailing"}, {T: 3 * time.Second, Fallback: "True/AllMetricsFailed"},
		{T: 4 * time.Second, Fallback: "True/AllMetricsFailed"}, {T: 5 * time.Second, Fallback: "False/MetricsAvailable"}, {T: 6 * time.Second, Fallback: "True/AllMetricsFailed"}}
	got := fallbackSpans(samples)
	want := [][2]time.Duration{{3 * time.Second, 5 * time.Second}, {6 * time.Second, -1}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("fallbackSpans = %v, want %v", got, want)
	}
}
