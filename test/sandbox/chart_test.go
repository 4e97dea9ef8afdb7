package sandbox

import (
	"bytes"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// synthetic returns samples shaped like a run, without a cluster.
func synthetic(curve Curve) []Sample {
	var out []Sample
	replicas := int32(2)
	queue := 0.0
	for t := time.Second; t <= curve.Duration; t += time.Second {
		d, phase := curve.At(t)
		capacity := float64(replicas) * podCapacity
		queue = math.Max(0, queue+d-capacity)
		util := 100 * (idleCPU + math.Min(d/float64(replicas), podCapacity)*costPerRequest) / cpuRequest
		want := int32(math.Ceil(float64(replicas) * util / cpuTarget))
		want = min(max(want, minReplicas), maxReplicas)
		if t%(5*time.Second) == 0 && want > replicas {
			replicas = want
		} else if t%(30*time.Second) == 0 && want < replicas {
			replicas = want
		}
		out = append(out, Sample{T: t, Phase: phase, Demand: d, Ready: int(replicas), Queue: queue,
			CPU: util, CPUTarget: cpuTarget, RPS: d / float64(replicas), RPSTarget: rpsTarget,
			QueueM: queue / float64(replicas), QueueTgt: queueTarget, Spec: replicas, Current: replicas, Desired: want,
			Winner: "cpu resource utilization (percentage of request)"})
	}
	return out
}

func TestReportWithoutCluster(t *testing.T) {
	curve := Curve{Phases: DefaultCurve, Duration: 270 * time.Second}
	samples := synthetic(curve)
	for i := range samples[200:220] {
		samples[200+i].PromDown = true
		samples[205+i].Fallback = "True/AllMetricsFailed"
	}
	pngData, err := ChartPNG(samples, "Tidal sandbox: synthetic run")
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(pngData))
	if err != nil {
		t.Fatalf("decode PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != int(chartW) || b.Dy() != int(chartH) {
		t.Errorf("PNG is %v", b)
	}
	page := ChartHTML(samples, "synthetic <run>")
	if !bytes.Contains(page, []byte("<svg")) || bytes.Contains(page, []byte("<script")) || !bytes.Contains(page, []byte("synthetic &lt;run&gt;")) {
		t.Errorf("chart.html is not a self-contained escaped SVG page")
	}
	for _, label := range []string{">prometheus stopped<", ">fallback<"} {
		if !bytes.Contains(page, []byte(label)) {
			t.Errorf("chart.html does not mark %s", label)
		}
	}
	csv := string(TimelineCSV(samples))
	if rows := strings.Count(csv, "\n"); rows != len(samples)+1 {
		t.Errorf("CSV has %d lines, want %d", rows, len(samples)+1)
	}
	summary := Summary(curve, samples)
	if !strings.Contains(summary, "burst at") || !strings.Contains(summary, "down") {
		t.Errorf("summary lacks the burst's scale-up or a scale-down:\n%s", summary)
	}
	if dir := os.Getenv("TIDAL_SANDBOX_CHART_DIR"); dir != "" {
		_ = os.WriteFile(filepath.Join(dir, "chart.png"), pngData, 0o644)
		_ = os.WriteFile(filepath.Join(dir, "chart.html"), page, 0o644)
		_ = os.WriteFile(filepath.Join(dir, "summary.txt"), []byte(summary), 0o644)
	}
}

func TestCurve(t *testing.T) {
	c := Curve{Phases: DefaultCurve, Duration: 100 * time.Second}
	for _, tc := range []struct {
		at    time.Duration
		phase string
		want  float64
		batch float64
	}{
		{5 * time.Second, "baseline", 100, 0}, {8 * time.Second, "ramp", 100, 0}, {19 * time.Second, "ramp", 290, 0},
		{40 * time.Second, "batch", 300, 1.2}, {50 * time.Second, "burst", 1900, 0}, {99 * time.Second, "quiet", 40, 0}, {200 * time.Second, "quiet", 40, 0},
	} {
		d, p := c.PhaseAt(tc.at)
		if p.Name != tc.phase || math.Abs(d-tc.want) > 1e-6 || p.BatchCPU != tc.batch {
			t.Errorf("PhaseAt(%s) = %v %s %v cores, want %v %s %v cores", tc.at, d, p.Name, p.BatchCPU, tc.want, tc.phase, tc.batch)
		}
	}
	inc := c.Increases()
	if len(inc) != 3 || inc[0].Name != "ramp" || inc[1].Name != "batch" || inc[2].Name != "burst" || inc[2].At != 45*time.Second {
		t.Errorf("Increases = %+v", inc)
	}
}
