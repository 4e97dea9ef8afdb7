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

// TestSandboxShortRun runs the whole demo on the harness with a 90s curve
// and --fallback, and checks: the autoscaler scaled up with the load; each
// of the three metrics led at least one replica change (read from the
// recorded decisions); Prometheus' outage put the autoscaler in fallback at
// the fallback count and it left fallback when the metrics came back;
// every query of the chart's dashboard returned data over the run; the
// report is complete. It needs `make tools`.
func TestSandboxShortRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the harness")
	}
	dir := t.TempDir()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg := Config{
		Dir:        filepath.Join(dir, "cluster"),
		ReportRoot: dir,
		Duration:   90 * time.Second,
		PrintEvery: 5 * time.Second,
		Out:        &out,
		Logf:       t.Logf,
		Fallback:   true,
	}
	res, err := Run(ctx, cfg)
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
	// Replicas went up with the load.
	var before, during int32
	for _, s := range res.Samples {
		switch s.Phase {
		case "baseline":
			before = max(before, s.Spec)
		case "ramp", "batch", "burst":
			during = max(during, s.Spec)
		}
	}
	if during <= before || during <= res.Started {
		t.Errorf("replicas did not go up with the load: %d before, at most %d during ramp/batch/burst", before, during)
	}
	checkLeaders(t, ScaleEvents(Curve{Phases: DefaultCurve, Duration: cfg.Duration}, res.Samples))
	checkFallback(t, res)
	for _, p := range res.Dashboard.Problems() {
		t.Errorf("dashboard: %s", p)
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
	if keep := os.Getenv("TIDAL_SANDBOX_REPORT_COPY"); keep != "" {
		if err := os.CopyFS(filepath.Join(keep, filepath.Base(res.ReportDir)), os.DirFS(res.ReportDir)); err != nil {
			t.Logf("copy the report: %v", err)
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

// checkLeaders: cpu, rps and queue each drove at least one change.
func checkLeaders(t *testing.T, events []ScaleEvent) {
	t.Helper()
	leaders := Leaders(events)
	for _, m := range []string{"cpu", "rps", "queue"} {
		if leaders[m] == 0 {
			t.Errorf("%s led no replica change; changes and their drivers:", m)
			for _, e := range events {
				t.Logf("  %s %d→%d led by %q: %s", e.At, e.From, e.To, e.Driver, e.Note)
			}
		}
	}
}

// checkFallback: while Prometheus was stopped the Fallback condition went
// True and the Deployment reached the fallback count; after it came back
// the condition went False with reason MetricsAvailable.
func checkFallback(t *testing.T, res *Result) {
	t.Helper()
	if res.Outage.From == 0 || res.Outage.To == 0 {
		t.Errorf("Prometheus was not stopped and started again: %+v", res.Outage)
		return
	}
	spans := fallbackSpans(res.Samples)
	if len(spans) == 0 {
		t.Errorf("the Fallback condition never went True during the outage %s..%s", res.Outage.From, res.Outage.To)
		return
	}
	reached, back := false, false
	for _, s := range res.Samples {
		if s.T >= spans[0][0] && (spans[0][1] < 0 || s.T < spans[0][1]) && s.Spec == FallbackReplicas {
			reached = true
		}
		if s.T > res.Outage.To && s.Fallback == "False/MetricsAvailable" {
			back = true
		}
	}
	if !reached {
		t.Errorf("Fallback was True from %s but the Deployment never had the fallback count %d", spans[0][0], FallbackReplicas)
	}
	if !back {
		t.Errorf("Fallback did not go False/MetricsAvailable after Prometheus came back at %s", res.Outage.To)
	}
}
