package podselection

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
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
	"github.com/tidal-autoscaler/tidal/autoscaler/status"
	"github.com/tidal-autoscaler/tidal/test/exporter"
	"github.com/tidal-autoscaler/tidal/test/harness"
)

const (
	ns, app = "podselection", "web"
	// metric is a per-pod gauge served as a Pods metric.
	metric     = "e2e_busy_workers"
	syncPeriod = 2 * time.Second
	// Each pod should have targetPerPod busy workers.
	targetPerPod = 100
	timeout      = 90 * time.Second
	poll         = 200 * time.Millisecond
)

// rules serve the gauge as the Pods metric e2e_busy_workers.
const rules = `rules:
- seriesQuery: 'e2e_busy_workers{namespace!="",pod!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
      pod: {resource: pod}
  metricsQuery: sum by (<<.GroupBy>>) (<<.Series>>{<<.LabelMatchers>>})
`

// TestBusiestPodsRemain: 4 pods with 5, 90, 10 and 95 busy workers
// against a target of 100 per pod propose 2 (200/100). Before scaling down,
// the autoscaler gives each pod its deletion cost (50, 900, 100, 950: busy
// workers in thousandths of the target), and the ReplicaSet controller of
// kube-controller-manager removes the two idlest: the pods that remain are
// the two busiest.
func TestBusiestPodsRemain(t *testing.T) {
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
	dyn, err := dynamic.NewForConfig(h.Admin)
	must(t, err)

	must(t, h.EnsureNamespace(ctx, ns))
	_, err = h.Client.AppsV1().Deployments(ns).Create(ctx, harness.Deployment(ns, app, 4), metav1.CreateOptions{})
	must(t, err)
	pods, err := h.WaitDeploymentReady(ctx, ns, app, timeout)
	must(t, err)
	names := make([]string, 0, len(pods))
	for _, p := range pods {
		names = append(names, p.Name)
	}
	sort.Strings(names)
	busy := []float64{5, 90, 10, 95}
	for i, p := range names {
		h.Exporter.SetGauge(metric, exporter.Labels{"namespace": ns, "pod": p}, busy[i])
	}
	busiest := []string{names[1], names[3]}
	wantCost := map[string]string{names[0]: "50", names[1]: "900", names[2]: "100", names[3]: "950"}

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

	// Every pod's value is served before the autoscaler acts on them.
	path := fmt.Sprintf("/apis/custom.metrics.k8s.io/v1beta2/namespaces/%s/pods/*/%s", ns, metric)
	waitUntil(ctx, t, "the metric of every pod served by the adapter", func() (bool, string) {
		body, err := h.Client.Discovery().RESTClient().Get().AbsPath(path).Param("labelSelector", "app="+app).DoRaw(ctx)
		if err != nil {
			return false, err.Error()
		}
		var list struct{ Items []json.RawMessage }
		if err := json.Unmarshal(body, &list); err != nil {
			return false, err.Error()
		}
		return len(list.Items) == len(names), string(body)
	})

	ha := &v1alpha1.HorizontalAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: ns},
		Spec: v1alpha1.HorizontalAutoscalerSpec{
			HorizontalPodAutoscalerSpec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: app},
				MinReplicas:    ptr.To[int32](2),
				MaxReplicas:    4,
				Metrics: []autoscalingv2.MetricSpec{{
					Type: autoscalingv2.PodsMetricSourceType,
					Pods: &autoscalingv2.PodsMetricSource{
						Metric: autoscalingv2.MetricIdentifier{Name: metric},
						Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: resource.NewQuantity(targetPerPod, resource.DecimalSI)},
					},
				}},
				Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
					ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0)},
				},
			},
			TidalSpec: v1alpha1.TidalSpec{ScaleDownPodSelection: &v1alpha1.ScaleDownPodSelection{
				Metric: v1alpha1.PodSelectionMetric{Type: autoscalingv2.PodsMetricSourceType, Name: metric},
			}},
		},
	}
	must(t, harness.CreateHorizontalAutoscaler(ctx, dyn, ha))

	// The Deployment is scaled to 2 and its remaining pods are the two
	// busiest, which carry the costs the autoscaler wrote.
	var last []corev1.Pod
	waitUntil(ctx, t, "2 pods left, the busiest", func() (bool, string) {
		d, err := h.Client.AppsV1().Deployments(ns).Get(ctx, app, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		list, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return false, err.Error()
		}
		last = last[:0]
		var left []string
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil {
				last = append(last, p)
				left = append(left, p.Name)
			}
		}
		sort.Strings(left)
		state := fmt.Sprintf("spec.replicas %d, pods %v; autoscaler: %s", ptr.Deref(d.Spec.Replicas, 1), left, describe(ctx, dyn))
		return ptr.Deref(d.Spec.Replicas, 1) == 2 && len(left) == 2, state
	})
	var left []string
	for _, p := range last {
		left = append(left, p.Name)
		if got := p.Annotations[corev1.PodDeletionCost]; got != wantCost[p.Name] {
			t.Errorf("pod %s has %s %q, want %q", p.Name, corev1.PodDeletionCost, got, wantCost[p.Name])
		}
	}
	sort.Strings(left)
	if !slices.Equal(left, busiest) {
		t.Errorf("pods left %v, want the busiest %v (busy workers %v of %v)", left, busiest, busy, names)
	}
	if c := condition(ctx, t, dyn, status.PodSelectionCondition); c == nil || c.Status != corev1.ConditionTrue || c.Reason != "Applies" {
		t.Errorf("condition PodSelection %+v, want True/Applies", c)
	}
	events, err := h.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + app + ",reason=PodDeletionCost"})
	must(t, err)
	if len(events.Items) == 0 {
		t.Error("no PodDeletionCost event")
	}
}

func autoscaler(ctx context.Context, dyn dynamic.Interface) (*v1alpha1.HorizontalAutoscaler, error) {
	return harness.GetHorizontalAutoscaler(ctx, dyn, ns, app)
}

func condition(ctx context.Context, t *testing.T, dyn dynamic.Interface, typ autoscalingv2.HorizontalPodAutoscalerConditionType) *autoscalingv2.HorizontalPodAutoscalerCondition {
	t.Helper()
	ha, err := autoscaler(ctx, dyn)
	must(t, err)
	for i := range ha.Status.Conditions {
		if ha.Status.Conditions[i].Type == typ {
			return &ha.Status.Conditions[i]
		}
	}
	return nil
}

func describe(ctx context.Context, dyn dynamic.Interface) string {
	ha, err := autoscaler(ctx, dyn)
	if err != nil {
		return err.Error()
	}
	parts := []string{fmt.Sprintf("current %d desired %d", ha.Status.CurrentReplicas, ha.Status.DesiredReplicas)}
	for _, c := range ha.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s/%s %q", c.Type, c.Status, c.Reason, c.Message))
	}
	return strings.Join(parts, "; ")
}

// waitUntil polls cond until it holds; on timeout the test fails with the
// state cond last described.
func waitUntil(ctx context.Context, t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s; last state: %s", what, timeout, state)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v; last state: %s", what, ctx.Err(), state)
		case <-time.After(poll):
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
