package main

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidal-autoscaler/tidal/test/harness"
)

// TestSmoke runs every row at the smoke sizes (3 pods, 300 requests by 2
// clients; 50 and 100 series; 3 autoscalers for two 3 s periods, as one
// alone may hold no reconcile of a side at its edges; a closed loop
// stepping from 1 to 2 replicas over a 5 s rate window, 3 s sync; one
// round) and checks the run's shape: every row in the table, every side
// with samples, every goal's ratio computed, the output files written. It
// never checks a figure or a time. About 4 minutes on 2 cores with a warm
// build cache (the closed loop about 30 s of it; the sharded row's phase,
// three replicas in the moving rows' job, about 20 s).
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the harness")
	}
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	run, err := runBench(context.Background(), root, options{smoke: true, rounds: 1, out: dir, log: tlog{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("table:\n%s", run.text)
	want := rows(newPlan(smokeSizes(), 1, "", ""))
	if len(run.results) != len(want) {
		t.Fatalf("%d rows in the table, want %d", len(run.results), len(want))
	}
	for i, r := range run.results {
		if r.ID != want[i].id {
			t.Errorf("row %d is %q, want %q", i, r.ID, want[i].id)
		}
		if r.Failure != "" {
			t.Errorf("%s did not finish: %s", r.ID, r.Failure)
		}
		for _, c := range r.Cells {
			if len(c.Values) == 0 {
				t.Errorf("%s: no samples of %s %s", r.ID, c.Side, c.Metric)
			}
		}
		for _, g := range r.Goals {
			// A reference measured 0 (kcm's CPU for 3 HPAs can stay
			// below the clock tick) is said so; any other NaN is a bug.
			if math.IsNaN(g.Ratio) && g.Verdict != zeroReference {
				t.Errorf("%s: no ratio for %q (%s)", r.ID, g.Goal, g.Verdict)
			}
		}
	}
	// Every phase of a fleet job left its summary in the job's log: the
	// benchmark's own log (b.Logf) keeps only its first ten lines.
	fleetLogs := 0
	for _, j := range newPlan(smokeSizes(), 1, "", "").jobs {
		phases := j.env["TIDAL_BENCH_PHASES"]
		if phases == "" {
			continue
		}
		log, err := os.ReadFile(filepath.Join(dir, "logs", j.id+".log"))
		if errors.Is(err, os.ErrNotExist) {
			continue // its key's first job ran it
		}
		if err != nil {
			t.Fatal(err)
		}
		fleetLogs++
		if got, want := strings.Count(string(log), "(phase took "), len(strings.Split(phases, ",")); got != want {
			t.Errorf("%s's log holds %d phase summaries, want %d (one per phase of %s)", j.id, got, want, phases)
		}
	}
	if fleetLogs == 0 {
		t.Error("no fleet job's log in the run's logs/")
	}
	for _, f := range []string{"table.md", "table.txt", "machine.txt", "samples.jsonl"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s missing or empty (%v)", f, err)
		}
	}
}

// tlog writes the driver's progress lines to the test log.
type tlog struct{ t *testing.T }

func (l tlog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestReplaceBetween(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want string
		err             bool
	}{
		{"replaces the block", "a\n<b>\nold\n<e>\nz\n", "a\n<b>\nnew\n<e>\nz\n", false},
		{"empty block", "<b>\n<e>", "<b>\nnew\n<e>", false},
		{"no markers", "a\n", "", true},
		{"end before begin", "<e>\n<b>\n", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := replaceBetween(tc.doc, "<b>", "<e>", "new\n")
			if (err != nil) != tc.err || got != tc.want {
				t.Errorf("replaceBetween = %q, %v; want %q (error %v)", got, err, tc.want, tc.err)
			}
		})
	}
}
