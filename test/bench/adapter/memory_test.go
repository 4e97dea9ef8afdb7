package adapter

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/tidal-autoscaler/tidal/test/bench/samples"
	"github.com/tidal-autoscaler/tidal/test/harness"
)

const memSeriesQuery = `{__name__=~"bench_mem_.*",namespace!="",pod!=""}`

func tlsConfig(h *harness.Harness) *tls.Config { return &tls.Config{RootCAs: h.CertPool()} }

// BenchmarkDiscoveryMemory measures what discovery of NAMES x LABELSETS
// series costs the adapter: RSS from idle to after the first discovery
// pass, and that pass's time over the raw /api/v1/series call.
//
// TIDAL_BENCH_DISCOVERY_SIZES ("1000x100,10000x100": NAMESxLABELSETS,
// comma-separated) runs several sizes one after the other on one
// harness, each as a sub-benchmark with its own series.
func BenchmarkDiscoveryMemory(b *testing.B) {
	sizes := os.Getenv("TIDAL_BENCH_DISCOVERY_SIZES")
	if sizes == "" {
		discoveryMemory(b, envInt("TIDAL_BENCH_NAMES", 1000), envInt("TIDAL_BENCH_LABELSETS", 100))
		return
	}
	for _, size := range strings.Split(sizes, ",") {
		var names, sets int
		if _, err := fmt.Sscanf(size, "%dx%d", &names, &sets); err != nil || names <= 0 || sets <= 0 {
			b.Fatalf("TIDAL_BENCH_DISCOVERY_SIZES: %q is not NAMESxLABELSETS", size)
		}
		b.Run(size, func(b *testing.B) { discoveryMemory(b, names, sets) })
	}
}

// discoveryMemory measures one size: names x sets series.
func discoveryMemory(b *testing.B, names, sets int) {
	h, bin, peer := setup(b)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	b.StopTimer()
	// The series come from a job of their own, scraped every 30 s: a
	// million series take longer to expose and ingest than the harness
	// exporter's 1 s timeout, and a scrape a second would keep Prometheus
	// busy through the measurement. (Every 2 s at the smoke run's sizes,
	// not to wait for the first scrape.)
	addr, err := discoverySeries.serve(names, sets)
	if err != nil {
		b.Fatal(err)
	}
	interval := 30 * time.Second
	if names*sets <= 10000 {
		interval = 2 * time.Second
	}
	if err := h.AddScrapeJob(ctx, harness.ScrapeJob{Name: "bench-discovery", Target: addr, Interval: interval, Timeout: interval}); err != nil {
		b.Fatal(err)
	}
	want := names * sets
	if err := harness.WaitReady(ctx, nil, "Prometheus holding the series", 10*time.Minute, func(ctx context.Context) error {
		n, err := promCount(ctx, h.PrometheusURL, `count({__name__=~"bench_mem_.*"})`)
		if err != nil {
			return err
		}
		if n != want {
			return fmt.Errorf("%d series, want %d", n, want)
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}

	rules := fmt.Sprintf(`rules:
- seriesQuery: '%s'
  resources:
    overrides:
      namespace: {resource: namespace}
      pod: {resource: pod}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
`, memSeriesQuery)
	// The sides take turns TIDAL_BENCH_ROUNDS times (A B A B ...) on the
	// same series.
	row := fmt.Sprintf("discovery/%d", want)
	for round := 1; round <= envInt("TIDAL_BENCH_ROUNDS", 1); round++ {
		rec := func(b *testing.B, side, metric string, v float64, unit string) {
			if err := samples.Record(samples.Sample{Row: row, Side: side, Round: round, Metric: metric, Value: v, Unit: unit}); err != nil {
				b.Errorf("samples: %v", err)
			}
		}
		b.Run("tidal", func(b *testing.B) { tidalDiscovery(ctx, b, h, bin, rules, names, sets, rec) })
		if peer != "" {
			b.Run("prometheus-adapter", func(b *testing.B) { peerDiscovery(ctx, b, h, peer, rules, names, sets, rec) })
		}
	}
}

// discoverySeries serves the discovery benchmark's series as one text
// exposition built once per size: every size of a run is served from the
// same address, so a bigger size's series are the smaller's and more (an
// instance label that changed would leave the smaller size's series in the
// adapter's window for another minute).
var discoverySeries exposition

// exposition is a static /metrics page on 127.0.0.1.
type exposition struct {
	once sync.Once
	addr string
	err  error
	body atomic.Pointer[[]byte]
}

// serve makes the page names x sets gauges bench_mem_NNNN{namespace, pod}
// and returns its HOST:PORT.
func (e *exposition) serve(names, sets int) (string, error) {
	var buf bytes.Buffer
	for i := range names {
		for j := range sets {
			fmt.Fprintf(&buf, "bench_mem_%04d{namespace=%q,pod=\"mem-%04d\"} %d\n", i, benchNamespace, j, j)
		}
	}
	body := buf.Bytes()
	e.body.Store(&body)
	e.once.Do(func() {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			e.err = err
			return
		}
		e.addr = l.Addr().String()
		go func() {
			_ = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/plain; version=0.0.4")
				_, _ = w.Write(*e.body.Load())
			}))
		}()
	})
	return e.addr, e.err
}

// recorder appends one figure of one side to the samples file.
type recorder func(b *testing.B, side, metric string, v float64, unit string)

// tidalDiscovery measures `tidal adapter`: idle RSS with an empty rule
// file, then the hot reload to rules and its first discovery pass.
func tidalDiscovery(ctx context.Context, b *testing.B, h *harness.Harness, bin, rules string, names, sets int, rec recorder) {
	b.StopTimer()
	want := names * sets
	// Start idle (rules matching nothing), then switch the rule file and
	// let the hot reload start discovery.
	dir := b.TempDir()
	ruleFile := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(ruleFile, []byte("rules: []\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	a, err := h.StartAdapter(ctx, harness.AdapterOptions{Binary: bin, RuleFile: ruleFile, Args: []string{"--config-check-interval=1s"}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = a.Process.Stop(10 * time.Second) })
	direct := directClient(b, h, a.URL(""))
	time.Sleep(3 * time.Second) // let start-up allocations settle
	pid := a.Process.PID()
	idle, err := harness.StatusKiB(pid, "VmRSS")
	if err != nil {
		b.Fatal(err)
	}
	idlePeak, _ := harness.StatusKiB(pid, "VmHWM")

	// One raw call first, not counted: the first /api/v1/series call after
	// a while costs Prometheus more than the next ones, and the adapter's
	// pass must not be the one that pays it while the raw calls after it
	// do not.
	if _, _, err := rawSeries(ctx, h.PrometheusURL, memSeriesQuery, time.Minute); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(ruleFile, []byte(rules), 0o600); err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	var relist float64
	if err := harness.WaitReady(ctx, a.Process, "discovery of the loaded series", 5*time.Minute, func(ctx context.Context) error {
		m, err := scrape(ctx, direct, a.URL("/metrics"))
		if err != nil {
			return err
		}
		if got := m[`tidal_adapter_discovered_metrics{api="custom"}`]; int(got) < names {
			return fmt.Errorf("%v custom metrics discovered, want %d", got, names)
		}
		count := m[`tidal_adapter_discovery_duration_seconds_count{result="success",rule="rules[0]"}`]
		if count < 1 {
			return fmt.Errorf("no successful discovery pass of rules[0] recorded yet")
		}
		relist = m[`tidal_adapter_discovery_duration_seconds_sum{result="success",rule="rules[0]"}`] / count
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	// The raw call, right after, with the adapter's window (--metrics-max-age
	// defaults to the 1m relist interval).
	var raw []time.Duration
	var rawBytes int64
	for range 3 {
		d, n, err := rawSeries(ctx, h.PrometheusURL, memSeriesQuery, time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		raw, rawBytes = append(raw, d), n
	}
	time.Sleep(2 * time.Second)
	after, err := harness.StatusKiB(pid, "VmRSS")
	if err != nil {
		b.Fatal(err)
	}
	peak, _ := harness.StatusKiB(pid, "VmHWM")
	rawMedian := median(raw)
	b.ReportMetric((after-idle)/1024, "rss-delta-MiB")
	b.ReportMetric((peak-idlePeak)/1024, "peak-delta-MiB")
	b.ReportMetric(relist/rawMedian.Seconds(), "relist-ratio")
	b.ReportMetric(relist*1000, "relist-ms")
	b.ReportMetric(0, "ns/op")
	rec(b, "tidal", "rss-growth", (after-idle)/1024, "MiB")
	rec(b, "tidal", "peak-growth", (peak-idlePeak)/1024, "MiB")
	rec(b, "tidal", "relist", relist*1000, "ms")
	rec(b, "raw-series", "relist", float64(rawMedian)/float64(time.Millisecond), "ms")
	b.Logf("%d series (%d names x %d label sets): adapter RSS %.1f MiB idle -> %.1f MiB after discovery (peak %.1f -> %.1f MiB); relist %.0f ms vs raw /api/v1/series %s (median of %v, %d bytes): ratio %.2f",
		want, names, sets, idle/1024, after/1024, idlePeak/1024, peak/1024, relist*1000, rawMedian.Round(time.Millisecond), raw, rawBytes, relist/rawMedian.Seconds())
}

// peerDiscovery measures prometheus-adapter: it discovers at start, so
// its RSS once the metrics are listed (rss-MiB) is measured, and its
// growth over the RSS of the same binary started with no rules, 3 s after
// its start (the idle figure tidal's growth starts from).
func peerDiscovery(ctx context.Context, b *testing.B, h *harness.Harness, bin, rules string, names, sets int, rec recorder) {
	b.StopTimer()
	dir := b.TempDir()
	idleRules := filepath.Join(dir, "idle.yaml")
	if err := os.WriteFile(idleRules, []byte("rules: []\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	idlePeer, err := startPeer(ctx, b, h, bin, idleRules, nil)
	if err != nil {
		b.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	idle, err := harness.StatusKiB(idlePeer.pid, "VmRSS")
	if err != nil {
		b.Fatal(err)
	}
	idlePeer.stop()
	ruleFile := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(ruleFile, []byte(rules), 0o600); err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	s, err := startPeer(ctx, b, h, bin, ruleFile, nil)
	if err != nil {
		b.Fatal(err)
	}
	direct := directClient(b, h, s.url)
	if err := harness.WaitReady(ctx, nil, "prometheus-adapter discovery", 5*time.Minute, func(ctx context.Context) error {
		n, err := resourceCount(ctx, direct, s.url+"/apis/custom.metrics.k8s.io/v1beta1")
		if err != nil {
			return err
		}
		if n < names {
			return fmt.Errorf("%d custom metrics listed, want at least %d", n, names)
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	time.Sleep(2 * time.Second)
	rss, err := harness.StatusKiB(s.pid, "VmRSS")
	if err != nil {
		b.Fatal(err)
	}
	peak, _ := harness.StatusKiB(s.pid, "VmHWM")
	b.ReportMetric(rss/1024, "rss-MiB")
	b.ReportMetric(peak/1024, "peak-MiB")
	b.ReportMetric((rss-idle)/1024, "rss-delta-MiB")
	b.ReportMetric(0, "ns/op")
	rec(b, "prometheus-adapter", "rss-growth", (rss-idle)/1024, "MiB")
	rec(b, "prometheus-adapter", "rss", rss/1024, "MiB")
	b.Logf("prometheus-adapter with %d series (%d names x %d label sets): RSS %.1f MiB idle (no rules) -> %.1f MiB after discovery (peak %.1f MiB)", names*sets, names, sets, idle/1024, rss/1024, peak/1024)
}

// directClient reaches an adapter's port directly as the harness admin
// (delegated authentication accepts the harness's client certificates).
func directClient(b *testing.B, h *harness.Harness, base string) *http.Client {
	admin := rest.CopyConfig(h.Admin)
	admin.Host = base
	admin.TLSClientConfig.CAData, admin.TLSClientConfig.CAFile = h.CA.CertPEM, ""
	admin.TLSClientConfig.ServerName = "localhost"
	tr, err := rest.TransportFor(admin)
	if err != nil {
		b.Fatal(err)
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// resourceCount counts the resources of an API group version's discovery
// document.
func resourceCount(ctx context.Context, c *http.Client, u string) (int, error) {
	body, err := get(ctx, c, u)
	if err != nil {
		return 0, err
	}
	var l struct {
		Resources []json.RawMessage `json:"resources"`
	}
	if err := json.Unmarshal(body, &l); err != nil {
		return 0, err
	}
	return len(l.Resources), nil
}

// promCount evaluates a query giving one number.
func promCount(ctx context.Context, base, query string) (int, error) {
	body, err := get(ctx, http.DefaultClient, base+"/api/v1/query?query="+url.QueryEscape(query))
	if err != nil {
		return 0, err
	}
	var r struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return 0, err
	}
	if len(r.Data.Result) == 0 {
		return 0, nil
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	f, err := strconv.ParseFloat(s, 64)
	return int(f), err
}

// rawSeries times GET /api/v1/series for selector over the last window,
// reading the whole body, as a plain client would.
func rawSeries(ctx context.Context, base, selector string, window time.Duration) (time.Duration, int64, error) {
	end := time.Now()
	q := url.Values{"match[]": {selector}, "start": {strconv.FormatInt(end.Add(-window).Unix(), 10)}, "end": {strconv.FormatInt(end.Unix(), 10)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/series?"+q.Encode(), nil)
	if err != nil {
		return 0, 0, err
	}
	began := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	d := time.Since(began)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("series: %s", resp.Status)
	}
	return d, n, err
}

// scrape reads a Prometheus text exposition into "name{labels}" -> value.
func scrape(ctx context.Context, c *http.Client, u string) (map[string]float64, error) {
	body, err := get(ctx, c, u)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}
