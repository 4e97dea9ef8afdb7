package native

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/autoscaler/behavior"
	"github.com/tidal-autoscaler/tidal/test/harness"
	"github.com/tidal-autoscaler/tidal/test/metricsserver"
)

const (
	syncPeriod = 2 * time.Second
	name       = "web"
	// tidalManager is tidal's field manager; upstreamComponent the event
	// component of kube-controller-manager's HPA controller, which native
	// mode records as.
	tidalManager, upstreamComponent = "tidal-autoscaler", "horizontal-pod-autoscaler"
	historyAnnotation               = "autoscaling.tidal.dev/history"
)

var env struct {
	h     *harness.Harness
	ms    *metricsserver.Server
	bin   string
	opts  harness.NativeAutoscalerOptions
	tidal *harness.Autoscaler
	err   error
}

// TestMain starts one control plane whose kube-controller-manager runs
// without the HPA controller (harness.Options.ControllerManager), the
// test metrics server, and `tidal autoscaler --mode=native`.
func TestMain(m *testing.M) {
	ctx, cancel := context.WithCancel(context.Background())
	env.err = setup(ctx)
	code := m.Run()
	cancel()
	if env.ms != nil {
		_ = env.ms.Wait()
	}
	if env.h != nil {
		if err := env.h.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop harness:", err)
		}
	}
	os.Exit(code)
}

func setup(ctx context.Context) error {
	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	h, err := harness.Start(startCtx, harness.Options{ControllerManager: true, Scheduler: true, Kwok: true})
	env.h = h
	if err != nil {
		return err
	}
	// The server lives as long as ctx, the whole run.
	if env.ms, err = metricsserver.Start(ctx, h, metricsserver.Options{}); err != nil {
		return fmt.Errorf("test metrics server: %w", err)
	}
	if env.bin, err = harness.TidalBinary(startCtx); err != nil {
		return err
	}
	// No CRD is applied: native mode does not need it.
	env.opts = harness.NativeAutoscalerOptions{Binary: env.bin, Args: []string{
		"--horizontal-pod-autoscaler-sync-period=" + syncPeriod.String(),
		"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=1s",
	}}
	env.tidal, err = h.StartNativeAutoscaler(startCtx, env.opts)
	return err
}

func ready(t *testing.T) (*harness.Harness, context.Context) {
	t.Helper()
	if env.err != nil {
		t.Fatalf("environment: %v", env.err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	return env.h, ctx
}

// setQueue sets external metric "queue" of namespace ns.
func setQueue(ns, v string) {
	env.ms.SetExternalMetric(ns, "queue", []metricsserver.ExternalSeries{{Labels: map[string]string{"series": "a"}, Value: *metricsserver.Q(v)}})
}

// createWeb creates Deployment web with one pod and an HPA on it: 1 to 5
// replicas, 10 of external metric queue per replica, the given scale-down
// stabilization window.
func createWeb(t *testing.T, ctx context.Context, h *harness.Harness, ns string, window int32) {
	t.Helper()
	must(t, h.EnsureNamespace(ctx, ns))
	_, err := h.Client.AppsV1().Deployments(ns).Create(ctx, harness.Deployment(ns, name, 1), metav1.CreateOptions{})
	must(t, err)
	_, err = h.WaitDeploymentReady(ctx, ns, name, 90*time.Second)
	must(t, err)
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name},
			MinReplicas:    ptr.To[int32](1), MaxReplicas: 5,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "queue"},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: metricsserver.Q("10")},
			}}},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To(window)},
			},
		},
	}
	_, err = h.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, hpa, metav1.CreateOptions{})
	must(t, err)
}

// TestScaleUpAndDown: tidal scales the Deployment up and down through the
// metric, writes the HPA's status as kube-controller-manager would, alone,
// records upstream's events, and `tidal explain` shows the result.
func TestScaleUpAndDown(t *testing.T) {
	h, ctx := ready(t)
	const ns = "native"
	setQueue(ns, "30")
	createWeb(t, ctx, h, ns, 0)

	waitSettled(t, ctx, ns, 3)
	hpa := getHPA(t, ctx, ns)
	checkConditions(t, hpa, "AbleToScale=True", "ScalingActive=True/ValidMetricFound", "ScalingLimited=False/DesiredWithinRange")
	if got := currentAverage(hpa); got != "10" {
		t.Errorf("status.currentMetrics queue average %q, want 10 (30 over 3 replicas)", got)
	}

	setQueue(ns, "10")
	waitSettled(t, ctx, ns, 1)
	checkConditions(t, getHPA(t, ctx, ns), "AbleToScale=True", "ScalingActive=True/ValidMetricFound")

	// Only tidal wrote the HPA's status and the Deployment's scale.
	hpaFields := getHPA(t, ctx, ns).ManagedFields
	checkWriters(t, "the HPA's status", hpaFields, "status")
	d, err := h.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	must(t, err)
	checkWriters(t, "the Deployment's scale", d.ManagedFields, "scale")

	// Upstream's events: reason, message and component.
	waitEvents(t, ctx, ns, "New size: 3; reason: external metric queue(nil) above target", "New size: 1; reason: All metrics below target")

	// `tidal explain hpa/web`: the value against its target, the counts
	// and the conditions, from what tidal wrote.
	out, err := exec.CommandContext(ctx, env.bin, "explain", "hpa/"+name, "-n", ns, "--kubeconfig", h.AdminKubeconfig).CombinedOutput()
	if err != nil {
		t.Fatalf("tidal explain hpa/%s: %v\n%s", name, err, out)
	}
	t.Logf("tidal explain hpa/%s:\n%s", name, out)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^HorizontalPodAutoscaler native/web$`),
		regexp.MustCompile(`(?m)^Target: +Deployment/web, 1 to 5 replicas$`),
		regexp.MustCompile(`(?m)^Replicas: +current 1, desired 1$`),
		regexp.MustCompile(`(?m)^ +external metric queue\S* +10 +10 \(avg\)`),
		regexp.MustCompile(`(?m)^ +ScalingActive +True +ValidMetricFound +the HPA was able to successfully calculate a replica count from external metric queue`),
	} {
		if !want.Match(out) {
			t.Errorf("tidal explain hpa/%s: no line matching %s", name, want)
		}
	}
}

// TestRestartContinuesWindow restarts tidal half-way through a 30 s
// scale-down stabilization window: the restarted autoscaler scales down
// when the window ends, a window after the last high recommendation (from
// the history annotation), not a window after it started. Without the
// history it would hold the scale-down for 15 s more than the slack here.
func TestRestartContinuesWindow(t *testing.T) {
	h, ctx := ready(t)
	const ns, window = "restart", 30 * time.Second
	setQueue(ns, "40")
	createWeb(t, ctx, h, ns, int32(window/time.Second))
	waitSettled(t, ctx, ns, 4)

	setQueue(ns, "10")
	var lastHigh time.Time
	waitUntil(t, ctx, 60*time.Second, "a low recommendation after a high one in the history annotation", func() error {
		hist, err := behavior.Decode(getHPA(t, ctx, ns).Annotations[historyAnnotation])
		if err != nil {
			return err
		}
		recs := hist.Recommendations
		if len(recs) < 2 || recs[len(recs)-1].Replicas != 1 {
			return fmt.Errorf("recommendations %v", recs)
		}
		for _, r := range recs {
			if r.Replicas > 1 {
				lastHigh = r.Time
			}
		}
		if lastHigh.IsZero() {
			return fmt.Errorf("no high recommendation in %v", recs)
		}
		return nil
	})
	releaseAt := lastHigh.Add(window)
	time.Sleep(time.Until(lastHigh.Add(window / 2)))
	if got := replicas(t, ctx, ns); got != 4 {
		t.Fatalf("scaled to %d before the restart, %s before the window ends", got, time.Until(releaseAt).Round(time.Second))
	}
	must(t, env.tidal.Process.Stop(10*time.Second))
	restarted, err := h.StartNativeAutoscaler(ctx, env.opts)
	env.tidal = restarted
	must(t, err)
	t.Logf("restarted %s before the window ends", time.Until(releaseAt).Round(100*time.Millisecond))

	// No scale-down before the window ends (1 s for the clocks of the API
	// server and this test), then one within a sync period and slack for
	// a loaded machine.
	early, late := releaseAt.Add(-time.Second), releaseAt.Add(syncPeriod+8*time.Second)
	for {
		got := replicas(t, ctx, ns)
		now := time.Now()
		if got < 4 {
			if now.Before(early) {
				t.Fatalf("scaled down to %d %s before the window ends", got, releaseAt.Sub(now).Round(100*time.Millisecond))
			}
			if got != 1 {
				t.Errorf("scaled down to %d, want 1", got)
			}
			t.Logf("scaled down %s after the window ended", now.Sub(releaseAt).Round(100*time.Millisecond))
			return
		}
		if now.After(late) {
			t.Fatalf("still %d replicas %s after the window ended: the restart started a new window", got, now.Sub(releaseAt).Round(100*time.Millisecond))
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func getHPA(t *testing.T, ctx context.Context, ns string) *autoscalingv2.HorizontalPodAutoscaler {
	t.Helper()
	hpa, err := env.h.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, name, metav1.GetOptions{})
	must(t, err)
	return hpa
}

func replicas(t *testing.T, ctx context.Context, ns string) int32 {
	t.Helper()
	d, err := env.h.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	must(t, err)
	return ptr.Deref(d.Spec.Replicas, 0)
}

// waitSettled waits until the Deployment and the HPA's status both say n
// replicas.
func waitSettled(t *testing.T, ctx context.Context, ns string, n int32) {
	t.Helper()
	waitUntil(t, ctx, 90*time.Second, fmt.Sprintf("%d replicas", n), func() error {
		st := getHPA(t, ctx, ns).Status
		if d := replicas(t, ctx, ns); d != n || st.DesiredReplicas != n || st.CurrentReplicas != n {
			return fmt.Errorf("deployment %d, status desired %d current %d", d, st.DesiredReplicas, st.CurrentReplicas)
		}
		return nil
	})
}

// checkConditions checks conditions given as Type=Status or
// Type=Status/Reason.
func checkConditions(t *testing.T, hpa *autoscalingv2.HorizontalPodAutoscaler, want ...string) {
	t.Helper()
	var have []string
	for _, c := range hpa.Status.Conditions {
		have = append(have, fmt.Sprintf("%s=%s", c.Type, c.Status), fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	for _, w := range want {
		if !slices.Contains(have, w) {
			t.Errorf("no condition %s in %v", w, hpa.Status.Conditions)
		}
	}
}

// currentAverage is the external metric's current average value.
func currentAverage(hpa *autoscalingv2.HorizontalPodAutoscaler) string {
	for _, m := range hpa.Status.CurrentMetrics {
		if m.External != nil && m.External.Current.AverageValue != nil {
			return m.External.Current.AverageValue.String()
		}
	}
	return ""
}

// checkWriters: the entries of managedFields for subresource are all
// tidal's, and there is one.
func checkWriters(t *testing.T, what string, entries []metav1.ManagedFieldsEntry, subresource string) {
	t.Helper()
	var managers []string
	for _, e := range entries {
		if e.Subresource == subresource {
			managers = append(managers, e.Manager)
		}
	}
	if !slices.Equal(managers, []string{tidalManager}) {
		t.Errorf("%s written by %q, want %q only", what, managers, tidalManager)
	}
}

// waitEvents waits for SuccessfulRescale events with the messages, each
// from upstream's component, recorded by tidal.
func waitEvents(t *testing.T, ctx context.Context, ns string, messages ...string) {
	t.Helper()
	sel := fields.AndSelectors(fields.OneTermEqualSelector("involvedObject.name", name),
		fields.OneTermEqualSelector("involvedObject.kind", "HorizontalPodAutoscaler"),
		fields.OneTermEqualSelector("reason", "SuccessfulRescale")).String()
	waitUntil(t, ctx, 15*time.Second, "the SuccessfulRescale events", func() error {
		list, err := env.h.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return err
		}
		var got []string
		for _, e := range list.Items {
			got = append(got, e.Message)
			if e.Source.Component != upstreamComponent || e.ReportingController != upstreamComponent {
				return fmt.Errorf("event %q from component %q (reporting controller %q), want %q", e.Message, e.Source.Component, e.ReportingController, upstreamComponent)
			}
			if len(e.ManagedFields) == 0 || e.ManagedFields[0].Manager != tidalManager {
				return fmt.Errorf("event %q not written by %s: %v", e.Message, tidalManager, e.ManagedFields)
			}
			if e.Type != corev1.EventTypeNormal {
				return fmt.Errorf("event %q of type %s", e.Message, e.Type)
			}
		}
		slices.Sort(got)
		if want := slices.Sorted(slices.Values(messages)); !slices.Equal(got, want) {
			return fmt.Errorf("messages %q, want %q", got, want)
		}
		return nil
	})
}

func waitUntil(t *testing.T, ctx context.Context, timeout time.Duration, what string, check func() error) {
	t.Helper()
	if err := harness.WaitReady(ctx, nil, what, timeout, func(context.Context) error { return check() }); err != nil {
		t.Fatal(err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
