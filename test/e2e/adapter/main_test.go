// Package adapter is the end-to-end test of `tidal adapter`: the real
// binary, serving through the real aggregator from the real Prometheus of
// the test harness, read as the HPA controller reads it.
package adapter

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tidal-autoscaler/tidal/test/exporter"
	"github.com/tidal-autoscaler/tidal/test/harness"
)

const ns = "e2e"

// rules is the rule file the adapter starts with.
const rules = `
rules:
- seriesQuery: 'http_requests_total{namespace!="",pod!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
      pod: {resource: pod}
      service: {resource: service}
  name: {matches: "^(.*)_total$", as: "${1}_per_second"}
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[30s])) by (<<.GroupBy>>)'
- seriesQuery: 'app_queue_depth{namespace!="",deployment!=""}'
  resources: {template: "<<.Resource>>"}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
` + compatRules + `externalRules:
- seriesQuery: 'queue_messages{queue!=""}'
  resources: {overrides: {namespace: {resource: namespace}}}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (queue)'
- seriesQuery: 'global_backlog{queue!=""}'
  resources: {namespaced: false}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (queue)'
` + compatExternalRules + resourceRules

// env is shared by the package's tests: one control plane, one adapter.
var env struct {
	h        *harness.Harness
	adapter  *harness.Adapter
	tidal    string // the binary
	ruleFile string
	pods     []string // the web Deployment's pods, sorted
	// rates are the request rates set per pod (code 200); pods[0] also
	// serves code 500 at errorRate.
	rates    map[string]float64
	setupErr error
}

const errorRate = 0.25

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	h, err := setup(ctx)
	cancel()
	env.h, env.setupErr = h, err
	code := harness.RunTests(m)
	if h != nil {
		h.StopShared(code != 0 || env.setupErr != nil)
	}
	os.Exit(code)
}

func setup(ctx context.Context) (*harness.Harness, error) {
	tidal, err := harness.TidalBinary(ctx)
	if err != nil {
		return nil, err
	}
	env.tidal = tidal
	h, err := harness.Start(ctx, harness.Full())
	if err != nil {
		return nil, err
	}
	if err := h.EnsureNamespace(ctx, ns); err != nil {
		return h, err
	}
	if _, err := h.Client.AppsV1().Deployments(ns).Create(ctx, harness.Deployment(ns, "web", 3), metav1.CreateOptions{}); err != nil {
		return h, err
	}
	pods, err := h.WaitDeploymentReady(ctx, ns, "web", 90*time.Second)
	if err != nil {
		return h, err
	}
	env.rates = map[string]float64{}
	for _, p := range pods {
		env.pods = append(env.pods, p.Name)
	}
	sort.Strings(env.pods)
	for i, name := range env.pods {
		// Rates chosen so milli-units need rounding: 1.2345/s and so on.
		rate := 1.2345 * float64(i+1)
		env.rates[name] = rate
		h.Exporter.SetCounterRate("http_requests_total", exporter.Labels{"namespace": ns, "pod": name, "service": "web", "code": "200"}, rate)
	}
	h.Exporter.SetCounterRate("http_requests_total", exporter.Labels{"namespace": ns, "pod": env.pods[0], "service": "web", "code": "500"}, errorRate)
	setResourceSeries(h)
	h.Exporter.SetGauge("app_queue_depth", exporter.Labels{"namespace": ns, "deployment": "web"}, 3.14159)
	h.Exporter.SetGauge("queue_messages", exporter.Labels{"namespace": ns, "queue": "orders"}, 17.5)
	h.Exporter.SetGauge("queue_messages", exporter.Labels{"namespace": "other", "queue": "billing"}, 3)
	h.Exporter.SetGauge("global_backlog", exporter.Labels{"queue": "a"}, 1.0005)
	h.Exporter.SetGauge("global_backlog", exporter.Labels{"queue": "b"}, 2)
	if err := setupCompat(ctx, h); err != nil {
		return h, err
	}

	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Port: 80}},
		},
	}
	if _, err := h.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return h, err
	}

	// Wait until the counters have a full 30 s rate window, so rate() is
	// steady and the adapter and the oracle see the same value, and
	// discovery finds every series at its first pass.
	if err := harness.WaitReady(ctx, nil, "steady rates", 90*time.Second, func(ctx context.Context) error {
		q := fmt.Sprintf(`sum(rate(http_requests_total{pod=%q,code="200"}[30s])) and on() (count(global_backlog) == 2)`, env.pods[0])
		v, err := promQuery(ctx, h, q, time.Time{})
		if err != nil {
			return err
		}
		if want := env.rates[env.pods[0]]; len(v) != 1 || math.Abs(float64(v[0].Value)-want) > 0.001*want {
			return fmt.Errorf("got %v, want %v", v, want)
		}
		return nil
	}); err != nil {
		return h, err
	}
	// The oracle evaluates up to a second before the adapter did (see
	// sameAsPrometheus): let that second be steady too.
	time.Sleep(2 * time.Second)

	env.ruleFile = filepath.Join(h.Dir, "rules.yaml")
	if err := os.WriteFile(env.ruleFile, []byte(rules), 0o644); err != nil {
		return h, err
	}
	env.adapter, err = h.StartAdapter(ctx, harness.AdapterOptions{
		Binary:   tidal,
		RuleFile: env.ruleFile,
		Args: []string{
			"--metrics-relist-interval=5s",
			"--config-check-interval=1s",
			"--prometheus-timeout=3s",
			// No cache: the outage check must reach Prometheus. The cache
			// has its unit tests.
			"--query-cache-ttl=0",
			"-v=2",
		},
		APIServices: [][2]string{
			{"custom.metrics.k8s.io", "v1beta1"},
			{"custom.metrics.k8s.io", "v1beta2"},
			{"external.metrics.k8s.io", "v1beta1"},
			{"metrics.k8s.io", "v1beta1"},
			{"metrics.k8s.io", "v1"},
		},
	})
	if err != nil {
		return h, err
	}
	// Available APIServices may take a moment more to be proxied.
	for _, gv := range []string{"custom.metrics.k8s.io/v1beta1", "custom.metrics.k8s.io/v1beta2", "external.metrics.k8s.io/v1beta1", "metrics.k8s.io/v1beta1", "metrics.k8s.io/v1"} {
		if err := harness.WaitReady(ctx, nil, gv+" proxied", 60*time.Second, func(ctx context.Context) error {
			_, err := h.Client.Discovery().ServerResourcesForGroupVersion(gv)
			return err
		}); err != nil {
			return h, err
		}
	}
	return h, nil
}

func need(t *testing.T) *harness.Harness {
	t.Helper()
	if env.setupErr != nil {
		t.Fatalf("setup failed: %v", env.setupErr)
	}
	return env.h
}
