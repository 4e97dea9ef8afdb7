// Package delegate tests --delegate-external-metrics and
// --delegate-custom-metrics on the real harness: custom-metrics-apiserver's
// test-adapter owns external.metrics.k8s.io (with a KEDA-shaped metric) and
// custom.metrics.k8s.io; Tidal takes the APIServices over with the
// test-adapter as its delegate; kube-controller-manager's HPA controller
// scales one Deployment on the delegate's external metric and one on a
// Tidal rule's, all read through the aggregator.
package delegate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/test/exporter"
	"github.com/tidal-autoscaler/tidal/test/harness"
)

const ns = "delegate"

// The KEDA-shaped metric: KEDA names a ScaledObject's metrics sN-<trigger>
// and selects them by the ScaledObject's name.
const (
	kedaMetric = "s0-prometheus-queue"
	kedaLabel  = "scaledobject.keda.sh/name"
)

const rules = `rules:
- seriesQuery: 'tidal_rps{namespace!="",pod!=""}'
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
externalRules:
- seriesQuery: 'queue_messages{queue!=""}'
  resources: {namespaced: false}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (queue)'
# Also served by the test-adapter: a collision, which Tidal's rule answers.
- seriesQuery: 'collision_total_value{queue!=""}'
  resources: {namespaced: false}
  name: {as: "my-external-metric"}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (queue)'
`

func TestMain(m *testing.M) { os.Exit(harness.RunTests(m)) }

func TestDelegateExternalMetrics(t *testing.T) {
	opts := harness.Full()
	opts.HPAController = true
	opts.HPAControllerArgs = []string{"--horizontal-pod-autoscaler-sync-period=5s"}
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
	external := [][2]string{{"external.metrics.k8s.io", "v1beta1"}, {"custom.metrics.k8s.io", "v1beta1"}, {"custom.metrics.k8s.io", "v1beta2"}}

	// The delegate owns external.metrics.k8s.io first, as KEDA would.
	ta, err := h.StartTestAdapter(ctx, external)
	if err != nil {
		t.Fatalf("start test-adapter: %v", err)
	}
	if err := ta.WriteExternal(ctx, kedaMetric, map[string]string{kedaLabel: "x"}, "30"); err != nil {
		t.Fatal(err)
	}
	// Written, the test-adapter lists it (its fixed ones it does not list).
	if err := ta.WriteExternal(ctx, "my-external-metric", map[string]string{"queue": "c"}, "77"); err != nil {
		t.Fatal(err)
	}
	h.Exporter.SetGauge("queue_messages", exporter.Labels{"queue": "orders"}, 40)
	h.Exporter.SetGauge("collision_total_value", exporter.Labels{"queue": "c"}, 5)
	for _, d := range []struct {
		name   string
		metric autoscalingv2.MetricIdentifier
	}{
		{"keda-x", autoscalingv2.MetricIdentifier{Name: kedaMetric, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{kedaLabel: "x"}}}},
		{"tidal-orders", autoscalingv2.MetricIdentifier{Name: "queue_messages", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"queue": "orders"}}}},
	} {
		if err := externalHPA(ctx, h, d.name, d.metric); err != nil {
			t.Fatal(err)
		}
	}
	// On the test-adapter alone: 30 per 10 is 3 replicas.
	waitReplicas(ctx, t, h, "keda-x", 3)

	// Tidal takes the APIService over, the test-adapter as its delegate.
	ruleFile := filepath.Join(h.Dir, "rules.yaml")
	if err := os.WriteFile(ruleFile, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := h.StartAdapter(ctx, harness.AdapterOptions{
		Binary: tidal, RuleFile: ruleFile, APIServices: external,
		Args: []string{
			"--metrics-relist-interval=5s",
			"--delegate-external-metrics=" + ta.URL(""),
			"--delegate-custom-metrics=" + ta.URL(""),
			"--delegate-ca-file=" + filepath.Join(h.Dir, "certs", "ca.crt"),
		},
	})
	if err != nil {
		t.Fatalf("start tidal adapter: %v", err)
	}
	// Both HPAs scale on metrics read through Tidal: 50 per 10 is 5 from the
	// delegate, 40 per 10 is 4 from Tidal's rule.
	if err := ta.WriteExternal(ctx, kedaMetric, map[string]string{kedaLabel: "x"}, "50"); err != nil {
		t.Fatal(err)
	}
	waitReplicas(ctx, t, h, "keda-x", 5)
	waitReplicas(ctx, t, h, "tidal-orders", 4)

	cfg, err := h.RestConfigFor(harness.HPAServiceAccount)
	if err != nil {
		t.Fatal(err)
	}
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	base := h.APIServerURL + "/apis/external.metrics.k8s.io/v1beta1"
	read := func(metric, selector string) (int, []item) {
		return get(t, c, fmt.Sprintf("%s/namespaces/%s/%s?labelSelector=%s", base, ns, metric, url.QueryEscape(selector)))
	}

	t.Run("discovery lists both sides", func(t *testing.T) {
		code, body := getRaw(t, c, base)
		for _, want := range []string{kedaMetric, "queue_messages", "my-external-metric"} {
			if code != http.StatusOK || !strings.Contains(body, `"name":"`+want+`"`) {
				t.Errorf("discovery (%d) does not list %s: %s", code, want, body)
			}
		}
	})
	t.Run("the delegate's metric, forwarded unchanged", func(t *testing.T) {
		code, items := read(kedaMetric, kedaLabel+"=x")
		if code != http.StatusOK || len(items) != 1 || items[0].Value != "50" || items[0].MetricLabels[kedaLabel] != "x" {
			t.Errorf("got %d %+v, want the test-adapter's 50 for %s=x", code, items, kedaLabel)
		}
	})
	t.Run("a collision is answered by Tidal's rule", func(t *testing.T) {
		code, items := read("my-external-metric", "")
		if code != http.StatusOK || len(items) != 1 || items[0].Value != "5" {
			t.Errorf("got %d %+v, want Tidal's 5 (the test-adapter's is 77)", code, items)
		}
		if err := harness.WaitReady(ctx, a.Process, "the collision reported", 30*time.Second, func(context.Context) error {
			if log := readLog(t, a.Process.LogPath()); !strings.Contains(log, "served by a Tidal rule and by the delegate") || !strings.Contains(log, `metric="my-external-metric"`) {
				return fmt.Errorf("not in the adapter's log")
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
	})

	t.Run("custom metrics: the delegate's and Tidal's, through the aggregator", func(t *testing.T) {
		pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=keda-x"})
		if err != nil || len(pods.Items) == 0 {
			t.Fatalf("pods of keda-x: %v", err)
		}
		pod := pods.Items[0].Name
		if err := ta.WriteCustom(ctx, ns, "pods", pod, "delegated_rps", "3"); err != nil {
			t.Fatal(err)
		}
		h.Exporter.SetGauge("tidal_rps", exporter.Labels{"namespace": ns, "pod": pod}, 2)
		custom := h.APIServerURL + "/apis/custom.metrics.k8s.io/v1beta2/namespaces/" + ns + "/pods/"
		if err := harness.WaitReady(ctx, nil, "both custom metrics", time.Minute, func(context.Context) error {
			for metric, want := range map[string]string{"delegated_rps": "3", "tidal_rps": "2"} {
				code, body := getRaw(t, c, custom+pod+"/"+metric)
				if code != http.StatusOK || !strings.Contains(body, `"value":"`+want+`"`) {
					return fmt.Errorf("%s: %d %s", metric, code, body)
				}
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
		// Tidal's own are listed; the test-adapter lists only a placeholder
		// for its custom metrics (custom-metrics-apiserver's default), and
		// they are forwarded all the same, as the reads above show.
		code, body := getRaw(t, c, h.APIServerURL+"/apis/custom.metrics.k8s.io/v1beta1")
		if code != http.StatusOK || !strings.Contains(body, `"name":"pods/tidal_rps"`) {
			t.Errorf("custom metrics discovery (%d) does not list pods/tidal_rps: %s", code, body)
		}
	})

	// The delegate goes away: its metric is a 503, Tidal's keep answering.
	if err := ta.Process.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	t.Run("a delegate that does not answer fails its metrics only", func(t *testing.T) {
		code, body := getRaw(t, c, fmt.Sprintf("%s/namespaces/%s/%s", base, ns, kedaMetric))
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "delegate") {
			t.Errorf("delegated metric with the delegate stopped: %d %s, want 503 naming the delegate", code, body)
		}
		if code, items := read("queue_messages", "queue=orders"); code != http.StatusOK || len(items) != 1 || items[0].Value != "40" {
			t.Errorf("Tidal's own metric: %d %+v, want 40", code, items)
		}
	})
}

// externalHPA creates a Deployment NAME of one replica and an HPA scaling
// it on the external metric with an average of 10 per pod.
func externalHPA(ctx context.Context, h *harness.Harness, name string, m autoscalingv2.MetricIdentifier) error {
	if _, err := h.Client.AppsV1().Deployments(ns).Create(ctx, harness.Deployment(ns, name, 1), metav1.CreateOptions{}); err != nil {
		return err
	}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name},
			MinReplicas:    ptr.To(int32(1)),
			MaxReplicas:    10,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
				Metric: m,
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("10"))},
			}}},
		},
	}
	_, err := h.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, hpa, metav1.CreateOptions{})
	return err
}

func waitReplicas(ctx context.Context, t *testing.T, h *harness.Harness, name string, want int32) {
	t.Helper()
	if err := harness.WaitReady(ctx, nil, fmt.Sprintf("%s at %d replicas", name, want), 2*time.Minute, func(ctx context.Context) error {
		d, err := h.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := ptr.Deref(d.Spec.Replicas, 0); got != want {
			hpa, _ := h.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, name, metav1.GetOptions{})
			conds := ""
			if hpa != nil {
				for _, c := range hpa.Status.Conditions {
					conds += fmt.Sprintf(" %s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message)
				}
			}
			return fmt.Errorf("%d replicas;%s", got, conds)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

type item struct {
	MetricName   string            `json:"metricName"`
	MetricLabels map[string]string `json:"metricLabels"`
	Value        string            `json:"value"`
}

func get(t *testing.T, c *http.Client, u string) (int, []item) {
	t.Helper()
	code, body := getRaw(t, c, u)
	var l struct {
		Items []item `json:"items"`
	}
	if code == http.StatusOK {
		if err := json.Unmarshal([]byte(body), &l); err != nil {
			t.Fatalf("GET %s: %v: %s", u, err, body)
		}
	}
	return code, l.Items
}

func getRaw(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func readLog(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
