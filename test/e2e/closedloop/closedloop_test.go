package closedloop

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/autoscaler/behavior"
	"github.com/tidal-autoscaler/tidal/test/harness"
)

const (
	ns, app = "closedloop", "web"
	metric  = "http_requests_per_second"

	// syncPeriod is the autoscaler's --horizontal-pod-autoscaler-sync-period
	// and window the HorizontalAutoscaler's
	// spec.behavior.scaleDown.stabilizationWindowSeconds.
	syncPeriod = 2 * time.Second
	window     = 20 * time.Second

	// Each pod should serve targetPerPod requests per second: a demand of
	// highDemand needs highReplicas pods (350/4 = 87.5 per pod is outside
	// the tolerance of 100 but proposes ceil(3.5) = 4 again, a fixed
	// point), lowDemand needs lowReplicas.
	targetPerPod               = 100
	highDemand, highReplicas   = 350, 4
	lowDemand, lowReplicas     = 30, 1
	maxReplicas                = 6
	poll                       = 200 * time.Millisecond
	balancerPeriod             = 500 * time.Millisecond
	clockSlack                 = time.Second
	outageHold                 = window + 4*syncPeriod
	scaleTimeout, stateTimeout = 60 * time.Second, 45 * time.Second
)

// rules map the per-pod request counter to the Pods metric
// http_requests_per_second. The rate window is short so that the loop
// reacts within seconds (Prometheus scrapes every second).
const rules = `rules:
- seriesQuery: 'http_requests_total{namespace!="",pod!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
      pod: {resource: pod}
  name:
    matches: ^(.*)_total$
    as: ${1}_per_second
  metricsQuery: sum by (<<.GroupBy>>) (rate(<<.Series>>{<<.LabelMatchers>>}[5s]))
`

// TestClosedLoop drives a Deployment through the whole chain (exporter,
// Prometheus, tidal adapter, aggregator, tidal autoscaler) and checks
// scale-up, stabilized scale-down, and that a Prometheus outage never
// causes a scale-down.
func TestClosedLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the harness")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	waitBin := harness.TidalBinaryAsync(ctx)
	h := harness.StartT(t, harness.Full())
	bin, err := waitBin()
	if err != nil {
		t.Fatal(err)
	}
	l := setup(ctx, t, h, bin)

	if !t.Run("ScaleUp", func(t *testing.T) { l.scaleUp(ctx, t) }) {
		return
	}
	if !t.Run("ScaleDownAfterWindow", func(t *testing.T) { l.scaleDownAfterWindow(ctx, t) }) {
		return
	}
	t.Run("PrometheusOutage", func(t *testing.T) { l.prometheusOutage(ctx, t) })
}

// loop is the running chain.
type loop struct {
	h   *harness.Harness
	dyn dynamic.Interface
	lb  *balancer
}

// setup creates the app with its load, starts the adapter and the
// autoscaler, waits until the metric is served, and creates the
// HorizontalAutoscaler.
func setup(ctx context.Context, t *testing.T, h *harness.Harness, bin string) *loop {
	t.Helper()
	dyn, err := dynamic.NewForConfig(h.Admin)
	must(t, err)
	l := &loop{h: h, dyn: dyn, lb: newBalancer(h.Client, h.Exporter, ns, app)}

	must(t, h.EnsureNamespace(ctx, ns))
	_, err = h.Client.AppsV1().Deployments(ns).Create(ctx, harness.Deployment(ns, app, lowReplicas), metav1.CreateOptions{})
	must(t, err)
	lbCtx, stopLB := context.WithCancel(ctx)
	lbDone := make(chan struct{})
	go func() { defer close(lbDone); l.lb.run(lbCtx, balancerPeriod) }()
	t.Cleanup(func() { stopLB(); <-lbDone })
	l.lb.setDemand(lowDemand)
	_, err = h.WaitDeploymentReady(ctx, ns, app, scaleTimeout)
	must(t, err)

	ruleFile := filepath.Join(t.TempDir(), "rules.yaml")
	must(t, os.WriteFile(ruleFile, []byte(rules), 0o644))
	_, err = h.StartAdapter(ctx, harness.AdapterOptions{
		Binary:   bin,
		RuleFile: ruleFile,
		Args:     []string{"--metrics-relist-interval=5s", "--query-cache-ttl=1s"},
		APIServices: [][2]string{
			{"custom.metrics.k8s.io", "v1beta1"},
			{"custom.metrics.k8s.io", "v1beta2"},
		},
	})
	must(t, err)
	root, err := harness.RepoRoot()
	must(t, err)
	_, err = h.ApplyCRDs(ctx, filepath.Join(root, "manifests", "crd"))
	must(t, err)
	_, err = h.StartAutoscaler(ctx, harness.AutoscalerOptions{
		Binary: bin,
		Args:   []string{"--horizontal-pod-autoscaler-sync-period=" + syncPeriod.String()},
	})
	must(t, err)

	// The metric is served through the aggregator before the autoscaler
	// starts acting on it.
	path := fmt.Sprintf("/apis/custom.metrics.k8s.io/v1beta2/namespaces/%s/pods/*/%s", ns, metric)
	l.waitUntil(ctx, t, stateTimeout, "the metric served by the adapter", func() (bool, string) {
		body, err := h.Client.Discovery().RESTClient().Get().AbsPath(path).Param("labelSelector", "app="+app).DoRaw(ctx)
		if err != nil {
			return false, err.Error()
		}
		var list struct{ Items []json.RawMessage }
		if err := json.Unmarshal(body, &list); err != nil {
			return false, err.Error()
		}
		return len(list.Items) > 0, string(body)
	})
	must(t, l.createAutoscaler(ctx))
	return l
}

// scaleUp raises the demand: the autoscaler scales to highReplicas.
func (l *loop) scaleUp(ctx context.Context, t *testing.T) {
	l.lb.setDemand(highDemand)
	raised := time.Now()
	l.waitReplicas(ctx, t, highReplicas)
	t.Logf("scaled up to %d %s after the demand rose to %d/s", highReplicas, since(raised), highDemand)
	_, err := l.h.WaitDeploymentReady(ctx, ns, app, scaleTimeout)
	must(t, err)
}

// scaleDownAfterWindow lowers the demand: the autoscaler scales down, but
// not before the window has passed since its last recommendation of
// highReplicas.
func (l *loop) scaleDownAfterWindow(ctx context.Context, t *testing.T) {
	l.lb.setDemand(lowDemand)
	dropped := time.Now()
	persisted := l.trackHighRecommendation(ctx, t)
	var downAt time.Time
	l.waitUntil(ctx, t, window+scaleTimeout, "a scale-down", func() (bool, string) {
		// The history first: it still holds the high recommendation
		// when the replicas read next are already lower.
		persisted.update()
		r, err := l.replicas(ctx)
		if err != nil {
			return false, err.Error()
		}
		if r < highReplicas {
			downAt = time.Now()
			return true, ""
		}
		return false, fmt.Sprintf("%d replicas", r)
	})
	lastHigh := lastHighSince(t, dropped, persisted.last)
	t.Logf("demand dropped at %s; last recommendation of %d at %s; first scale-down at %s, %s after the window since it ended",
		stamp(dropped), highReplicas, stamp(lastHigh), stamp(downAt), downAt.Sub(lastHigh.Add(window)).Round(100*time.Millisecond))
	if early := lastHigh.Add(window - clockSlack); downAt.Before(early) {
		t.Fatalf("scaled down at %s, %s before the stabilization window of %s since the last recommendation of %d ended",
			stamp(downAt), lastHigh.Add(window).Sub(downAt).Round(100*time.Millisecond), window, highReplicas)
	}
	l.waitReplicas(ctx, t, lowReplicas)
}

// lastHighSince is when the autoscaler last recommended highReplicas
// after a drop of the demand at dropped while it held highReplicas, from
// its persisted history; that time is at least one sync period (and some
// slack) before the drop, since it reconciled at least once in that period
// on the high load.
func lastHighSince(t *testing.T, dropped, persisted time.Time) time.Time {
	t.Helper()
	bound := dropped.Add(-syncPeriod - clockSlack)
	if persisted.IsZero() {
		t.Errorf("no recommendation of %d in status.tidal.history: the window is checked from %s, a sync period before the drop", highReplicas, stamp(bound))
		return bound
	}
	if persisted.Before(bound) {
		t.Errorf("the persisted history's last recommendation of %d (%s) is older than the last sync period before the drop (%s)", highReplicas, stamp(persisted), stamp(dropped))
	}
	return persisted
}

// prometheusOutage scales up again, lowers the demand until the
// autoscaler has seen it, then stops Prometheus for longer than the window
// plus several sync periods: no scale-down, ScalingActive=False/
// FailedGetPodsMetric and Warning events. With Prometheus back, scaling
// resumes and the replicas come down.
func (l *loop) prometheusOutage(ctx context.Context, t *testing.T) {
	l.scaleUp(ctx, t)
	l.lb.setDemand(lowDemand)
	dropped := time.Now()
	persisted := l.trackHighRecommendation(ctx, t)
	// The autoscaler has read the low load: a controller deciding from its
	// history alone would scale down once the window passes.
	l.waitUntil(ctx, t, stateTimeout, "the low load in the autoscaler's status", func() (bool, string) {
		persisted.update()
		ha, _, err := l.autoscaler(ctx)
		if err != nil {
			return false, err.Error()
		}
		v, ok := podsMetric(ha)
		return ok && v <= 2*lowDemand/highReplicas, fmt.Sprintf("currentMetrics %v", ha.Status.CurrentMetrics)
	})
	persisted.update()
	lastHigh := lastHighSince(t, dropped, persisted.last)
	if r, err := l.replicas(ctx); err != nil || r != highReplicas {
		t.Fatalf("%d replicas (%v) before the outage, want %d: the window should still hold them", r, err, highReplicas)
	}

	start, err := l.h.StopPrometheus()
	must(t, err)
	stopped := time.Now()
	// Until the hold ends, the window since the last high recommendation
	// has long passed: a controller that decided from its history alone
	// would scale down.
	holdUntil := stopped.Add(outageHold)
	t.Logf("Prometheus stopped at %s; last recommendation of %d at %s; holding until %s (window ended at %s)",
		stamp(stopped), highReplicas, stamp(lastHigh), stamp(holdUntil), stamp(lastHigh.Add(window)))
	var failingSince time.Time
	var active string
	flapped := false
	for time.Now().Before(holdUntil) {
		if r, err := l.replicas(ctx); err == nil && r != highReplicas {
			t.Fatalf("replicas changed to %d during the Prometheus outage (%s after it began, %s after the window ended): the autoscaler must not scale while the metric cannot be read",
				r, since(stopped), time.Since(lastHigh.Add(window)).Round(100*time.Millisecond))
		}
		if ha, _, err := l.autoscaler(ctx); err == nil {
			c := condition(ha, autoscalingv2.ScalingActive)
			active = describe(c)
			if failing := c != nil && c.Status == corev1.ConditionFalse && c.Reason == "FailedGetPodsMetric"; failing && failingSince.IsZero() {
				failingSince = time.Now()
				t.Logf("ScalingActive %s, %s after Prometheus stopped", active, since(stopped))
			} else if !failing && !failingSince.IsZero() && !flapped {
				flapped = true
				t.Errorf("ScalingActive went back to %s during the outage, %s after it began", active, since(stopped))
			}
		}
		sleep(ctx, t, poll)
	}
	if failingSince.IsZero() {
		t.Errorf("ScalingActive never became False/FailedGetPodsMetric during %s of outage; last seen %s", outageHold, active)
	}
	l.checkWarnings(ctx, t, stopped, "FailedGetPodsMetric", "FailedComputeMetricsReplicas")

	must(t, start(ctx))
	restarted := time.Now()
	t.Logf("Prometheus restarted at %s", stamp(restarted))
	l.waitUntil(ctx, t, stateTimeout, "ScalingActive=True after Prometheus restarted", func() (bool, string) {
		ha, _, err := l.autoscaler(ctx)
		if err != nil {
			return false, err.Error()
		}
		c := condition(ha, autoscalingv2.ScalingActive)
		return c != nil && c.Status == corev1.ConditionTrue, describe(c)
	})
	t.Logf("ScalingActive=True %s after the restart", since(restarted))
	l.waitReplicas(ctx, t, lowReplicas)
	t.Logf("scaled down to %d %s after the restart", lowReplicas, since(restarted))
}

// checkWarnings fails unless the autoscaler recorded a Warning event with
// each reason at or after from.
func (l *loop) checkWarnings(ctx context.Context, t *testing.T, from time.Time, reasons ...string) {
	t.Helper()
	events, err := l.h.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	must(t, err)
	seen := map[string]string{}
	for _, e := range events.Items {
		last := e.LastTimestamp.Time
		if last.IsZero() {
			last = e.EventTime.Time
		}
		if e.InvolvedObject.Kind != v1alpha1.Kind || e.InvolvedObject.Name != app || e.Type != corev1.EventTypeWarning ||
			last.Before(from.Truncate(time.Second)) {
			continue
		}
		seen[e.Reason] = e.Message
	}
	for _, r := range reasons {
		if msg, ok := seen[r]; ok {
			t.Logf("Warning %s: %s", r, msg)
		} else {
			t.Errorf("no Warning event %s on HorizontalAutoscaler %s/%s since %s; recent warnings: %v", r, ns, app, stamp(from), seen)
		}
	}
}

func (l *loop) createAutoscaler(ctx context.Context) error {
	ha := &v1alpha1.HorizontalAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: ns},
		Spec: v1alpha1.HorizontalAutoscalerSpec{HorizontalPodAutoscalerSpec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: app},
			MinReplicas:    ptr.To[int32](lowReplicas),
			MaxReplicas:    maxReplicas,
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.PodsMetricSourceType,
				Pods: &autoscalingv2.PodsMetricSource{
					Metric: autoscalingv2.MetricIdentifier{Name: metric},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: resource.NewQuantity(targetPerPod, resource.DecimalSI)},
				},
			}},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To(int32(window / time.Second))},
			},
		}},
	}
	return harness.CreateHorizontalAutoscaler(ctx, l.dyn, ha)
}

// replicas is the Deployment's spec.replicas, which the autoscaler sets.
func (l *loop) replicas(ctx context.Context) (int32, error) {
	d, err := l.h.Client.AppsV1().Deployments(ns).Get(ctx, app, metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	return ptr.Deref(d.Spec.Replicas, 1), nil
}

// autoscaler reads the HorizontalAutoscaler, typed and as stored.
func (l *loop) autoscaler(ctx context.Context) (*v1alpha1.HorizontalAutoscaler, *unstructured.Unstructured, error) {
	u, err := l.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Get(ctx, app, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	ha := &v1alpha1.HorizontalAutoscaler{}
	return ha, u, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ha)
}

func (l *loop) waitReplicas(ctx context.Context, t *testing.T, want int32) {
	t.Helper()
	l.waitUntil(ctx, t, scaleTimeout, fmt.Sprintf("%d replicas", want), func() (bool, string) {
		r, err := l.replicas(ctx)
		if err != nil {
			return false, err.Error()
		}
		return r == want, fmt.Sprintf("%d replicas", r)
	})
}

// waitUntil polls cond until it holds; on timeout the test fails with the
// state cond last described and the autoscaler's status.
func (l *loop) waitUntil(ctx context.Context, t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s; last state: %s\nautoscaler: %s", what, timeout, state, l.describeAutoscaler(ctx))
		}
		sleep(ctx, t, poll)
	}
}

func (l *loop) describeAutoscaler(ctx context.Context) string {
	ha, _, err := l.autoscaler(ctx)
	if err != nil {
		return err.Error()
	}
	st := ha.Status
	s := fmt.Sprintf("current %d desired %d", st.CurrentReplicas, st.DesiredReplicas)
	for _, c := range st.Conditions {
		s += fmt.Sprintf("; %s=%s/%s %q", c.Type, c.Status, c.Reason, c.Message)
	}
	return s
}

// highTracker follows the newest recommendation of at least highReplicas
// in the autoscaler's persisted history, which keeps it until it leaves the
// window; update is called while polling, so the newest one is seen before
// it is dropped.
type highTracker struct {
	l    *loop
	ctx  context.Context
	t    *testing.T
	last time.Time
}

func (l *loop) trackHighRecommendation(ctx context.Context, t *testing.T) *highTracker {
	tr := &highTracker{l: l, ctx: ctx, t: t}
	tr.update()
	return tr
}

func (tr *highTracker) update() {
	_, u, err := tr.l.autoscaler(tr.ctx)
	if err != nil {
		return
	}
	hist, ok, err := persistedHistory(u)
	if err != nil {
		tr.t.Fatal(err)
	}
	if !ok {
		return
	}
	for _, r := range hist.Recommendations {
		if r.Replicas >= highReplicas && r.Time.After(tr.last) {
			tr.last = r.Time
		}
	}
}

// persistedHistory decodes the stabilization history the autoscaler keeps
// in status.tidal.history.
func persistedHistory(u *unstructured.Unstructured) (behavior.History, bool, error) {
	v, _, _ := unstructured.NestedString(u.Object, "status", "tidal", "history")
	if v == "" {
		return behavior.History{}, false, nil
	}
	hist, err := behavior.Decode(v)
	if err != nil {
		return hist, false, fmt.Errorf("status.tidal.history of HorizontalAutoscaler %s/%s: %w", ns, app, err)
	}
	return hist, true, nil
}

// podsMetric is the per-pod value of the metric in the status.
func podsMetric(ha *v1alpha1.HorizontalAutoscaler) (float64, bool) {
	for _, m := range ha.Status.CurrentMetrics {
		if m.Type == autoscalingv2.PodsMetricSourceType && m.Pods != nil && m.Pods.Current.AverageValue != nil {
			return m.Pods.Current.AverageValue.AsApproximateFloat64(), true
		}
	}
	return 0, false
}

func condition(ha *v1alpha1.HorizontalAutoscaler, typ autoscalingv2.HorizontalPodAutoscalerConditionType) *autoscalingv2.HorizontalPodAutoscalerCondition {
	for i, c := range ha.Status.Conditions {
		if c.Type == typ {
			return &ha.Status.Conditions[i]
		}
	}
	return nil
}

func describe(c *autoscalingv2.HorizontalPodAutoscalerCondition) string {
	if c == nil {
		return "absent"
	}
	return fmt.Sprintf("%s/%s %q", c.Status, c.Reason, c.Message)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func sleep(ctx context.Context, t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(d):
	}
}

func since(t time.Time) time.Duration { return time.Since(t).Round(100 * time.Millisecond) }

func stamp(t time.Time) string { return t.Format(time.StampMilli) }
