package sandbox

import (
	"context"
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tidal-autoscaler/tidal/test/harness"
)

// ReportFiles are the files of a report folder.
var ReportFiles = []string{"timeline.csv", "chart.png", "chart.html", "events.txt", "summary.txt",
	"rules.yaml", "dashboard.txt", "dashboard.png", "dashboard.html"}

// writeReport writes report-<timestamp>/ under cfg.ReportRoot.
func writeReport(h *harness.Harness, cfg Config, curve Curve, res *Result) (string, error) {
	dir := filepath.Join(cfg.ReportRoot, "report-"+time.Now().UTC().Format("20060102-150405"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	root, err := harness.RepoRoot()
	if err != nil {
		return "", err
	}
	rules, err := os.ReadFile(filepath.Join(root, RuleFile))
	if err != nil {
		return "", err
	}
	samples := res.Samples
	title := fmt.Sprintf("Tidal sandbox: %.0fs demand curve, HorizontalAutoscaler %s/%s%s", cfg.Duration.Seconds(), Namespace, App, modeNote(cfg))
	files := map[string][]byte{
		"timeline.csv":   TimelineCSV(samples),
		"chart.html":     ChartHTML(samples, title),
		"summary.txt":    []byte(Summary(curve, samples) + modeSummary(cfg, res) + rulesSummary(rules) + dashboardSummary(res.Dashboard, samples, cfg.Fallback)),
		"rules.yaml":     rules,
		"dashboard.txt":  []byte(DashboardText(res.Dashboard)),
		"dashboard.html": DashboardHTML(res.Dashboard, samples),
	}
	if files["chart.png"], err = ChartPNG(samples, title); err != nil {
		return dir, err
	}
	if files["dashboard.png"], err = DashboardPNG(res.Dashboard, samples); err != nil {
		return dir, err
	}
	// The run's context may be cancelled (Ctrl-C): list events on a fresh one.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	events, err := Events(ctx, h.Client, Namespace)
	if err != nil {
		events = "could not list events: " + err.Error() + "\n"
	}
	files["events.txt"] = []byte(events)
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return dir, err
		}
	}
	return dir, nil
}

// TimelineCSV has one row per second.
func TimelineCSV(samples []Sample) []byte {
	var b strings.Builder
	w := csv.NewWriter(&b)
	_ = w.Write([]string{"seconds", "phase", "demand_rps", "ready_pods", "queue", "capacity_rps",
		"cpu_utilization_pct", "cpu_target_pct", "rps_per_pod", "rps_target", "queue_per_pod", "queue_target",
		"deployment_replicas", "current_replicas", "desired_replicas", "winner", "decision", "dry_run", "fallback", "prometheus_down", "queue_length_served"})
	f := func(v float64) string {
		if math.IsNaN(v) {
			return ""
		}
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	for _, s := range samples {
		_ = w.Write([]string{
			strconv.FormatFloat(s.T.Seconds(), 'f', 1, 64), s.Phase, f(math.Round(s.Demand*10) / 10),
			strconv.Itoa(s.Ready), f(math.Round(s.Queue)), f(float64(s.Ready) * podCapacity),
			f(s.CPU), f(s.CPUTarget), f(s.RPS), f(s.RPSTarget), f(s.QueueM), f(s.QueueTgt),
			strconv.Itoa(int(s.Spec)), strconv.Itoa(int(s.Current)), strconv.Itoa(int(s.Desired)), s.Winner, s.Reason,
			s.DryRun, s.Fallback, strconv.FormatBool(s.PromDown), f(s.QueueServed),
		})
	}
	w.Flush()
	return []byte(b.String())
}

// ScaleEvent is one change of the Deployment's replicas (in a dry run: of
// the count the autoscaler would write).
type ScaleEvent struct {
	At       time.Duration
	From, To int32
	Winner   string
	// Driver is the metric that drove the change ("cpu", "rps", "queue")
	// or Fallback; Note says how (see attribute).
	Driver, Note string
	// Cause is the load increase the scale-up answers (scale-ups only).
	Cause *LoadChange
	// ReadyAt is when To pods were ready; negative if never within the run.
	ReadyAt time.Duration
}

// ScaleEvents lists the replica changes seen in the samples, each with the
// metric that drove it.
func ScaleEvents(curve Curve, samples []Sample) []ScaleEvent {
	incs := curve.Increases()
	dry := dryRun(samples)
	var out []ScaleEvent
	for i := 1; i < len(samples); i++ {
		prev, cur := count(samples[i-1], dry), count(samples[i], dry)
		if prev == 0 || cur == prev {
			continue
		}
		e := ScaleEvent{At: samples[i].T, From: prev, To: cur, Winner: shortMetric(samples[i].Winner), ReadyAt: -1}
		attribute(&e, samples, i, dry)
		if cur > prev {
			for k := range incs {
				if incs[k].At <= e.At {
					e.Cause = &incs[k]
				}
			}
		}
		for _, s := range samples[i:] {
			if (cur > prev && int32(s.Ready) >= cur) || (cur < prev && int32(s.Ready) <= cur) {
				e.ReadyAt = s.T
				break
			}
		}
		out = append(out, e)
	}
	return out
}

// Summary says what happened: the curve, each scale change and how long
// scale-ups took from the load change that caused them.
func Summary(curve Curve, samples []Sample) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Tidal sandbox summary\n\nDemand curve (%s):\n", curve.Duration)
	total := 0.0
	for _, p := range curve.Phases {
		total += p.Frac
	}
	at := time.Duration(0)
	for _, p := range curve.Phases {
		d := time.Duration(float64(curve.Duration) * p.Frac / total)
		batch := ""
		if p.BatchCPU > 0 {
			batch = fmt.Sprintf(", plus %.1f cores of batch work shared by the pods", p.BatchCPU)
		}
		fmt.Fprintf(&b, "  %6.0fs  %-10s %4.0f -> %4.0f req/s for %s%s\n", at.Seconds(), p.Name, p.From, p.To, d.Round(time.Second), batch)
		at += d
	}
	fmt.Fprintf(&b, "\nHorizontalAutoscaler: cpu %d%% of request, http_requests_per_second %d/pod, external queue_length %d/pod; %d..%d replicas.\n",
		cpuTarget, rpsTarget, queueTarget, minReplicas, maxReplicas)
	fmt.Fprintf(&b, "Workload model: a pod serves %.0f req/s at most, %.3f CPU-seconds per request, %.0fm CPU request.\n\n", podCapacity, costPerRequest, cpuRequest*1000)
	if len(samples) == 0 {
		b.WriteString("No samples were recorded.\n")
		return b.String()
	}
	events := ScaleEvents(curve, samples)
	if dryRun(samples) {
		b.WriteString("Dry run: the autoscaler never wrote /scale; the changes below are the counts it would have written.\n")
	}
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "at\tchange\tled by\tcause\tdecided after\tready after\thow")
	for _, e := range events {
		cause, decided, readyAfter := "-", "-", "-"
		base := e.At
		if e.Cause != nil {
			cause = fmt.Sprintf("%s at %.0fs (%.0f->%.0f req/s)", e.Cause.Name, e.Cause.At.Seconds(), e.Cause.From, e.Cause.ToPeak)
			if e.Cause.Batch > 0 {
				cause = fmt.Sprintf("%s at %.0fs (+%.1f cores)", e.Cause.Name, e.Cause.At.Seconds(), e.Cause.Batch)
			}
			decided = fmt.Sprintf("%.0fs", (e.At - e.Cause.At).Seconds())
			base = e.Cause.At
		}
		if e.ReadyAt >= 0 && e.To > e.From {
			readyAfter = fmt.Sprintf("%.0fs", (e.ReadyAt - base).Seconds())
		}
		kind := "up"
		if e.To < e.From {
			kind = "down"
		}
		fmt.Fprintf(w, "%.0fs\t%s %d -> %d\t%s\t%s\t%s\t%s\t%s\n", e.At.Seconds(), kind, e.From, e.To, orDash(e.Driver), cause, decided, readyAfter, e.Note)
	}
	_ = w.Flush()
	if len(events) == 0 {
		b.WriteString("  (no replica changes)\n")
	}
	leaders := Leaders(events)
	var led []string
	for _, m := range []string{"cpu", "rps", "queue", Fallback} {
		if leaders[m] > 0 {
			led = append(led, fmt.Sprintf("%s %d", m, leaders[m]))
		}
	}
	fmt.Fprintf(&b, "\nChanges led: %s.\n", orDash(strings.Join(led, ", ")))
	first, last := samples[0], samples[len(samples)-1]
	peak, peakAt := first.Spec, first.T
	maxQueue := 0.0
	for _, s := range samples {
		if s.Spec > peak {
			peak, peakAt = s.Spec, s.T
		}
		maxQueue = math.Max(maxQueue, s.Queue)
	}
	fmt.Fprintf(&b, "\nReplicas: %d at start, peak %d (at %.0fs), %d at the end. Largest queue: %.0f jobs.\n",
		first.Spec, peak, peakAt.Seconds(), last.Spec, maxQueue)
	b.WriteString(`
"led by" is the metric whose proposal won the decision that made the change
(status.tidal.decision.winner): cpu (utilization), rps (the Pods metric
http_requests_per_second) or queue (the External metric queue_length); a
scale-down held by the stabilization window is credited to the metric whose
proposal the window kept. "decided after" is from the load change to the new
replica count, "ready after" from the load change to that many ready pods.
Scale-ups are attributed to the latest load increase at or before them.
`)
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// MaxReplicas returns the largest Deployment replica count in samples.
func MaxReplicas(samples []Sample) int32 {
	var m int32
	for _, s := range samples {
		m = max(m, s.Spec)
	}
	return m
}

// Events renders the namespace's events oldest first, like kubectl get events.
func Events(ctx context.Context, client kubernetes.Interface, namespace string) (string, error) {
	list, err := client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	when := func(e *corev1.Event) time.Time {
		switch {
		case !e.LastTimestamp.IsZero():
			return e.LastTimestamp.Time
		case !e.EventTime.IsZero():
			return e.EventTime.Time
		}
		return e.CreationTimestamp.Time
	}
	items := list.Items
	sort.SliceStable(items, func(i, j int) bool { return when(&items[i]).Before(when(&items[j])) })
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "TIME\tTYPE\tREASON\tOBJECT\tCOUNT\tSOURCE\tMESSAGE")
	for i := range items {
		e := &items[i]
		src := e.Source.Component
		if src == "" {
			src = e.ReportingController
		}
		count := e.Count
		if count == 0 {
			count = 1
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s/%s\t%d\t%s\t%s\n", when(e).UTC().Format(time.TimeOnly), e.Type, e.Reason,
			strings.ToLower(e.InvolvedObject.Kind), e.InvolvedObject.Name, count, src, strings.ReplaceAll(e.Message, "\n", " "))
	}
	_ = w.Flush()
	if len(items) == 0 {
		b.WriteString("(no events)\n")
	}
	return b.String(), nil
}
