package guard

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/autoscaler/source"
	"github.com/tidal-autoscaler/tidal/autoscaler/status"
	"github.com/tidal-autoscaler/tidal/test/exporter"
	"github.com/tidal-autoscaler/tidal/test/harness"
)

const (
	crdNS, nativeNS, app = "guard-crd", "guard-native", "web"
	metric               = "e2e_busy_workers"
	syncPeriod           = 2 * time.Second
	timeout              = 90 * time.Second
	poll                 = 250 * time.Millisecond
)

const rules = `rules:
- seriesQuery: 'e2e_busy_workers{namespace!="",pod!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
      pod: {resource: pod}
  metricsQuery: sum by (<<.GroupBy>>) (<<.Series>>{<<.LabelMatchers>>})
`

// spec scales app on the busy workers per pod, 100 each.
func spec() autoscalingv2.HorizontalPodAutoscalerSpec {
	return autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: app},
		MinReplicas:    ptr.To[int32](1),
		MaxReplicas:    6,
		Metrics: []autoscalingv2.MetricSpec{{
			Type: autoscalingv2.PodsMetricSourceType,
			Pods: &autoscalingv2.PodsMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: metric},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: resource.NewQuantity(100, resource.DecimalSI)},
			},
		}},
	}
}

// TestGuard runs kube-controller-manager's HPA controller beside tidal:
//   - crd mode: a HorizontalAutoscaler on a Deployment an HPA scales never
//     writes its /scale (Conflict=True OtherAutoscaler and a Warning event
//     naming the HPA); set to dry run, it compares instead, and agrees
//     with the HPA (status.tidal.shadow);
//   - native mode: tidal leaves an HPA whose status kube-controller-manager
//     writes alone (Conflict=True OtherStatusWriter, a Warning event naming
//     kube-controller-manager), and writes no /scale once it has seen it.
func TestGuard(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the harness")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	waitBin := harness.TidalBinaryAsync(ctx)
	opts := harness.Full()
	opts.HPAController = true
	opts.HPAControllerArgs = append(opts.HPAControllerArgs, "--horizontal-pod-autoscaler-sync-period="+syncPeriod.String())
	h := harness.StartT(t, opts)
	bin, err := waitBin()
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(h.Admin)
	must(t, err)

	// Two pods with 150 busy workers each: 300 / 100 proposes 3.
	for _, ns := range []string{crdNS, nativeNS} {
		must(t, h.EnsureNamespace(ctx, ns))
		_, err = h.Client.AppsV1().Deployments(ns).Create(ctx, harness.Deployment(ns, app, 2), metav1.CreateOptions{})
		must(t, err)
	}
	setBusy := func(ns string, n int, busy float64) {
		pods, err := h.WaitDeploymentReady(ctx, ns, app, timeout)
		must(t, err)
		if len(pods) != n {
			t.Fatalf("%d pods of %s/%s ready, want %d", len(pods), ns, app, n)
		}
		for _, p := range pods {
			h.Exporter.SetGauge(metric, exporter.Labels{"namespace": ns, "pod": p.Name}, busy)
		}
	}
	setBusy(crdNS, 2, 150)
	setBusy(nativeNS, 2, 150)

	ruleFile := filepath.Join(t.TempDir(), "rules.yaml")
	must(t, os.WriteFile(ruleFile, []byte(rules), 0o644))
	_, err = h.StartAdapter(ctx, harness.AdapterOptions{
		Binary: bin, RuleFile: ruleFile,
		Args:        []string{"--metrics-relist-interval=5s", "--query-cache-ttl=1s"},
		APIServices: [][2]string{{"custom.metrics.k8s.io", "v1beta1"}, {"custom.metrics.k8s.io", "v1beta2"}},
	})
	must(t, err)
	root, err := harness.RepoRoot()
	must(t, err)
	_, err = h.ApplyCRDs(ctx, filepath.Join(root, "manifests", "crd"))
	must(t, err)
	sync := "--horizontal-pod-autoscaler-sync-period=" + syncPeriod.String()
	_, err = h.StartAutoscaler(ctx, harness.AutoscalerOptions{Binary: bin, Args: []string{sync, "--namespace=" + crdNS}})
	must(t, err)

	// guard-crd gets an HPA that the upstream controller scales to 3.
	createHPA := func(ns string) {
		_, err := h.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Name: app + "-hpa", Namespace: ns}, Spec: spec()}, metav1.CreateOptions{})
		must(t, err)
	}
	createHPA(crdNS)

	t.Run("crd mode: beside an HPA, no /scale writes", func(t *testing.T) {
		// The HPA's doing, before the HorizontalAutoscaler exists: tidal
		// sees the two through different watches, and an HPA created a
		// moment before the autoscaler could reach it after the autoscaler.
		waitReplicas(ctx, t, h, crdNS, 3)
		ha := &v1alpha1.HorizontalAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: crdNS},
			Spec:       v1alpha1.HorizontalAutoscalerSpec{HorizontalPodAutoscalerSpec: spec()},
		}
		must(t, harness.CreateHorizontalAutoscaler(ctx, dyn, ha))
		waitUntil(ctx, t, "Conflict=True OtherAutoscaler on the HorizontalAutoscaler", func() (bool, string) {
			got, err := getHA(ctx, dyn)
			if err != nil {
				return false, err.Error()
			}
			c := cond(got.Status.Conditions, status.ConflictCondition)
			return c != nil && c.Status == corev1.ConditionTrue && c.Reason == "OtherAutoscaler" &&
				strings.Contains(c.Message, "HorizontalPodAutoscaler "+crdNS+"/"+app+"-hpa also scales Deployment/"+crdNS+"/"+app), fmt.Sprintf("%+v", got.Status.Conditions)
		})
		expectEvent(ctx, t, h, crdNS, app, "OtherAutoscaler", "HorizontalPodAutoscaler "+crdNS+"/"+app+"-hpa")
		noScaleWrites(ctx, t, h, crdNS)
	})

	t.Run("crd mode: in dry run, the shadow agrees with the HPA", func(t *testing.T) {
		_, err := dyn.Resource(v1alpha1.GroupVersionResource).Namespace(crdNS).Patch(ctx, app, "application/merge-patch+json",
			[]byte(`{"spec":{"dryRun":true}}`), metav1.PatchOptions{})
		must(t, err)
		waitUntil(ctx, t, "status.tidal.shadow agrees with the HPA's 3, no Conflict", func() (bool, string) {
			got, err := getHA(ctx, dyn)
			if err != nil {
				return false, err.Error()
			}
			if got.Status.Tidal == nil || got.Status.Tidal.Shadow == nil {
				return false, fmt.Sprintf("no shadow; conditions %+v", got.Status.Conditions)
			}
			s := got.Status.Tidal.Shadow
			return s.HorizontalPodAutoscaler == app+"-hpa" && s.Agree && s.DesiredReplicas == 3 && s.HPADesiredReplicas == 3 &&
				cond(got.Status.Conditions, status.ConflictCondition) == nil, fmt.Sprintf("%+v; conditions %+v", *s, got.Status.Conditions)
		})
		noScaleWrites(ctx, t, h, crdNS)
	})

	// Native mode sees another writer at its first status write while
	// tidal watches. kube-controller-manager writes only what changed, and
	// tidal decides as it does, so who reads a change first writes it: the
	// other finds nothing to write, or has its write refused when it reads
	// a few milliseconds after (a conflict). Started together, both come
	// due together for good, tidal first, and kube-controller-manager is
	// never seen. So the upstream controller scales to 3 alone, and tidal
	// starts right after its last write: its syncs then fall a start-up
	// time after kube-controller-manager's, which writes first whatever
	// changes, or well after tidal's write, when its count is new. Until
	// then both may act (one sync's worth), so what is checked is that
	// tidal writes no /scale once it has seen the other writer.
	t.Run("native mode: kube-controller-manager writes the HPA's status", func(t *testing.T) {
		hpas := h.Client.AutoscalingV2().HorizontalPodAutoscalers(nativeNS)
		w, err := hpas.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + app + "-hpa"})
		must(t, err)
		createHPA(nativeNS)
		settled := false
		for !settled {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatal("the HPA watch ended before kube-controller-manager wrote 3 of 3 replicas")
				}
				if hpa, isHPA := ev.Object.(*autoscalingv2.HorizontalPodAutoscaler); isHPA {
					settled = hpa.Status.CurrentReplicas == 3 && hpa.Status.DesiredReplicas == 3
				}
			case <-time.After(timeout):
				t.Fatal("timed out waiting for kube-controller-manager to write 3 of 3 replicas in the HPA's status")
			}
		}
		w.Stop()
		_, err = h.StartNativeAutoscaler(ctx, harness.NativeAutoscalerOptions{Binary: bin, ServiceAccount: "tidal-native",
			Args: []string{sync, "--namespace=" + nativeNS}})
		must(t, err)

		// More load: a new count, which one of the two writes first.
		setBusy(nativeNS, 3, 250)
		waitUntil(ctx, t, "Conflict=True OtherStatusWriter on the HPA", func() (bool, string) {
			hpa, err := hpas.Get(ctx, app+"-hpa", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			c := cond(hpa.Status.Conditions, status.ConflictCondition)
			return c != nil && c.Status == corev1.ConditionTrue && c.Reason == "OtherStatusWriter" &&
				strings.HasPrefix(c.Message, "kube-controller-manager also writes"), fmt.Sprintf("%+v", hpa.Status.Conditions)
		})
		seen := time.Now().Truncate(time.Second).Add(time.Second)
		expectEvent(ctx, t, h, nativeNS, app+"-hpa", "OtherStatusWriter", "kube-controller-manager also writes")
		waitReplicas(ctx, t, h, nativeNS, 6)
		d, err := h.Client.AppsV1().Deployments(nativeNS).Get(ctx, app, metav1.GetOptions{})
		must(t, err)
		for _, e := range d.ManagedFields {
			if e.Manager == source.FieldManager && e.Time != nil && e.Time.After(seen) {
				t.Errorf("%s wrote Deployment %s/%s at %s, after it saw the other writer (by %s)", e.Manager, nativeNS, app, e.Time, seen)
			}
		}
	})
}

func getHA(ctx context.Context, dyn dynamic.Interface) (*v1alpha1.HorizontalAutoscaler, error) {
	return harness.GetHorizontalAutoscaler(ctx, dyn, crdNS, app)
}

func cond(cs []autoscalingv2.HorizontalPodAutoscalerCondition, t autoscalingv2.HorizontalPodAutoscalerConditionType) *autoscalingv2.HorizontalPodAutoscalerCondition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}

func waitReplicas(ctx context.Context, t *testing.T, h *harness.Harness, ns string, want int32) {
	t.Helper()
	waitUntil(ctx, t, fmt.Sprintf("%s/%s at %d replicas", ns, app, want), func() (bool, string) {
		d, err := h.Client.AppsV1().Deployments(ns).Get(ctx, app, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return ptr.Deref(d.Spec.Replicas, 1) == want, fmt.Sprintf("spec.replicas %d", ptr.Deref(d.Spec.Replicas, 1))
	})
}

// noScaleWrites fails if tidal's field manager ever wrote the Deployment
// (its /scale).
func noScaleWrites(ctx context.Context, t *testing.T, h *harness.Harness, ns string) {
	t.Helper()
	d, err := h.Client.AppsV1().Deployments(ns).Get(ctx, app, metav1.GetOptions{})
	must(t, err)
	for _, e := range d.ManagedFields {
		if e.Manager == source.FieldManager {
			t.Errorf("%s wrote Deployment %s/%s (subresource %q) beside another writer", e.Manager, ns, app, e.Subresource)
		}
	}
}

func expectEvent(ctx context.Context, t *testing.T, h *harness.Harness, ns, object, reason, text string) {
	t.Helper()
	waitUntil(ctx, t, "Warning event "+reason+" on "+object, func() (bool, string) {
		evs, err := h.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + object + ",reason=" + reason})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, text) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(evs.Items))
	})
}

func waitUntil(ctx context.Context, t *testing.T, what string, ok func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		done, state := ok()
		if done {
			return
		}
		last = state
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("timed out waiting for %s; last: %s", what, last)
		}
		time.Sleep(poll)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
