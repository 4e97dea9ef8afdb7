// Package sandbox runs Tidal's demo on the local harness: `tidal adapter`
// with the app's own rule file (rules.yaml), `tidal autoscaler` (mode crd),
// a demo Deployment run by kwok, a HorizontalAutoscaler on CPU, requests
// per second and queue length, and a load simulator that drives the
// harness exporter along a demand curve. Prometheus also scrapes both Tidal
// components as the chart's ServiceMonitors would, so the chart's Grafana
// dashboard can be queried. It prints a live view and writes a report
// folder (see ReportFiles).
package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/utils/ptr"

	tidalv1 "github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/test/exporter"
	"github.com/tidal-autoscaler/tidal/test/harness"
)

// Names of the demo objects.
const (
	Namespace = "demo"
	App       = "demo"
	Container = "app"
	Queue     = "jobs"
)

// The demo workload's model.
const (
	// cpuRequest is each pod's CPU request (cores).
	cpuRequest = 0.25
	// costPerRequest is CPU-seconds per request; podCapacity the requests
	// per second a pod can serve (its CPU then is 0.16 cores, 64% of the
	// request, so requests per pod reach their target before CPU does);
	// idleCPU what an idle pod uses.
	costPerRequest = 0.001
	podCapacity    = 150.0
	idleCPU        = 0.01
	// Memory: a base working set plus some per request per second.
	baseMemory    = 60 << 20
	memoryPerRate = 200 << 10
)

// Targets of the HorizontalAutoscaler.
const (
	cpuTarget = 60 // percent of request
	rpsTarget = 60 // requests per second per pod, 40% of podCapacity
	// queueTarget is queued jobs per pod: a backlog of ten is a short
	// wait, and the queue outgrows the request rate's proposal within
	// seconds of a burst.
	queueTarget = 10
	minReplicas = 1
	maxReplicas = 15
	// initialReplicas is the Deployment's size before the autoscaler acts.
	initialReplicas = 2
)

// spec.fallback of the demo autoscaler with --fallback (behavior static).
const (
	FallbackThreshold = 2
	FallbackReplicas  = 4
)

// RuleFile is the demo app's rule file, relative to the repository.
const RuleFile = "test/sandbox/rules.yaml"

// Config is one sandbox run.
type Config struct {
	// Dir holds the harness's files; it is wiped at start.
	Dir string
	// ReportRoot is where report-<timestamp>/ is written.
	ReportRoot string
	// Duration is the demand curve's length.
	Duration time.Duration
	// Curve defaults to DefaultCurve.
	Curve []Phase
	// PrintEvery is the live view's period; 0 prints nothing.
	PrintEvery time.Duration
	// Keep keeps everything running after the curve (and report) until ctx
	// ends.
	Keep bool
	// Out receives the live view and messages; nil is os.Stdout.
	Out io.Writer
	// Logf receives the harness's progress; nil is silent.
	Logf func(format string, args ...any)
	// DryRun sets the demo autoscaler's spec.dryRun: it decides and
	// reports every sync but never writes /scale.
	DryRun bool
	// Fallback sets spec.fallback and stops Prometheus during
	// OutageWindow, so every metric fails for a while.
	Fallback bool
}

// OutageWindow is when a --fallback run stops Prometheus: from 65% of the
// curve for 15% of it (at least 20s), in the quiet phase, leaving time to
// see the return to normal.
func OutageWindow(duration time.Duration) (start, end time.Duration) {
	start = duration * 65 / 100
	return start, start + max(duration*15/100, 20*time.Second)
}

// Result is what a run produced.
type Result struct {
	ReportDir string
	Samples   []Sample
	// Started is the number of replicas at the start of the curve.
	Started int32
	// Dashboard is every dashboard query's answer over the run; nil when
	// it could not be read.
	Dashboard *DashboardResult
	// Outage is when Prometheus was stopped (--fallback); zero otherwise.
	Outage Outage
}

// Outage is a stop of Prometheus, times since the start of the curve.
type Outage struct{ From, To time.Duration }

// Run starts the sandbox, drives the demand curve, writes the report and
// stops everything. When ctx ends early, the report covers what ran.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Out == nil {
		cfg.Out = os.Stdout
	}
	if cfg.Curve == nil {
		cfg.Curve = DefaultCurve
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 270 * time.Second
	}
	out := cfg.Out
	if err := os.RemoveAll(cfg.Dir); err != nil {
		return nil, err
	}
	// Build tidal while the control plane starts.
	waitBin := harness.TidalBinaryAsync(ctx)

	opts := harness.Full()
	opts.Dir = cfg.Dir
	opts.Logf = cfg.Logf
	fmt.Fprintln(out, "sandbox: starting etcd, kube-apiserver, controller manager, scheduler, kwok and Prometheus ...")
	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	h, err := harness.Start(startCtx, opts)
	cancel()
	if err != nil {
		return nil, err
	}
	defer func() {
		fmt.Fprintln(out, "sandbox: stopping ...")
		if err := h.Stop(); err != nil {
			fmt.Fprintln(out, "sandbox: stop:", err)
		}
	}()
	bin, err := waitBin()
	if err != nil {
		return nil, err
	}
	if err := setup(ctx, h, bin, cfg, out); err != nil {
		return nil, err
	}
	return drive(ctx, h, cfg)
}

// setup starts the adapter and the autoscaler, has Prometheus scrape them,
// and creates the demo app and its HorizontalAutoscaler.
func setup(ctx context.Context, h *harness.Harness, bin string, cfg Config, out io.Writer) error {
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "sandbox: starting tidal adapter (rules: %s) and tidal autoscaler (mode crd) ...\n", RuleFile)
	adapter, err := h.StartAdapter(ctx, harness.AdapterOptions{
		Binary:   bin,
		RuleFile: filepath.Join(root, RuleFile),
		// A 2s query cache (the default is 5s) keeps the served values
		// within seconds of a curve that changes within seconds.
		Args: []string{"--metrics-relist-interval=5s", "--query-cache-ttl=2s"},
		APIServices: [][2]string{
			{"custom.metrics.k8s.io", "v1beta1"},
			{"custom.metrics.k8s.io", "v1beta2"},
			{"external.metrics.k8s.io", "v1beta1"},
			{"metrics.k8s.io", "v1beta1"},
		},
	})
	if err != nil {
		return fmt.Errorf("tidal adapter: %w", err)
	}
	if _, err := h.ApplyCRDs(ctx, filepath.Join(root, "manifests", "crd")); err != nil {
		return err
	}
	autoscaler, err := h.StartAutoscaler(ctx, harness.AutoscalerOptions{
		Binary: bin,
		Args: []string{
			"--horizontal-pod-autoscaler-sync-period=5s",
			"--horizontal-pod-autoscaler-cpu-initialization-period=15s",
			"--horizontal-pod-autoscaler-initial-readiness-delay=5s",
			// Every sync's metric values in the status, for the live view
			// and the report.
			"--status-metrics-min-interval=0",
		},
	})
	if err != nil {
		return fmt.Errorf("tidal autoscaler: %w", err)
	}
	fmt.Fprintln(out, "sandbox: Prometheus now also scrapes tidal adapter, tidal autoscaler and kube-apiserver (the dashboard's sources) ...")
	if err := scrapeTidal(ctx, h, adapter.Port, autoscaler.SecurePort); err != nil {
		return err
	}
	if err := h.EnsureNamespace(ctx, Namespace); err != nil {
		return err
	}
	d := harness.Deployment(Namespace, App, initialReplicas)
	d.Spec.Template.Spec.Containers[0].Name = Container
	d.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(cpuRequest*1000), resource.DecimalSI)
	d.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("128Mi")
	if _, err := h.Client.AppsV1().Deployments(Namespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return err
	}
	_, err = h.WaitDeploymentReady(ctx, Namespace, App, time.Minute)
	return err
}

// createAutoscaler creates the demo's HorizontalAutoscaler.
func createAutoscaler(ctx context.Context, has dynamic.ResourceInterface, cfg Config) error {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(HorizontalAutoscaler(cfg))
	if err != nil {
		return err
	}
	_, err = has.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	return err
}

// waitMetricsServed steps the simulator at the curve's first demand until
// the adapter serves all three metrics of the demo, so that the autoscaler
// starts with valid metrics (with --fallback it would otherwise fall back
// before the first scrape).
func waitMetricsServed(ctx context.Context, h *harness.Harness, curve Curve, sim *simulator, readyPods func() []string) error {
	paths := map[string]string{
		"http_requests_per_second (custom.metrics.k8s.io)": "/apis/custom.metrics.k8s.io/v1beta2/namespaces/" + Namespace + "/pods/*/http_requests_per_second",
		"queue_length (external.metrics.k8s.io)":           "/apis/external.metrics.k8s.io/v1beta1/namespaces/" + Namespace + "/queue_length",
		"pod CPU and memory (metrics.k8s.io)":              "/apis/metrics.k8s.io/v1beta1/namespaces/" + Namespace + "/pods",
	}
	selectors := map[string]string{"queue_length (external.metrics.k8s.io)": "queue=" + Queue}
	demand, phase := curve.PhaseAt(0)
	deadline := time.Now().Add(90 * time.Second)
	for {
		sim.step(demand, phase.BatchCPU, readyPods(), 1)
		var missing []string
		for name, path := range paths {
			sel, ok := selectors[name]
			if !ok {
				sel = "app=" + App
			}
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			data, err := h.Client.Discovery().RESTClient().Get().AbsPath(path).Param("labelSelector", sel).DoRaw(rctx)
			cancel()
			var list struct {
				Items []json.RawMessage `json:"items"`
			}
			if err != nil || json.Unmarshal(data, &list) != nil || len(list.Items) == 0 {
				missing = append(missing, name)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			sort.Strings(missing)
			return fmt.Errorf("the adapter did not serve %s within 90s of the demo's first load; see its log in %s",
				strings.Join(missing, ", "), h.LogPath("tidal-adapter"))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// HorizontalAutoscaler is the demo's autoscaler for cfg. Its scale-down
// stabilization is a tenth of the curve (at least 10s, at most 60s) so the
// quiet phase shows a scale-down.
func HorizontalAutoscaler(cfg Config) *tidalv1.HorizontalAutoscaler {
	window := int32(min(max(cfg.Duration/10, 10*time.Second), time.Minute) / time.Second)
	ha := &tidalv1.HorizontalAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: tidalv1.SchemeGroupVersion.String(), Kind: "HorizontalAutoscaler"},
		ObjectMeta: metav1.ObjectMeta{Name: App, Namespace: Namespace},
		Spec: tidalv1.HorizontalAutoscalerSpec{HorizontalPodAutoscalerSpec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: App},
			MinReplicas:    ptr.To[int32](minReplicas),
			MaxReplicas:    maxReplicas,
			Metrics: []autoscalingv2.MetricSpec{
				{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
					Name:   corev1.ResourceCPU,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](cpuTarget)},
				}},
				{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
					Metric: autoscalingv2.MetricIdentifier{Name: "http_requests_per_second"},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: resource.NewQuantity(rpsTarget, resource.DecimalSI)},
				}},
				{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
					Metric: autoscalingv2.MetricIdentifier{Name: "queue_length", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"queue": Queue}}},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: resource.NewQuantity(queueTarget, resource.DecimalSI)},
				}},
			},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To(window)},
			},
		}},
	}
	ha.Spec.DryRun = cfg.DryRun
	if cfg.Fallback {
		ha.Spec.Fallback = &tidalv1.Fallback{FailureThreshold: FallbackThreshold, Replicas: FallbackReplicas, Behavior: tidalv1.FallbackStatic}
	}
	return ha
}

// Sample is one second of the run.
type Sample struct {
	T      time.Duration
	Phase  string
	Demand float64
	// Ready is the number of ready pods the load balancer sends to; Queue
	// the simulated backlog.
	Ready int
	Queue float64
	// Metric values and targets from the autoscaler's status; NaN when
	// not reported.
	CPU, CPUTarget   float64
	RPS, RPSTarget   float64
	QueueM, QueueTgt float64
	Current, Desired int32
	Spec             int32
	Winner, Reason   string
	// Decision is status.tidal.decision; nil before the first.
	Decision *tidalv1.Decision
	// DryRun and Fallback are those conditions as "Status/Reason", empty
	// when absent.
	DryRun, Fallback string
	// PromDown is true while the sandbox has Prometheus stopped.
	PromDown bool
	// QueueServed is queue_length as external.metrics.k8s.io serves it
	// (what the autoscaler reads); NaN when it could not be read.
	QueueServed float64
}

// servedQueue reads queue_length from external.metrics.k8s.io as the
// autoscaler does, every second: the live view then shows what the
// adapter serves, and the adapter answers most of these reads from its
// short query cache (the dashboard's cache hits).
func servedQueue(ctx context.Context, h *harness.Harness) float64 {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	data, err := h.Client.Discovery().RESTClient().Get().
		AbsPath("/apis/external.metrics.k8s.io/v1beta1/namespaces", Namespace, "queue_length").
		Param("labelSelector", "queue="+Queue).DoRaw(ctx)
	if err != nil {
		return math.NaN()
	}
	var list struct {
		Items []struct {
			Value resource.Quantity `json:"value"`
		} `json:"items"`
	}
	if json.Unmarshal(data, &list) != nil || len(list.Items) == 0 {
		return math.NaN()
	}
	total := 0.0
	for _, it := range list.Items {
		total += it.Value.AsApproximateFloat64()
	}
	return total
}

// simulator is the load balancer and the pods' series.
type simulator struct {
	ex    *exporter.Exporter
	queue float64
	live  map[string]bool
}

// step advances one second at demand over the ready pods, which share
// batch cores of background work.
func (s *simulator) step(demand, batch float64, ready []string, dt float64) {
	capacity := podCapacity * float64(len(ready))
	backlog := s.queue + demand*dt
	served := math.Min(backlog, capacity*dt)
	s.queue = backlog - served
	s.ex.SetGauge("queue_length", exporter.Labels{"namespace": Namespace, "queue": Queue}, math.Round(s.queue))
	now := map[string]bool{}
	for _, pod := range ready {
		now[pod] = true
		share := demand / float64(len(ready))
		s.ex.SetPodCPU(Namespace, pod, Container, idleCPU+batch/float64(len(ready))+math.Min(share, podCapacity)*costPerRequest)
		s.ex.SetPodMemory(Namespace, pod, Container, baseMemory+share*memoryPerRate)
		s.ex.SetCounterRate("http_requests_total", exporter.Labels{"namespace": Namespace, "pod": pod}, share)
	}
	for pod := range s.live {
		if !now[pod] {
			s.ex.DeletePod(Namespace, pod)
		}
	}
	s.live = now
}

func drive(ctx context.Context, h *harness.Harness, cfg Config) (*Result, error) {
	out := cfg.Out
	curve := Curve{Phases: cfg.Curve, Duration: cfg.Duration}
	// Everything started here ends when drive returns.
	ctx, cancelAll := context.WithCancel(ctx)
	defer cancelAll()
	factory := informers.NewSharedInformerFactoryWithOptions(h.Client, 0, informers.WithNamespace(Namespace))
	pods := factory.Core().V1().Pods().Lister()
	factory.Start(ctx.Done())
	// Shutdown waits for the informers, which stop when ctx ends.
	defer func() { cancelAll(); factory.Shutdown() }()
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("informer for %v did not sync", typ)
		}
	}
	dyn, err := dynamic.NewForConfig(h.Admin)
	if err != nil {
		return nil, err
	}
	has := dyn.Resource(tidalv1.GroupVersionResource).Namespace(Namespace)
	sim := &simulator{ex: h.Exporter, live: map[string]bool{}}
	selector := labels.SelectorFromSet(labels.Set{"app": App})
	readyPods := func() []string {
		list, _ := pods.List(selector)
		var names []string
		for _, p := range list {
			if p.DeletionTimestamp == nil && harness.PodReady(p) {
				names = append(names, p.Name)
			}
		}
		sort.Strings(names)
		return names
	}

	// The HA status is read in the background so a slow apiserver does not
	// delay the one-second load ticks.
	var mu sync.Mutex
	var status *tidalv1.HorizontalAutoscaler
	var spec int32
	served := math.NaN()
	pollCtx := ctx
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			ha := &tidalv1.HorizontalAutoscaler{}
			if u, err := has.Get(pollCtx, App, metav1.GetOptions{}); err == nil {
				if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ha) != nil {
					ha = nil
				}
			} else {
				ha = nil
			}
			d, derr := h.Client.AppsV1().Deployments(Namespace).Get(pollCtx, App, metav1.GetOptions{})
			q := servedQueue(pollCtx, h)
			mu.Lock()
			served = q
			if ha != nil {
				status = ha
			}
			if derr == nil {
				spec = ptr.Deref(d.Spec.Replicas, 0)
			}
			mu.Unlock()
			select {
			case <-pollCtx.Done():
				return
			case <-t.C:
			}
		}
	}()

	fmt.Fprintln(out, "sandbox: waiting until the adapter serves the demo's metrics, then creating its HorizontalAutoscaler ...")
	if err := waitMetricsServed(ctx, h, curve, sim, readyPods); err != nil {
		return nil, err
	}
	if err := createAutoscaler(ctx, has, cfg); err != nil {
		return nil, err
	}
	res := &Result{Started: initialReplicas}
	start := time.Now()
	outage := newOutage(h, cfg, out)
	fmt.Fprintf(out, "sandbox: watch it from another shell with: export KUBECONFIG=%s; %s -n %s get ha,pods\n",
		h.AdminKubeconfig, filepath.Join(h.ToolsDir(), "kubectl"), Namespace)
	fmt.Fprintf(out, "sandbox: demand curve running for %s (Ctrl-C stops early and still writes the report)\n", cfg.Duration)
	fmt.Fprintf(out, "%6s %-9s %6s %5s %6s | %-11s %-9s %-9s | %-9s | %s\n",
		"time", "phase", "demand", "ready", "queue", "cpu", "rps/pod", "queue/pod", "replicas", "last decision")
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastPrint := time.Duration(-1)
	reportWritten := false
	writeReport := func() {
		if reportWritten {
			return
		}
		reportWritten = true
		var upAt time.Time
		res.Outage, upAt = outage.finish(time.Since(start))
		res.Dashboard = queryDashboard(h, curve, start, upAt)
		dir, err := writeReport(h, cfg, curve, res)
		if err != nil {
			fmt.Fprintln(out, "sandbox: report:", err)
			return
		}
		res.ReportDir = dir
		fmt.Fprintf(out, "sandbox: report in %s\n", dir)
	}
	for {
		select {
		case <-ctx.Done():
			writeReport()
			return res, nil
		case <-tick.C:
		}
		t := time.Since(start)
		demand, phase := curve.PhaseAt(t)
		names := readyPods()
		sim.step(demand, phase.BatchCPU, names, 1)
		promDown := outage.at(ctx, t)
		if t > cfg.Duration {
			if !reportWritten {
				writeReport()
				if !cfg.Keep {
					return res, nil
				}
				printKeep(out, h)
			}
			continue
		}
		mu.Lock()
		s := sample(t, phase.Name, demand, len(names), sim.queue, status, spec)
		s.QueueServed = served
		mu.Unlock()
		s.PromDown = promDown
		res.Samples = append(res.Samples, s)
		if cfg.PrintEvery > 0 && (lastPrint < 0 || t-lastPrint >= cfg.PrintEvery) {
			lastPrint = t
			fmt.Fprintln(out, liveLine(s))
		}
	}
}

func printKeep(out io.Writer, h *harness.Harness) {
	fmt.Fprintf(out, `
sandbox: the curve ended; everything keeps running (demand stays at the last phase's level).
In another shell:

  export KUBECONFIG=%s
  export PATH=%s:$PATH
  kubectl -n %s get horizontalautoscalers,deploy,pods
  kubectl get --raw /apis/custom.metrics.k8s.io/v1beta2/namespaces/%s/pods/*/http_requests_per_second

Logs: %s
Ctrl-C stops everything.
`, h.AdminKubeconfig, h.ToolsDir(), Namespace, Namespace, filepath.Join(h.Dir, "logs"))
}

// sample reads one second's values, ha may be nil.
func sample(t time.Duration, phase string, demand float64, readyPods int, queue float64, ha *tidalv1.HorizontalAutoscaler, spec int32) Sample {
	nan := math.NaN()
	s := Sample{T: t, Phase: phase, Demand: demand, Ready: readyPods, Queue: queue,
		CPU: nan, CPUTarget: cpuTarget, RPS: nan, RPSTarget: rpsTarget, QueueM: nan, QueueTgt: queueTarget, Spec: spec}
	if ha == nil {
		return s
	}
	st := ha.Status
	s.Current, s.Desired = st.CurrentReplicas, st.DesiredReplicas
	for _, m := range st.CurrentMetrics {
		switch {
		case m.Resource != nil && m.Resource.Current.AverageUtilization != nil:
			s.CPU = float64(*m.Resource.Current.AverageUtilization)
		case m.Pods != nil && m.Pods.Current.AverageValue != nil:
			s.RPS = m.Pods.Current.AverageValue.AsApproximateFloat64()
		case m.External != nil && m.External.Current.AverageValue != nil:
			s.QueueM = m.External.Current.AverageValue.AsApproximateFloat64()
		}
	}
	s.Reason = reason(ha)
	if st.Tidal != nil && st.Tidal.Decision != nil {
		s.Winner = st.Tidal.Decision.Winner
		s.Decision = st.Tidal.Decision.DeepCopy()
	}
	for _, c := range st.Conditions {
		switch string(c.Type) {
		case "DryRun":
			s.DryRun = string(c.Status) + "/" + c.Reason
		case "Fallback":
			s.Fallback = string(c.Status) + "/" + c.Reason
		}
	}
	return s
}

// reason is the last decision in a few words: the winning metric and the
// adjustments of status.tidal, else the conditions' reasons.
func reason(ha *tidalv1.HorizontalAutoscaler) string {
	var parts []string
	if t := ha.Status.Tidal; t != nil && t.Decision != nil {
		d := t.Decision
		if d.ProposedReplicas < 0 || d.Winner == "" {
			parts = append(parts, "no valid metric")
		} else {
			parts = append(parts, fmt.Sprintf("%s proposes %d", shortMetric(d.Winner), d.ProposedReplicas))
		}
		for _, a := range d.Adjustments {
			parts = append(parts, fmt.Sprintf("%s %d→%d", a.Reason, a.From, a.To))
		}
		return strings.Join(parts, ", ")
	}
	for _, c := range ha.Status.Conditions {
		if c.Status != corev1.ConditionTrue || c.Type == autoscalingv2.ScalingLimited {
			parts = append(parts, string(c.Type)+"="+c.Reason)
		}
	}
	return strings.Join(parts, ", ")
}

// shortMetric turns upstream's metric names into one word.
func shortMetric(name string) string {
	switch {
	case name == "":
		return ""
	case strings.HasPrefix(name, "cpu"):
		return "cpu"
	case strings.Contains(name, "http_requests_per_second"):
		return "rps"
	case strings.Contains(name, "queue_length"):
		return "queue"
	}
	return name
}

func fmtNum(v float64, unit string) string {
	if math.IsNaN(v) {
		return "-"
	}
	if v >= 100 || unit == "%" {
		return fmt.Sprintf("%.0f%s", v, unit)
	}
	return fmt.Sprintf("%.1f%s", v, unit)
}

func liveLine(s Sample) string {
	return fmt.Sprintf("%5.0fs %-9s %6.0f %5d %6.0f | %-11s %-9s %-9s | %-9s | %s",
		s.T.Seconds(), s.Phase, s.Demand, s.Ready, s.Queue,
		fmtNum(s.CPU, "%")+"/"+fmtNum(s.CPUTarget, "%"),
		fmtNum(s.RPS, "")+"/"+fmtNum(s.RPSTarget, ""),
		fmtNum(s.QueueM, "")+"/"+fmtNum(s.QueueTgt, ""),
		replicas(s), liveReason(s))
}

// liveReason is the last decision, with the sandbox's Prometheus outage.
func liveReason(s Sample) string {
	if s.PromDown {
		return "[Prometheus stopped] " + s.Reason
	}
	return s.Reason
}

// replicas is "current→desired" of the autoscaler's status, "-" before it
// reported.
func replicas(s Sample) string {
	if s.Desired == 0 {
		return "-"
	}
	return fmt.Sprintf("%d→%d", s.Current, s.Desired)
}
