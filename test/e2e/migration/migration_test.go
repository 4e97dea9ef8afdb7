// Package migration replaces a running prometheus-adapter with Tidal's
// adapter, as docs/migration.md's steps do, while kube-controller-manager's
// HPA controller scales on the metrics it serves, and measures what the
// switch costs the HPAs.
//
// The steps as the harness takes them (docs/migration.md, "Replacing a
// running release", with helm's part played by the harness): Tidal's
// adapter is started without APIServices (apiServices.register=false), each
// APIService is switched to Tidal's Service with one update (the guide's
// `kubectl patch`), and prometheus-adapter is stopped (its release
// uninstalled).
package migration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/test/exporter"
	"github.com/tidal-autoscaler/tidal/test/harness"
)

const (
	ns = "migration"
	// syncPeriod is the HPA controller's; a gap in the metrics shorter than
	// it can cost an HPA at most one sync's reading.
	syncPeriod = 5 * time.Second
)

// apis are the APIServices prometheus-adapter owns and Tidal takes over.
var apis = [][2]string{
	{"custom.metrics.k8s.io", "v1beta1"},
	{"custom.metrics.k8s.io", "v1beta2"},
	{"external.metrics.k8s.io", "v1beta1"},
	{"metrics.k8s.io", "v1beta1"},
}

// workload is one Deployment and the HPA that scales it on one kind of
// metric, with values that hold it at its two replicas.
type workload struct {
	name   string
	metric autoscalingv2.MetricSpec
	// probe is the read the HPA controller makes for it, through the
	// aggregator.
	probe string
}

func workloads() []workload {
	avg := func(v string) autoscalingv2.MetricTarget {
		return autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse(v))}
	}
	val := func(v string) autoscalingv2.MetricTarget {
		return autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: ptr.To(resource.MustParse(v))}
	}
	sel := func(k, v string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
	}
	return []workload{
		{
			name: "web-pods",
			metric: autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "http_requests"}, Target: avg("2"),
			}},
			probe: "/apis/custom.metrics.k8s.io/v1beta2/namespaces/" + ns + "/pods/*/http_requests?labelSelector=" + url.QueryEscape("app=web-pods"),
		},
		{
			name: "web-object",
			metric: autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{
				DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web-object"},
				Metric:          autoscalingv2.MetricIdentifier{Name: "queue_length"}, Target: val("10"),
			}},
			probe: "/apis/custom.metrics.k8s.io/v1beta2/namespaces/" + ns + "/deployments.apps/web-object/queue_length",
		},
		{
			name: "web-external",
			metric: autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "queue_depth", Selector: sel("name", "orders")}, Target: val("30"),
			}},
			probe: "/apis/external.metrics.k8s.io/v1beta1/namespaces/" + ns + "/queue_depth?labelSelector=" + url.QueryEscape("name=orders"),
		},
		{
			name: "web-cpu",
			metric: autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(int32(50))},
			}},
			probe: "/apis/metrics.k8s.io/v1beta1/namespaces/" + ns + "/pods?labelSelector=" + url.QueryEscape("app=web-cpu"),
		},
	}
}

// TestReplacePrometheusAdapter: HPAs of every metric type scale on
// prometheus-adapter's metrics; Tidal takes the APIServices over; no HPA
// fails to read its metric and no replicas move, while a probe reading each
// metric as the HPA controller every 200 ms reports the longest stretch it
// could not.
func TestReplacePrometheusAdapter(t *testing.T) {
	opts := harness.Full()
	opts.HPAController = true
	opts.HPAControllerArgs = []string{fmt.Sprintf("--horizontal-pod-autoscaler-sync-period=%s", syncPeriod)}
	h := harness.StartT(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	tidal, err := harness.TidalBinary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	ws := workloads()
	for _, w := range ws {
		if err := startWorkload(ctx, h, w); err != nil {
			t.Fatal(err)
		}
	}
	rules, err := filepath.Abs("../peerdiff/testdata/legacy-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	relist := "--metrics-relist-interval=5s"
	peer, err := h.StartPrometheusAdapter(ctx, harness.PeerOptions{RuleFile: rules, Args: []string{relist}, APIServices: apis})
	if err != nil {
		t.Fatalf("start prometheus-adapter: %v", err)
	}
	// Every HPA reads its metric from prometheus-adapter and holds its
	// Deployment at 2.
	if err := harness.WaitReady(ctx, nil, "HPAs scaling on prometheus-adapter", 3*time.Minute, func(ctx context.Context) error {
		return allSteady(ctx, h, ws)
	}); err != nil {
		t.Fatal(err)
	}

	// Step 1: Tidal's adapter, serving but not registered.
	a, err := h.StartAdapter(ctx, harness.AdapterOptions{Binary: tidal, RuleFile: rules, Args: []string{relist}})
	if err != nil {
		t.Fatalf("start tidal adapter: %v", err)
	}
	if err := waitServes(ctx, h, a, ws); err != nil {
		t.Fatal(err)
	}

	cfg, err := h.RestConfigFor(harness.HPAServiceAccount)
	if err != nil {
		t.Fatal(err)
	}
	p := startProbe(t, h, cfg, ws)
	time.Sleep(3 * time.Second) // a baseline before the switch

	// Step 2: each APIService to Tidal's Service, one update each.
	switchStart := time.Now()
	for _, gv := range apis {
		if err := h.RegisterAPIService(ctx, a.Server(h.CA.CertPEM), gv[0], gv[1]); err != nil {
			t.Fatal(err)
		}
	}
	for _, gv := range apis {
		if err := h.WaitAPIServiceAvailable(ctx, gv[1]+"."+gv[0], time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("APIServices moved to Tidal and Available in %v", time.Since(switchStart).Round(time.Millisecond))
	// Step 3: prometheus-adapter goes.
	if err := peer.Process.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	// Four sync periods on Tidal alone.
	time.Sleep(4 * syncPeriod)
	res := p.stop()

	// The figures are reported, not asserted (wall time); what must hold
	// is on the HPAs' side: no sync failed to read a metric, and no
	// Deployment's replicas moved.
	for _, w := range ws {
		r := res[w.name]
		t.Logf("%s: %d reads through the aggregator, %d failed, longest failed stretch %v (HPA sync period %v)%s",
			w.name, r.reads, r.failed, r.longestGap.Round(time.Millisecond), syncPeriod, firstError(r))
		if r.reads == 0 {
			t.Errorf("%s: the probe read nothing", w.name)
		}
		if len(r.replicas) != 1 || r.replicas[0] != 2 {
			t.Errorf("%s: replicas seen during the switch %v, want only 2", w.name, r.replicas)
		}
	}
	failed, err := failedReads(ctx, h, switchStart)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range failed {
		t.Errorf("an HPA failed to read its metric during the switch: %s", e)
	}
	// And the HPAs read Tidal now: still steady, every metric current.
	if err := allSteady(ctx, h, ws); err != nil {
		t.Errorf("after the switch: %v", err)
	}
}

func firstError(r probeResult) string {
	if r.firstError == "" {
		return ""
	}
	return "; first failure: " + r.firstError
}

// failedReads lists the HPAs' events since `since` that say a metric could
// not be read or used (FailedGet*Metric, FailedComputeMetricsReplicas).
func failedReads(ctx context.Context, h *harness.Harness, since time.Time) ([]string, error) {
	evs, err := h.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=HorizontalPodAutoscaler"})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range evs.Items {
		last := e.LastTimestamp.Time
		if last.IsZero() {
			last = e.EventTime.Time
		}
		if last.Before(since.Truncate(time.Second)) {
			continue
		}
		if strings.HasPrefix(e.Reason, "FailedGet") || e.Reason == "FailedComputeMetricsReplicas" {
			out = append(out, fmt.Sprintf("%s %s: %s", e.InvolvedObject.Name, e.Reason, e.Message))
		}
	}
	return out, nil
}

// startWorkload creates the Deployment (2 replicas), sets its series and
// creates its HPA (1 to 10 replicas).
func startWorkload(ctx context.Context, h *harness.Harness, w workload) error {
	if _, err := h.Client.AppsV1().Deployments(ns).Create(ctx, harness.Deployment(ns, w.name, 2), metav1.CreateOptions{}); err != nil {
		return err
	}
	pods, err := h.WaitDeploymentReady(ctx, ns, w.name, 90*time.Second)
	if err != nil {
		return err
	}
	for _, p := range pods {
		l := exporter.Labels{"namespace": ns, "pod": p.Name}
		switch w.name {
		case "web-pods":
			h.Exporter.SetCounterRate("http_requests_total", l, 2)
		case "web-cpu":
			// 50m of the 100m request: 50%, the target. The pause
			// container uses nothing, as in real pods, so both servers
			// report the same usage (prometheus-adapter would count it).
			h.Exporter.SetCounterRate(exporter.ContainerCPU, exporter.Labels{"namespace": ns, "pod": p.Name, "container": "app", "instance": h.NodeName}, 0.05)
			h.Exporter.SetCounterRate(exporter.ContainerCPU, exporter.Labels{"namespace": ns, "pod": p.Name, "container": "POD", "instance": h.NodeName}, 0)
			h.Exporter.SetGauge(exporter.ContainerMemory, exporter.Labels{"namespace": ns, "pod": p.Name, "container": "app", "instance": h.NodeName}, 30<<20)
		}
	}
	switch w.name {
	case "web-object":
		h.Exporter.SetGauge("queue_length", exporter.Labels{"namespace": ns, "deployment": w.name}, 10)
	case "web-external":
		h.Exporter.SetGauge("queue_depth", exporter.Labels{"topic": "t1", "name": "orders"}, 30)
	}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: w.name, Namespace: ns},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: w.name},
			MinReplicas:    ptr.To(int32(1)),
			MaxReplicas:    10,
			Metrics:        []autoscalingv2.MetricSpec{w.metric},
		},
	}
	_, err = h.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, hpa, metav1.CreateOptions{})
	return err
}

// allSteady succeeds when every HPA has read its metric (ScalingActive,
// a current metric) and holds its Deployment at 2.
func allSteady(ctx context.Context, h *harness.Harness, ws []workload) error {
	for _, w := range ws {
		hpa, err := h.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, w.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		active := false
		for _, c := range hpa.Status.Conditions {
			if c.Type == autoscalingv2.ScalingActive {
				active = c.Status == corev1.ConditionTrue
				if !active {
					return fmt.Errorf("%s: ScalingActive %s %s: %s", w.name, c.Status, c.Reason, c.Message)
				}
			}
		}
		if !active || len(hpa.Status.CurrentMetrics) == 0 {
			return fmt.Errorf("%s: no metric read yet", w.name)
		}
		if hpa.Status.DesiredReplicas != 2 || hpa.Status.CurrentReplicas != 2 {
			return fmt.Errorf("%s: current %d, desired %d, want 2", w.name, hpa.Status.CurrentReplicas, hpa.Status.DesiredReplicas)
		}
	}
	return nil
}

// waitServes waits until Tidal's adapter, asked directly, answers every
// probe: its discovery has found the series.
func waitServes(ctx context.Context, h *harness.Harness, a *harness.Adapter, ws []workload) error {
	cfg := rest.CopyConfig(h.Admin)
	cfg.Host = a.URL("")
	cfg.TLSClientConfig.CAData = h.CA.CertPEM
	cfg.TLSClientConfig.CAFile = ""
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	return harness.WaitReady(ctx, a.Process, "tidal adapter serving every metric", 90*time.Second, func(ctx context.Context) error {
		for _, w := range ws {
			if err := read(ctx, c, a.URL(""), w.probe); err != nil {
				return fmt.Errorf("%s: %w", w.name, err)
			}
		}
		return nil
	})
}

// read GETs path and succeeds on a 200 with at least one item.
func read(ctx context.Context, c *http.Client, base, path string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	if !strings.Contains(string(body), `"items":[{`) {
		return fmt.Errorf("no items: %s", body)
	}
	return nil
}

// probeResult is what the probe saw of one workload.
type probeResult struct {
	reads, failed int
	// longestGap is the longest time from a failed read to the next
	// successful one (or the end).
	longestGap time.Duration
	firstError string
	// replicas are the distinct spec.replicas seen, sorted.
	replicas []int32
}

type probe struct {
	stopOnce sync.Once
	done     chan struct{}
	wg       sync.WaitGroup
	mu       sync.Mutex
	results  map[string]*probeResult
}

// startProbe reads each workload's metric through the aggregator as the
// HPA controller every 200 ms, and its Deployment's replicas.
func startProbe(t *testing.T, h *harness.Harness, cfg *rest.Config, ws []workload) *probe {
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := &probe{done: make(chan struct{}), results: map[string]*probeResult{}}
	for _, w := range ws {
		r := &probeResult{}
		p.results[w.name] = r
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			var failingSince time.Time
			seen := map[int32]bool{}
			tick := time.NewTicker(200 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-p.done:
					p.mu.Lock()
					if !failingSince.IsZero() {
						r.longestGap = max(r.longestGap, time.Since(failingSince))
					}
					for n := range seen {
						r.replicas = append(r.replicas, n)
					}
					sort.Slice(r.replicas, func(i, j int) bool { return r.replicas[i] < r.replicas[j] })
					p.mu.Unlock()
					return
				case <-tick.C:
				}
				err := read(context.Background(), c, h.APIServerURL, w.probe)
				d, derr := h.Client.AppsV1().Deployments(ns).Get(context.Background(), w.name, metav1.GetOptions{})
				p.mu.Lock()
				r.reads++
				if err != nil {
					r.failed++
					if r.firstError == "" {
						r.firstError = err.Error()
					}
					if failingSince.IsZero() {
						failingSince = time.Now()
					}
				} else if !failingSince.IsZero() {
					r.longestGap = max(r.longestGap, time.Since(failingSince))
					failingSince = time.Time{}
				}
				if derr == nil && d.Spec.Replicas != nil {
					seen[*d.Spec.Replicas] = true
				}
				p.mu.Unlock()
			}
		}()
	}
	return p
}

func (p *probe) stop() map[string]probeResult {
	p.stopOnce.Do(func() { close(p.done) })
	p.wg.Wait()
	out := map[string]probeResult{}
	for k, v := range p.results {
		out[k] = *v
	}
	return out
}

func TestMain(m *testing.M) {
	os.Exit(harness.RunTests(m))
}
