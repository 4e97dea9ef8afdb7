package sandbox

import (
	"bytes"
	"context"
	"encoding/csv"
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestSandboxShortRun runs the whole demo on the harness with a 60s curve
// and checks the autoscaler scaled up for the spike and the report is
// complete. It needs `make tools`.
func TestSandboxShortRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the harness")
	}
	dir := t.TempDir()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := Run(ctx, Config{
		Dir:        filepath.Join(dir, "cluster"),
		ReportRoot: dir,
		Duration:   60 * time.Second,
		PrintEvery: 5 * time.Second,
		Out:        &out,
		Logf:       t.Logf,
	})
	t.Logf("sandbox output:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	if res.ReportDir == "" {
		t.Fatal("no report written")
	}
	if summary, err := os.ReadFile(filepath.Join(res.ReportDir, "summary.txt")); err == nil {
		t.Logf("summary.txt:\n%s", summary)
	}
	// Replicas went up during the spike (or the ramp before it).
	var before, during int32
	for _, s := range res.Samples {
		switch s.Phase {
		case "baseline":
			before = max(before, s.Spec)
		case "ramp", "spike", "cool-down":
			during = max(during, s.Spec)
		}
	}
	if during <= before || during <= res.Started {
		t.Errorf("replicas did not go up with the load: %d before, at most %d during ramp/spike", before, during)
	}
	for _, name := range ReportFiles {
		if _, err := os.Stat(filepath.Join(res.ReportDir, name)); err != nil {
			t.Errorf("report file: %v", err)
		}
	}
	if f, err := os.Open(filepath.Join(res.ReportDir, "chart.png")); err == nil {
		if _, err := png.Decode(f); err != nil {
			t.Errorf("chart.png: %v", err)
		}
		_ = f.Close()
	}
	if data, err := os.ReadFile(filepath.Join(res.ReportDir, "timeline.csv")); err == nil {
		rows, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
		if err != nil || len(rows) < 10 {
			t.Errorf("timeline.csv: %d rows, %v", len(rows), err)
		}
	}
	if !t.Failed() {
		return
	}
	t.Logf("report kept in %s", res.ReportDir)
	if keep, err := os.MkdirTemp("", "tidal-sandbox-report-"); err == nil {
		_ = os.CopyFS(keep, os.DirFS(res.ReportDir))
		t.Logf("report copied to %s", keep)
	}
}
