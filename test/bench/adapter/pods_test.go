package adapter

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	cmv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/tidal-autoscaler/tidal/test/bench/samples"
	"github.com/tidal-autoscaler/tidal/test/exporter"
	"github.com/tidal-autoscaler/tidal/test/harness"
)

const (
	benchNamespace = "bench"
	benchApp       = "web"
	podsRules      = `rules:
- seriesQuery: 'bench_http_requests_total{namespace!="",pod!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
      pod: {resource: pod}
  name: {matches: "^bench_(.*)_total$", as: "${1}_per_second"}
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[1m])) by (<<.GroupBy>>)'
`
	podsMetric = "http_requests_per_second"
)

// podsWorkload creates the Deployment and one counter per pod, once.
var podsWorkload struct {
	once  sync.Once
	pods  int
	names []string
	err   error
}

func ensurePods(ctx context.Context, h *harness.Harness, n int) error {
	podsWorkload.once.Do(func() {
		if err := h.EnsureNamespace(ctx, benchNamespace); err != nil {
			podsWorkload.err = err
			return
		}
		if _, err := h.Client.AppsV1().Deployments(benchNamespace).Create(ctx, harness.Deployment(benchNamespace, benchApp, int32(n)), metav1.CreateOptions{}); err != nil {
			podsWorkload.err = err
			return
		}
		pods, err := h.WaitDeploymentReady(ctx, benchNamespace, benchApp, 5*time.Minute)
		if err != nil {
			podsWorkload.err = err
			return
		}
		for i, p := range pods {
			h.Exporter.SetCounterRate("bench_http_requests_total", exporter.Labels{"namespace": benchNamespace, "pod": p.Name}, float64(i%10+1))
			podsWorkload.names = append(podsWorkload.names, p.Name)
		}
		podsWorkload.pods = len(pods)
	})
	return podsWorkload.err
}

// startServer starts `tidal adapter` (default flags) or prometheus-adapter
// with rules and registers it for apis (GROUP, VERSION pairs), replacing
// the other one.
func startServer(ctx context.Context, b *testing.B, h *harness.Harness, kind, bin, rules string, apis [][2]string, args ...string) (*server, error) {
	ruleFile := filepath.Join(b.TempDir(), "rules.yaml")
	if err := os.WriteFile(ruleFile, []byte(rules), 0o600); err != nil {
		return nil, err
	}
	if kind == "noop" {
		a, err := h.StartNoopAdapter(ctx, harness.NoopOptions{Binary: bin, Items: podsWorkload.pods, Namespace: benchNamespace, Metric: podsMetric, APIServices: apis})
		if err != nil {
			return nil, err
		}
		b.Cleanup(func() { _ = a.Process.Stop(10 * time.Second) })
		return &server{name: kind, pid: a.Process.PID(), url: a.URL("")}, nil
	}
	if kind == "tidal" || kind == "baseline" {
		if os.Getenv("TIDAL_BENCH_PPROF") != "" {
			args = append(args[:len(args):len(args)], "--profiling") // off by default
		}
		a, err := h.StartAdapter(ctx, harness.AdapterOptions{Binary: bin, RuleFile: ruleFile, Args: args, APIServices: apis})
		if err != nil {
			return nil, err
		}
		b.Cleanup(func() { _ = a.Process.Stop(10 * time.Second) })
		return &server{name: kind, pid: a.Process.PID(), url: a.URL("")}, nil
	}
	return startPeer(ctx, b, h, bin, ruleFile, apis, args...)
}

// startPeer runs prometheus-adapter v0.12 with default flags as the
// tidal-adapter service account (StartAdapter bound its RBAC), serving on
// its own Service name.
func startPeer(ctx context.Context, b *testing.B, h *harness.Harness, bin, ruleFile string, apis [][2]string, extra ...string) (*server, error) {
	const ns, svc = "tidal-system", "prometheus-adapter"
	kubeconfig, _, err := h.Kubeconfig(harness.ServiceAccountIdentity("tidal-system", "tidal-adapter"))
	if err != nil {
		return nil, err
	}
	kp, err := h.ServingCertFor(ns, svc)
	if err != nil {
		return nil, err
	}
	certFile, keyFile, err := kp.WriteFiles(h.Dir, "peer-serving")
	if err != nil {
		return nil, err
	}
	var s *server
	var port int
	err = harness.OnFreePorts(1, func(ports []int) error {
		port = ports[0]
		args := append([]string{
			"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port),
			"--tls-cert-file=" + certFile, "--tls-private-key-file=" + keyFile,
			"--lister-kubeconfig=" + kubeconfig, "--authentication-kubeconfig=" + kubeconfig, "--authorization-kubeconfig=" + kubeconfig,
			"--prometheus-url=" + h.PrometheusURL, "--config=" + ruleFile,
			"--metrics-relist-interval=1m",
		}, extra...)
		p, err := h.StartProcess("prometheus-adapter", bin, args, port)
		if err != nil {
			return err
		}
		b.Cleanup(func() { _ = p.Stop(10 * time.Second) })
		s = &server{name: "prometheus-adapter", pid: p.PID(), url: fmt.Sprintf("https://127.0.0.1:%d", port), stop: func() { _ = p.Stop(10 * time.Second) }}
		probe := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig(h)}}
		return harness.WaitReady(ctx, p, "prometheus-adapter /healthz", 90*time.Second, func(ctx context.Context) error {
			return httpGetOK(ctx, probe, s.url+"/healthz")
		})
	})
	if err != nil {
		return nil, err
	}
	srv := harness.AggregatedServer{Namespace: ns, Service: svc, Port: port, CABundle: h.CA.CertPEM}
	for _, gv := range apis {
		if err := h.RegisterAPIService(ctx, srv, gv[0], gv[1]); err != nil {
			return nil, err
		}
	}
	for _, gv := range apis {
		if err := h.WaitAPIServiceAvailable(ctx, gv[1]+"."+gv[0], 60*time.Second); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// BenchmarkPodsCustomMetric measures pods/* custom-metric requests through
// the aggregator as the HPA makes them.
func BenchmarkPodsCustomMetric(b *testing.B) {
	runScenario(b, scenario{
		name:  "pods",
		rules: podsRules,
		apis:  [][2]string{{"custom.metrics.k8s.io", "v1beta1"}, {"custom.metrics.k8s.io", "v1beta2"}},
		path:  fmt.Sprintf("/apis/custom.metrics.k8s.io/v1beta2/namespaces/%s/pods/*/%s?labelSelector=app%%3D%s", benchNamespace, podsMetric, benchApp),
	})
}

// scenario is one request the HPA makes, served by each server in turn.
type scenario struct {
	// name prefixes the rows of its samples (NAME/ROUTE).
	name string
	// rules is the rule file; apis the APIServices each server is
	// registered for.
	rules string
	apis  [][2]string
	// path is the request, through the aggregator; its answer is a list
	// with one item per bench pod.
	path string
	// prepare, when set, runs once the pods are ready.
	prepare func(ctx context.Context, h *harness.Harness) error
}

// runScenario serves sc by tidal and, when TIDAL_BENCH_PEER is set,
// prometheus-adapter, and when TIDAL_BENCH_NOOP is set the no-op server,
// and loads each with clients as the HPA's identity. With
// TIDAL_BENCH_ROUNDS=N the servers take turns N times (A B C A B C ...),
// so that a drift of the machine's load shows in every side's spread
// rather than in one side's figure.
func runScenario(b *testing.B, sc scenario) {
	h, bin, peer := setup(b)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	pods := envInt("TIDAL_BENCH_PODS", 100)
	if err := ensurePods(ctx, h, pods); err != nil {
		b.Fatal(err)
	}
	if sc.prepare != nil {
		if err := sc.prepare(ctx, h); err != nil {
			b.Fatal(err)
		}
	}
	servers := []struct{ name, bin string }{{"tidal", bin}}
	if base := os.Getenv("TIDAL_BENCH_BASELINE"); base != "" {
		servers = append(servers, struct{ name, bin string }{"baseline", base})
	}
	if peer != "" {
		servers = append(servers, struct{ name, bin string }{"prometheus-adapter", peer})
	} else {
		b.Log("TIDAL_BENCH_PEER unset: prometheus-adapter not run")
	}
	if noop := os.Getenv("TIDAL_BENCH_NOOP"); noop != "" {
		if noop == "build" {
			noop = "" // StartNoopAdapter builds it
		}
		servers = append(servers, struct{ name, bin string }{"noop", noop})
	}
	for round := 1; round <= envInt("TIDAL_BENCH_ROUNDS", 1); round++ {
		for _, s := range servers {
			b.Run(s.name, func(b *testing.B) {
				b.StopTimer()
				var args []string
				if s.name == "prometheus-adapter" {
					args = strings.Fields(os.Getenv("TIDAL_BENCH_PEER_ARGS"))
				}
				srv, err := startServer(ctx, b, h, s.name, s.bin, sc.rules, sc.apis, args...)
				if err != nil {
					b.Fatal(err)
				}
				for _, route := range routes() {
					b.Run(route, func(b *testing.B) {
						b.StopTimer()
						res := runLoad(ctx, b, h, s.name, srv, route, sc.path)
						recordLoad(b, sc.name+"/"+route, s.name, round, res)
					})
				}
			})
		}
	}
}

// recordLoad appends one load's figures to the samples file.
func recordLoad(b *testing.B, row, side string, round int, res loadResult) {
	figures := []samples.Sample{
		{Metric: "rps", Value: res.rps, Unit: "req/s"},
		{Metric: "p50", Value: ms(res.p50), Unit: "ms"},
		{Metric: "p99", Value: ms(res.p99), Unit: "ms"},
		{Metric: "cpu-per-request", Value: res.cpuPerReq * 1e6, Unit: "CPU-µs"},
		{Metric: "errors", Value: float64(res.errors), Unit: "requests"},
	}
	if v, ok := res.othersPerReq["kube-apiserver"]; ok {
		figures = append(figures, samples.Sample{Metric: "kube-apiserver-cpu-per-request", Value: v * 1e6, Unit: "CPU-µs"})
	}
	for _, f := range figures {
		f.Row, f.Side, f.Round = row, side, round
		if err := samples.Record(f); err != nil {
			b.Errorf("samples: %v", err)
		}
	}
}

// routes are the ways the load reaches the adapter (TIDAL_BENCH_ROUTES,
// comma-separated): "aggregator", through kube-apiserver as the HPA's
// requests go; "direct", to the adapter's port, so that kube-apiserver's
// proxying (about as much CPU per request as the adapter's own on this
// machine) is not in the figure.
func routes() []string {
	if v := os.Getenv("TIDAL_BENCH_ROUTES"); v != "" {
		return strings.Split(v, ",")
	}
	return []string{"aggregator", "direct"}
}

// runLoad loads one server by one route as the HPA controller and reports
// the figures. The clients authenticate as kube-controller-manager's HPA
// controller does (--use-service-account-credentials): with a token of the
// kube-system/horizontal-pod-autoscaler ServiceAccount, which kube-apiserver
// and the adapter verify once and then find in their token caches. (With
// a client certificate kube-apiserver verifies the chain on every request:
// 16% of its CPU in this load.)
func runLoad(ctx context.Context, b *testing.B, h *harness.Harness, name string, srv *server, route, path string) loadResult {
	hpa, err := h.RestConfigForServiceAccountToken(ctx, "kube-system", "horizontal-pod-autoscaler", time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	base := h.APIServerURL
	switch route {
	case "aggregator":
	case "direct":
		base = srv.url
		hpa.Host = srv.url
		hpa.TLSClientConfig.CAData, hpa.TLSClientConfig.CAFile = h.CA.CertPEM, ""
		hpa.TLSClientConfig.ServerName = "localhost"
	default:
		b.Fatalf("TIDAL_BENCH_ROUTES: unknown route %q (aggregator, direct)", route)
	}
	clients := envInt("TIDAL_BENCH_CLIENTS", 32)
	hpa.QPS, hpa.Burst = -1, 0 // the load is the point: no client-side limit
	tr, err := rest.TransportFor(hpa)
	if err != nil {
		b.Fatal(err)
	}
	if t, ok := tr.(*http.Transport); ok {
		t.MaxIdleConnsPerHost = clients
	}
	client := &http.Client{Transport: tr, Timeout: 60 * time.Second}
	url := base + path

	// Correctness first: every pod has a value before the load.
	if err := harness.WaitReady(ctx, nil, name+" serving "+path, 3*time.Minute, func(ctx context.Context) error {
		n, err := fetch(ctx, client, url)
		if err != nil {
			return err
		}
		if n != podsWorkload.pods {
			return fmt.Errorf("%d items, want %d", n, podsWorkload.pods)
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}

	var prof, apiProf *profiler
	if name == "tidal" || name == "baseline" {
		prof = startProfile(ctx, b, h, srv.url, b.Name())
		if route == "aggregator" {
			apiProf = startAPIServerProfile(ctx, b, h, b.Name())
		}
	}
	others := h.PIDs()
	others["load generator (this process)"] = os.Getpid()
	res, err := load(ctx, client, url, srv.pid, others, clients,
		envInt("TIDAL_BENCH_REQUESTS", 5000), envDuration("TIDAL_BENCH_DURATION", 30*time.Second), b)
	prof.wait(b)
	apiProf.wait(b)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(res.rps, "rps")
	b.ReportMetric(ms(res.p50), "p50-ms")
	b.ReportMetric(ms(res.p99), "p99-ms")
	b.ReportMetric(res.cpuPerReq*1000, "cpu-ms/req")
	b.ReportMetric(float64(res.errors), "errors")
	b.ReportMetric(0, "ns/op")
	var parts []string
	for proc, v := range res.othersPerReq {
		if v >= 0.00001 {
			parts = append(parts, fmt.Sprintf("%s %.2f", proc, v*1000))
		}
	}
	sort.Strings(parts)
	b.Logf("%s via %s (Accept %s): %d requests (%d errors) by %d clients in %s: %.1f req/s, p50 %s, p99 %s, adapter CPU %.2f ms/request; first error: %v",
		name, route, accept(), res.requests, res.errors, clients, res.elapsed.Round(time.Millisecond), res.rps, res.p50, res.p99, res.cpuPerReq*1000, res.firstErr)
	b.Logf("%s via %s: CPU ms/request of the other processes: %s", name, route, strings.Join(parts, ", "))
	return res
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// accept is what the load asks for: kube-controller-manager's clients,
// the HPA's metrics clients among them, send protobuf
// (--kube-api-content-type's default) and accept anything else after it;
// TIDAL_BENCH_ACCEPT=json asks for JSON, as kubectl does.
func accept() string {
	if os.Getenv("TIDAL_BENCH_ACCEPT") == "json" {
		return "application/json"
	}
	return "application/vnd.kubernetes.protobuf, */*"
}

// metricsCodecs decode the lists the benchmark reads, from JSON or
// protobuf.
var metricsCodecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	utilruntime.Must(cmv1beta2.AddToScheme(s))
	utilruntime.Must(metricsv1beta1.AddToScheme(s))
	return serializer.NewCodecFactory(s)
}()

// fetch GETs a MetricValueList or PodMetricsList as the HPA does and
// returns its item count.
func fetch(ctx context.Context, c *http.Client, url string) (int, error) {
	return (&checker{}).fetch(ctx, c, url)
}

// checker checks every answer of one load client. An answer byte for
// byte the same as the last one it decoded has that one's item count
// without decoding it again: the load generator shares the machine with
// the adapter, and decoding a 100-item list was most of its CPU.
type checker struct {
	last  []byte
	items int
}

func (ck *checker) fetch(ctx context.Context, c *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", accept())
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s: %.300s", url, resp.Status, body)
	}
	if want := strings.TrimSuffix(accept(), ", */*"); resp.Header.Get("Content-Type") != want {
		return 0, fmt.Errorf("GET %s: Content-Type %q, want %q", url, resp.Header.Get("Content-Type"), want)
	}
	if ck.last != nil && bytes.Equal(body, ck.last) {
		return ck.items, nil
	}
	obj, _, err := metricsCodecs.UniversalDeserializer().Decode(body, nil, nil)
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", url, err)
	}
	switch l := obj.(type) {
	case *cmv1beta2.MetricValueList:
		ck.last, ck.items = body, len(l.Items)
	case *metricsv1beta1.PodMetricsList:
		ck.last, ck.items = body, len(l.Items)
	default:
		return 0, fmt.Errorf("GET %s: a %T, want a metric list", url, obj)
	}
	return ck.items, nil
}

type loadResult struct {
	requests, errors int
	firstErr         error
	elapsed          time.Duration
	rps              float64
	p50, p99         time.Duration
	cpuPerReq        float64
	// othersPerReq is the CPU seconds per request of the other processes
	// on the machine (kube-apiserver, Prometheus, the load generator...).
	othersPerReq map[string]float64
}

// load runs clients concurrent loops until maxRequests were sent or
// maxTime passed, and measures the server process's CPU meanwhile. The
// benchmark timer runs only during the load.
func load(ctx context.Context, c *http.Client, url string, pid int, others map[string]int, clients, maxRequests int, maxTime time.Duration, b *testing.B) (loadResult, error) {
	var res loadResult
	cpu0, err := harness.CPUSeconds(pid)
	if err != nil {
		return res, err
	}
	othersCPU0 := map[string]float64{}
	for name, p := range others {
		if v, err := harness.CPUSeconds(p); err == nil {
			othersCPU0[name] = v
		}
	}
	ctx, cancel := context.WithTimeout(ctx, maxTime)
	defer cancel()
	var sent atomic.Int64
	lat := make([][]time.Duration, clients)
	errs := make([]int, clients)
	var firstErr atomic.Value
	var wg sync.WaitGroup
	b.StartTimer()
	began := time.Now()
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ck checker
			for sent.Add(1) <= int64(maxRequests) && ctx.Err() == nil {
				t := time.Now()
				n, err := ck.fetch(ctx, c, url)
				if err == nil && n != podsWorkload.pods {
					err = fmt.Errorf("%d items, want %d", n, podsWorkload.pods)
				}
				if ctx.Err() != nil {
					return // cut by the time bound: not counted
				}
				lat[i] = append(lat[i], time.Since(t))
				if err != nil {
					errs[i]++
					firstErr.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(began)
	b.StopTimer()
	cpu1, err := harness.CPUSeconds(pid)
	if err != nil {
		return res, err
	}
	var all []time.Duration
	for i := range clients {
		all = append(all, lat[i]...)
		res.errors += errs[i]
	}
	if e, ok := firstErr.Load().(error); ok {
		res.firstErr = e
	}
	res.requests = len(all)
	if res.requests == 0 {
		return res, fmt.Errorf("no request completed within %s", maxTime)
	}
	sortDurations(all)
	res.p50, res.p99 = percentile(all, 50), percentile(all, 99)
	res.rps = float64(res.requests) / res.elapsed.Seconds()
	res.cpuPerReq = (cpu1 - cpu0) / float64(res.requests)
	res.othersPerReq = map[string]float64{}
	for name, v0 := range othersCPU0 {
		if v1, err := harness.CPUSeconds(others[name]); err == nil {
			res.othersPerReq[name] = (v1 - v0) / float64(res.requests)
		}
	}
	return res, nil
}
