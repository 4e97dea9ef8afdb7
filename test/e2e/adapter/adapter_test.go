package adapter

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/rest"

	"github.com/tidal-autoscaler/tidal/test/harness"
)

// promQuery asks the harness's Prometheus directly: the oracle.
func promQuery(ctx context.Context, h *harness.Harness, q string, ts time.Time) (model.Vector, error) {
	c, err := promapi.NewClient(promapi.Config{Address: h.PrometheusURL})
	if err != nil {
		return nil, err
	}
	if ts.IsZero() {
		ts = time.Now()
	}
	v, _, err := promv1.NewAPI(c).Query(ctx, q, ts)
	if err != nil {
		return nil, err
	}
	vec, ok := v.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("query %s returned %s", q, v.Type())
	}
	return vec, nil
}

// item is what both metric APIs' items have in common (v1beta1 and
// v1beta2 custom metrics, v1beta1 external metrics).
type item struct {
	DescribedObject struct {
		Kind, Namespace, Name, APIVersion string
	} `json:"describedObject"`
	Metric struct {
		Name string `json:"name"`
	} `json:"metric"`
	MetricName    string            `json:"metricName"`
	MetricLabels  map[string]string `json:"metricLabels"`
	Timestamp     time.Time         `json:"timestamp"`
	WindowSeconds *int64            `json:"windowSeconds"`
	Window        *int64            `json:"window"`
	Value         string            `json:"value"`
}

type list struct {
	Kind  string `json:"kind"`
	Items []item `json:"items"`
}

type status struct {
	Code    int    `json:"code"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// client is an HTTP client acting as an identity through the apiserver.
func client(t *testing.T, cfg *rest.Config) *http.Client {
	t.Helper()
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Timeout = 30 * time.Second
	return c
}

func hpaClient(t *testing.T) *http.Client {
	t.Helper()
	cfg, err := need(t).RestConfigFor(harness.HPAServiceAccount)
	if err != nil {
		t.Fatal(err)
	}
	return client(t, cfg)
}

func get(t *testing.T, c *http.Client, base, path string) (int, []byte) {
	t.Helper()
	resp, err := c.Get(base + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

func getList(t *testing.T, c *http.Client, path string) list {
	t.Helper()
	code, body := get(t, c, env.h.APIServerURL, path)
	if code != http.StatusOK {
		t.Fatalf("GET %s = %d %s", path, code, body)
	}
	var l list
	if err := json.Unmarshal(body, &l); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, body)
	}
	return l
}

func getStatus(t *testing.T, c *http.Client, path string) status {
	t.Helper()
	code, body := get(t, c, env.h.APIServerURL, path)
	var st status
	_ = json.Unmarshal(body, &st)
	if st.Code == 0 {
		st.Code = code
	}
	return st
}

// milli is a served value in milli-units, rounded.
func milli(t *testing.T, v string) int64 {
	t.Helper()
	q, err := resource.ParseQuantity(v)
	if err != nil {
		t.Fatalf("value %q: %v", v, err)
	}
	return int64(math.Round(q.AsApproximateFloat64() * 1000))
}

// sameAsPrometheus checks that an item's value is what Prometheus answers
// for query at the item's own timestamp, rounded to milli-units. The API
// serializes timestamps to the second, so the oracle evaluates up to a
// second earlier: steady rates then differ by scrape jitter only, which
// the tolerance of 1m or 0.2% covers.
func sameAsPrometheus(t *testing.T, it item, query string) {
	t.Helper()
	vec, err := promQuery(context.Background(), env.h, query, it.Timestamp)
	if err != nil {
		t.Fatalf("oracle query %s: %v", query, err)
	}
	if len(vec) != 1 {
		t.Fatalf("oracle query %s at %s: %d samples, want 1", query, it.Timestamp, len(vec))
	}
	want := int64(math.Round(float64(vec[0].Value) * 1000))
	if got := milli(t, it.Value); math.Abs(float64(got-want)) > math.Max(1, 0.002*float64(want)) {
		t.Errorf("%s %s: adapter %s (%dm), Prometheus %v (%dm) for %s at %s", it.DescribedObject.Name, it.Metric.Name, it.Value, got, vec[0].Value, want, query, it.Timestamp)
	}
	if time.Since(it.Timestamp) > time.Minute || it.Timestamp.IsZero() {
		t.Errorf("timestamp %s is not a fresh sample time", it.Timestamp)
	}
}

const cm2, cm1, em1 = "/apis/custom.metrics.k8s.io/v1beta2", "/apis/custom.metrics.k8s.io/v1beta1", "/apis/external.metrics.k8s.io/v1beta1"

func rateQuery(matchers, by string) string {
	return fmt.Sprintf(`sum(rate(http_requests_total{%s}[30s])) by (%s)`, matchers, by)
}

func TestCustomMetrics(t *testing.T) {
	need(t)
	c := hpaClient(t)
	pod0 := env.pods[0]

	t.Run("named pod", func(t *testing.T) {
		l := getList(t, c, cm2+"/namespaces/e2e/pods/"+pod0+"/http_requests_per_second")
		if len(l.Items) != 1 {
			t.Fatalf("%d items, want 1", len(l.Items))
		}
		it := l.Items[0]
		if it.DescribedObject.APIVersion != "v1" || it.DescribedObject.Kind != "Pod" || it.DescribedObject.Name != pod0 || it.DescribedObject.Namespace != ns {
			t.Errorf("describedObject = %+v", it.DescribedObject)
		}
		if it.WindowSeconds == nil || *it.WindowSeconds != 30 {
			t.Errorf("windowSeconds = %v, want 30", it.WindowSeconds)
		}
		sameAsPrometheus(t, it, rateQuery(fmt.Sprintf(`namespace="e2e",pod=%q`, pod0), "pod"))
	})

	t.Run("pods/* with a label selector and a metric selector", func(t *testing.T) {
		q := url.Values{"labelSelector": {"app=web"}, "metricLabelSelector": {"code=200"}}
		l := getList(t, c, cm2+"/namespaces/e2e/pods/*/http_requests_per_second?"+q.Encode())
		if len(l.Items) != len(env.pods) {
			t.Fatalf("%d items, want %d", len(l.Items), len(env.pods))
		}
		for _, it := range l.Items {
			sameAsPrometheus(t, it, rateQuery(fmt.Sprintf(`code="200",namespace="e2e",pod=%q`, it.DescribedObject.Name), "pod"))
		}
		// != works (prometheus-adapter answers 500).
		q = url.Values{"labelSelector": {"app=web"}, "metricLabelSelector": {"code!=200"}}
		l = getList(t, c, cm2+"/namespaces/e2e/pods/*/http_requests_per_second?"+q.Encode())
		if len(l.Items) != 1 || l.Items[0].DescribedObject.Name != pod0 {
			t.Fatalf("code!=200: got %+v, want only %s", l.Items, pod0)
		}
		sameAsPrometheus(t, l.Items[0], rateQuery(fmt.Sprintf(`code!="200",namespace="e2e",pod=%q`, pod0), "pod"))
	})

	t.Run("protobuf, as kube-controller-manager's client asks", customMetricsProtobuf)

	t.Run("v1beta1 serves the same", func(t *testing.T) {
		l := getList(t, c, cm1+"/namespaces/e2e/pods/*/http_requests_per_second?labelSelector=app%3Dweb")
		if len(l.Items) != len(env.pods) {
			t.Fatalf("%d items, want %d", len(l.Items), len(env.pods))
		}
		for _, it := range l.Items {
			sameAsPrometheus(t, it, rateQuery(fmt.Sprintf(`namespace="e2e",pod=%q`, it.DescribedObject.Name), "pod"))
		}
	})

	t.Run("service", func(t *testing.T) {
		l := getList(t, c, cm2+"/namespaces/e2e/services/web/http_requests_per_second")
		if len(l.Items) != 1 || l.Items[0].DescribedObject.Kind != "Service" || l.Items[0].DescribedObject.APIVersion != "v1" {
			t.Fatalf("got %+v", l.Items)
		}
		sameAsPrometheus(t, l.Items[0], rateQuery(`namespace="e2e",service="web"`, "service"))
	})

	t.Run("deployment", func(t *testing.T) {
		l := getList(t, c, cm2+"/namespaces/e2e/deployments.apps/web/app_queue_depth")
		if len(l.Items) != 1 || l.Items[0].DescribedObject.APIVersion != "apps/v1" || l.Items[0].DescribedObject.Kind != "Deployment" {
			t.Fatalf("got %+v", l.Items)
		}
		if l.Items[0].Value != "3141590u" {
			t.Errorf("value %s, want 3141590u (3.14159 with its precision)", l.Items[0].Value)
		}
		sameAsPrometheus(t, l.Items[0], `sum(app_queue_depth{namespace="e2e",deployment="web"}) by (deployment)`)
	})

	t.Run("the namespace itself", func(t *testing.T) {
		l := getList(t, c, cm2+"/namespaces/e2e/metrics/http_requests_per_second")
		if len(l.Items) != 1 || l.Items[0].DescribedObject.Kind != "Namespace" || l.Items[0].DescribedObject.Name != ns {
			t.Fatalf("got %+v", l.Items)
		}
		sameAsPrometheus(t, l.Items[0], rateQuery(`namespace="e2e"`, "namespace"))
	})

	notFound := []struct{ name, path, mention string }{
		{"pod that does not exist", cm2 + "/namespaces/e2e/pods/no-such-pod/http_requests_per_second", "no-such-pod"},
		{"unknown metric", cm2 + "/namespaces/e2e/pods/*/no_such_metric", "no_such_metric"},
		{"namespace that does not exist", cm2 + "/namespaces/gone/metrics/http_requests_per_second", "gone"},
	}
	for _, nf := range notFound {
		t.Run(nf.name, func(t *testing.T) {
			st := getStatus(t, c, nf.path)
			if st.Code != http.StatusNotFound || !strings.Contains(st.Message, nf.mention) {
				t.Errorf("got %+v, want 404 naming %s", st, nf.mention)
			}
		})
	}

	t.Run("wildcard matching no pod is an empty list", func(t *testing.T) {
		if raw, l := items(t, c, cm2+"/namespaces/e2e/pods/*/http_requests_per_second?labelSelector=app%3Dnone"); raw != "[]" {
			t.Errorf("got %s %+v, want []", raw, l)
		}
	})
}

func TestExternalMetrics(t *testing.T) {
	need(t)
	c := hpaClient(t)
	t.Run("namespaced rule sees the request's namespace only", func(t *testing.T) {
		l := getList(t, c, em1+"/namespaces/e2e/queue_messages")
		if len(l.Items) != 1 || l.Items[0].MetricLabels["queue"] != "orders" || l.Items[0].Value != "17500m" {
			t.Fatalf("got %+v, want orders=17500m only", l.Items)
		}
		sameAsPrometheus(t, l.Items[0], `sum(queue_messages{namespace="e2e"}) by (queue)`)
	})
	t.Run("rule without namespace sees every namespace", func(t *testing.T) {
		l := getList(t, c, em1+"/namespaces/e2e/global_backlog")
		if len(l.Items) != 2 {
			t.Fatalf("got %+v, want queues a and b", l.Items)
		}
		for _, it := range l.Items {
			sameAsPrometheus(t, it, fmt.Sprintf(`sum(global_backlog{queue=%q}) by (queue)`, it.MetricLabels["queue"]))
		}
		l = getList(t, c, em1+"/namespaces/e2e/global_backlog?labelSelector=queue%3Da")
		if len(l.Items) != 1 || l.Items[0].Value != "1000500u" {
			t.Errorf("queue=a: got %+v, want 1000500u (1.0005 with its precision)", l.Items)
		}
	})
}

func TestRefusedIdentities(t *testing.T) {
	h := need(t)
	path := cm2 + "/namespaces/e2e/pods/*/http_requests_per_second"
	nobody, err := h.RestConfigFor(harness.Identity{User: "nobody", Groups: []string{"system:authenticated"}})
	if err != nil {
		t.Fatal(err)
	}
	direct := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: h.CertPool()}}}
	tests := []struct {
		name   string
		client *http.Client
		base   string
	}{
		{"anonymous through the aggregator", client(t, rest.AnonymousClientConfig(h.Admin)), h.APIServerURL},
		{"unauthorized user through the aggregator", client(t, nobody), h.APIServerURL},
		{"anonymous straight to the adapter", direct, env.adapter.URL("")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := get(t, tt.client, tt.base, path)
			if code != http.StatusForbidden && code != http.StatusUnauthorized {
				t.Errorf("got %d %s, want 401 or 403", code, body)
			}
		})
	}
}

// TestPrometheusOutage must run after the tests that read values; Go runs
// a file's tests in order.
func TestPrometheusOutage(t *testing.T) {
	h := need(t)
	c := hpaClient(t)
	path := cm2 + "/namespaces/e2e/pods/" + env.pods[0] + "/http_requests_per_second"
	start, err := h.StopPrometheus()
	if err != nil {
		t.Fatal(err)
	}
	restarted := false
	defer func() {
		if !restarted {
			_ = start(context.Background())
		}
	}()

	t.Run("stopped: a clear ServiceUnavailable, fast", func(t *testing.T) {
		// The HPA's identity may list PodMetrics, not get one.
		for _, p := range []string{path, "/apis/metrics.k8s.io/v1beta1/namespaces/e2e/pods"} {
			st := getStatus(t, c, p)
			if st.Code != http.StatusServiceUnavailable || !strings.Contains(st.Message, `backend "default"`) {
				t.Errorf("%s: got %+v, want 503 naming the backend", p, st)
			}
			// Fast: the refused connection answers, not the query timeout
			// running out.
			if !strings.Contains(st.Message, "is unavailable") || strings.Contains(st.Message, "did not answer in time") {
				t.Errorf("%s: message %q, want the backend unavailable, not timed out", p, st.Message)
			}
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := start(ctx); err != nil {
		t.Fatal(err)
	}
	restarted = true
	t.Run("restarted: answers again without restarting the adapter", func(t *testing.T) {
		err := harness.WaitReady(ctx, nil, "adapter answers after Prometheus restart", 90*time.Second, func(context.Context) error {
			code, body := get(t, c, h.APIServerURL, path)
			if code != http.StatusOK {
				return fmt.Errorf("%d %s", code, body)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if done, _ := env.adapter.Process.Exited(); done {
			t.Fatal("the adapter exited")
		}
	})
}

func TestBadRuleFileKeepsLastGoodRules(t *testing.T) {
	h := need(t)
	c := hpaClient(t)
	path := em1 + "/namespaces/e2e/queue_messages"
	if err := os.WriteFile(env.ruleFile, []byte(rules+"\n  bogusField: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = os.WriteFile(env.ruleFile, []byte(rules), 0o644) }()

	admin := &http.Client{Timeout: 10 * time.Second, Transport: adminTransport(t, h)}
	err := harness.WaitReady(context.Background(), nil, "rejection counted", 30*time.Second, func(context.Context) error {
		code, body := get(t, admin, env.adapter.URL(""), "/metrics")
		if code != http.StatusOK {
			return fmt.Errorf("/metrics: %d", code)
		}
		if !strings.Contains(string(body), `tidal_adapter_config_reloads_total{result="failure"} 1`) {
			return fmt.Errorf("no failed reload in /metrics yet")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	logData, _ := os.ReadFile(env.adapter.Process.LogPath())
	if !strings.Contains(string(logData), "Rejected the changed rule file") || !strings.Contains(string(logData), "bogusField") {
		t.Errorf("adapter log does not say the file was rejected and why")
	}
	// Still served, by the last good rules.
	if l := getList(t, c, path); len(l.Items) != 1 {
		t.Errorf("after a bad reload: %+v", l.Items)
	}

	// A good change is picked up: the rule is renamed.
	renamed := strings.Replace(rules, "metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (queue)'\n- seriesQuery: 'global_backlog",
		"name: {as: \"renamed_messages\"}\n  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (queue)'\n- seriesQuery: 'global_backlog", 1)
	if renamed == rules {
		t.Fatal("test bug: rename did not apply")
	}
	if err := os.WriteFile(env.ruleFile, []byte(renamed), 0o644); err != nil {
		t.Fatal(err)
	}
	err = harness.WaitReady(context.Background(), nil, "renamed metric served", 30*time.Second, func(context.Context) error {
		code, body := get(t, c, h.APIServerURL, em1+"/namespaces/e2e/renamed_messages")
		if code != http.StatusOK {
			return fmt.Errorf("%d %s", code, body)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

func adminTransport(t *testing.T, h *harness.Harness) http.RoundTripper {
	t.Helper()
	tr, err := rest.TransportFor(&rest.Config{TLSClientConfig: rest.TLSClientConfig{
		CAData: h.CA.CertPEM, CertData: h.Admin.CertData, KeyData: h.Admin.KeyData,
		CertFile: h.Admin.CertFile, KeyFile: h.Admin.KeyFile,
	}})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}
