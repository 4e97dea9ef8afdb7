// Package faults injects the faults an operator fears into the real chain
// (exporter, Prometheus, Tidal's adapter behind a fault proxy, the
// aggregator, Tidal's autoscaler, kube-controller-manager) and checks what
// Tidal promises for each (docs/reliability.md has the table): Prometheus
// hanging, answering garbage or 1 GiB; the serving certificate rotated on
// disk; /scale answering 403 and 500.
package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/test/exporter"
	"github.com/tidal-autoscaler/tidal/test/harness"
)

const (
	ns, app = "faults", "web"
	metric  = "http_requests_per_second"
	// Three pods at the target each: the autoscaler holds 3.
	replicas     = 3
	targetPerPod = 100
	syncPeriod   = 2 * time.Second
	// promTimeout is the adapter's --prometheus-timeout.
	promTimeout = 2 * time.Second
)

const rules = `rules:
- seriesQuery: 'http_requests_total{namespace!="",pod!=""}'
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
  name: {matches: ^(.*)_total$, as: "${1}_per_second"}
  metricsQuery: sum by (<<.GroupBy>>) (rate(<<.Series>>{<<.LabelMatchers>>}[10s]))
`

var env struct {
	h          *harness.Harness
	dyn        dynamic.Interface
	proxy      *faultProxy
	adapter    *harness.Adapter
	autoscaler *harness.Autoscaler
	certFile   string
	keyFile    string
	pods       []string
	setupErr   error
}

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	err := setup(ctx)
	cancel()
	env.setupErr = err
	code := harness.RunTests(m)
	if env.proxy != nil {
		env.proxy.Close()
	}
	if env.h != nil {
		env.h.StopShared(code != 0 || err != nil)
	}
	os.Exit(code)
}

func setup(ctx context.Context) error {
	bin, err := harness.TidalBinary(ctx)
	if err != nil {
		return err
	}
	h, err := harness.Start(ctx, harness.Full())
	env.h = h
	if err != nil {
		return err
	}
	if env.dyn, err = dynamic.NewForConfig(h.Admin); err != nil {
		return err
	}
	if env.proxy, err = newFaultProxy(h.PrometheusURL); err != nil {
		return err
	}
	if err := h.EnsureNamespace(ctx, ns); err != nil {
		return err
	}
	if _, err := h.Client.AppsV1().Deployments(ns).Create(ctx, harness.Deployment(ns, app, replicas), metav1.CreateOptions{}); err != nil {
		return err
	}
	pods, err := h.WaitDeploymentReady(ctx, ns, app, 90*time.Second)
	if err != nil {
		return err
	}
	for _, p := range pods {
		env.pods = append(env.pods, p.Name)
	}
	setRate(targetPerPod)

	ruleFile := filepath.Join(h.Dir, "rules.yaml")
	if err := os.WriteFile(ruleFile, []byte(rules), 0o644); err != nil {
		return err
	}
	env.adapter, err = h.StartAdapter(ctx, harness.AdapterOptions{
		Binary: bin, RuleFile: ruleFile,
		Args: []string{
			// The last --prometheus-url wins: the adapter reads Prometheus
			// through the fault proxy.
			"--prometheus-url=" + env.proxy.URL(),
			"--prometheus-timeout=" + promTimeout.String(),
			"--metrics-relist-interval=5s", "--query-cache-ttl=0",
		},
		APIServices: [][2]string{{"custom.metrics.k8s.io", "v1beta1"}, {"custom.metrics.k8s.io", "v1beta2"}},
	})
	if err != nil {
		return err
	}
	env.certFile, env.keyFile = filepath.Join(h.Dir, "adapter-serving.crt"), filepath.Join(h.Dir, "adapter-serving.key")
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	if _, err := h.ApplyCRDs(ctx, filepath.Join(root, "manifests", "crd")); err != nil {
		return err
	}
	if env.autoscaler, err = h.StartAutoscaler(ctx, harness.AutoscalerOptions{
		Binary: bin, Args: []string{"--horizontal-pod-autoscaler-sync-period=" + syncPeriod.String()},
	}); err != nil {
		return err
	}
	// The rates must have a full window before the autoscaler reads them:
	// a young counter reads low, and with no stabilization window that
	// would scale down.
	if err := harness.WaitReady(ctx, env.adapter.Process, "every pod at the target through the aggregator", 2*time.Minute, func(ctx context.Context) error {
		return atTarget(ctx, app)
	}); err != nil {
		return err
	}
	if err := createAutoscaler(ctx, app, 0); err != nil {
		return err
	}
	return harness.WaitReady(ctx, env.autoscaler.Process, "the autoscaler reading its metric", 2*time.Minute, func(ctx context.Context) error {
		return steady(ctx)
	})
}

// createAutoscaler creates the HorizontalAutoscaler NAME for the
// Deployment NAME, with a scale-down window of windowSeconds.
func createAutoscaler(ctx context.Context, name string, windowSeconds int32) error {
	ha := &v1alpha1.HorizontalAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.HorizontalAutoscalerSpec{HorizontalPodAutoscalerSpec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name},
			MinReplicas:    ptr.To[int32](1),
			MaxReplicas:    6,
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.PodsMetricSourceType,
				Pods: &autoscalingv2.PodsMetricSource{
					Metric: autoscalingv2.MetricIdentifier{Name: metric},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: resource.NewQuantity(targetPerPod, resource.DecimalSI)},
				},
			}},
			// No window: any reading below the target would scale down at
			// once, so a fault that passed for "no load" would show.
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To(windowSeconds)},
			},
		}},
	}
	return harness.CreateHorizontalAutoscaler(ctx, env.dyn, ha)
}

// setRate sets each pod's request rate.
func setRate(perPod float64) { setRates(env.pods, perPod) }

func setRates(pods []string, perPod float64) {
	for _, p := range pods {
		env.h.Exporter.SetCounterRate("http_requests_total", exporter.Labels{"namespace": ns, "pod": p}, perPod)
	}
}

func need(t *testing.T) *harness.Harness {
	t.Helper()
	if env.setupErr != nil {
		t.Fatalf("setup failed: %v", env.setupErr)
	}
	return env.h
}

// atTarget succeeds when the metric reads targetPerPod (within 2%) for
// every pod, through the aggregator.
func atTarget(ctx context.Context, name string) error {
	path := "/apis/custom.metrics.k8s.io/v1beta2/namespaces/" + ns + "/pods/*/" + metric
	body, err := env.h.Client.Discovery().RESTClient().Get().AbsPath(path).Param("labelSelector", "app="+name).DoRaw(ctx)
	if err != nil {
		return err
	}
	var l struct {
		Items []struct {
			Value resource.Quantity `json:"value"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &l); err != nil {
		return err
	}
	if len(l.Items) != replicas {
		return fmt.Errorf("%d pods served: %s", len(l.Items), body)
	}
	for _, it := range l.Items {
		if v := it.Value.AsApproximateFloat64(); math.Abs(v-targetPerPod) > 0.02*targetPerPod {
			return fmt.Errorf("a pod at %v: %s", v, body)
		}
	}
	return nil
}
