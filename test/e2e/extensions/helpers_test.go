package extensions

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/test/harness"
	"github.com/tidal-autoscaler/tidal/test/metricsserver"
)

const (
	// app names each test's Deployment and autoscaler.
	app = "web"
	// queue is the External metric the autoscalers scale on: with an
	// AverageValue target of perPod, upstream proposes ceil(queue/perPod)
	// whatever the pods, so each test sets the count it wants exactly.
	queue  = "e2e_queue"
	perPod = 10
	// timeout bounds each wait; poll is how often a wait looks.
	timeout = 90 * time.Second
	poll    = 200 * time.Millisecond
)

// testContext is the context of one test, ended with it.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// deploy creates the namespace and a Deployment of replicas kwok pods
// named app, changed by edit (nil: as harness.Deployment makes it), and
// waits until they are ready.
func deploy(ctx context.Context, t *testing.T, ns string, replicas int32, edit func(*appsv1.Deployment)) {
	t.Helper()
	must(t, env.h.EnsureNamespace(ctx, ns))
	d := harness.Deployment(ns, app, replicas)
	if edit != nil {
		edit(d)
	}
	_, err := env.h.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	must(t, err)
	_, err = env.h.WaitDeploymentReady(ctx, ns, app, timeout)
	must(t, err)
}

// setQueue makes the metric queue of ns read value; a negative value
// removes it, so that every read fails (NotFound).
func setQueue(ns string, value int64) {
	if value < 0 {
		env.metrics.SetExternalMetric(ns, queue, nil)
		return
	}
	env.metrics.SetExternalMetric(ns, queue, []metricsserver.ExternalSeries{{
		Labels: map[string]string{"queue": "orders"}, Value: *resource.NewQuantity(value, resource.DecimalSI),
	}})
}

// newAutoscaler is an autoscaler of ns/app on the queue metric, between
// 1 and 10 replicas, with no scale-down stabilization (so that a test
// waits for syncs only), changed by edit.
func newAutoscaler(ns string, edit func(*v1alpha1.HorizontalAutoscaler)) *v1alpha1.HorizontalAutoscaler {
	ha := &v1alpha1.HorizontalAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: ns},
		Spec: v1alpha1.HorizontalAutoscalerSpec{
			HorizontalPodAutoscalerSpec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: app},
				MinReplicas:    ptr.To[int32](1),
				MaxReplicas:    10,
				Metrics: []autoscalingv2.MetricSpec{{
					Type: autoscalingv2.ExternalMetricSourceType,
					External: &autoscalingv2.ExternalMetricSource{
						Metric: autoscalingv2.MetricIdentifier{Name: queue},
						Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: resource.NewQuantity(perPod, resource.DecimalSI)},
					},
				}},
				Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
					ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0)},
				},
			},
		},
	}
	if edit != nil {
		edit(ha)
	}
	return ha
}

// createAutoscaler creates ha and deletes it when the test ends, so that
// the autoscaler reconciles the next test's objects only.
func createAutoscaler(ctx context.Context, t *testing.T, ha *v1alpha1.HorizontalAutoscaler) {
	t.Helper()
	must(t, harness.CreateHorizontalAutoscaler(ctx, env.dyn, ha))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := env.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ha.Namespace).Delete(ctx, ha.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete HorizontalAutoscaler %s/%s: %v", ha.Namespace, ha.Name, err)
		}
	})
}

// patchAutoscaler merge-patches the spec of ns/app.
func patchAutoscaler(ctx context.Context, t *testing.T, ns, spec string) {
	t.Helper()
	_, err := env.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Patch(ctx, app, types.MergePatchType,
		[]byte(`{"spec":`+spec+`}`), metav1.PatchOptions{})
	must(t, err)
}

func getAutoscaler(ctx context.Context, ns, name string) (*v1alpha1.HorizontalAutoscaler, error) {
	return harness.GetHorizontalAutoscaler(ctx, env.dyn, ns, name)
}

func condition(ha *v1alpha1.HorizontalAutoscaler, typ autoscalingv2.HorizontalPodAutoscalerConditionType) *autoscalingv2.HorizontalPodAutoscalerCondition {
	for i := range ha.Status.Conditions {
		if ha.Status.Conditions[i].Type == typ {
			return &ha.Status.Conditions[i]
		}
	}
	return nil
}

// state is what a wait reports when it times out: the Deployment's
// replicas and the autoscaler's status.
type state struct {
	replicas int32
	ha       *v1alpha1.HorizontalAutoscaler
}

// observe reads ns/app's Deployment and autoscaler.
func observe(ctx context.Context, ns string) (state, error) {
	d, err := env.h.Client.AppsV1().Deployments(ns).Get(ctx, app, metav1.GetOptions{})
	if err != nil {
		return state{}, err
	}
	ha, err := getAutoscaler(ctx, ns, app)
	if err != nil {
		return state{}, err
	}
	return state{replicas: ptr.Deref(d.Spec.Replicas, 1), ha: ha}, nil
}

func (s state) String() string {
	return fmt.Sprintf("deployment spec.replicas %d; %s", s.replicas, describe(s.ha))
}

// describe is an autoscaler's status: replicas and conditions.
func describe(ha *v1alpha1.HorizontalAutoscaler) string {
	parts := []string{fmt.Sprintf("autoscaler current %d desired %d", ha.Status.CurrentReplicas, ha.Status.DesiredReplicas)}
	for _, c := range ha.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s/%s %q", c.Type, c.Status, c.Reason, c.Message))
	}
	return strings.Join(parts, "; ")
}

// waitState polls ns's Deployment and autoscaler until cond holds and
// returns what it saw then.
func waitState(ctx context.Context, t *testing.T, ns, what string, cond func(state) bool) state {
	t.Helper()
	var last state
	waitUntil(ctx, t, what, func() (bool, string) {
		s, err := observe(ctx, ns)
		if err != nil {
			return false, err.Error()
		}
		last = s
		return cond(s), s.String()
	})
	return last
}

// conditionIs reports whether ha has condition typ with status and reason.
func conditionIs(ha *v1alpha1.HorizontalAutoscaler, typ autoscalingv2.HorizontalPodAutoscalerConditionType, status corev1.ConditionStatus, reason string) bool {
	c := condition(ha, typ)
	return c != nil && c.Status == status && c.Reason == reason
}

// events returns the events of ns/app with reason, and the sum of their
// counts (the event recorder folds a repeated event into one with a count).
func events(ctx context.Context, t *testing.T, ns, reason string) ([]corev1.Event, int32) {
	t.Helper()
	list, err := env.h.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=" + v1alpha1.Kind + ",involvedObject.name=" + app + ",reason=" + reason})
	must(t, err)
	var n int32
	for _, e := range list.Items {
		n += max(e.Count, 1)
	}
	return list.Items, n
}

// waitEvents waits until events of reason whose message starts with
// prefix were recorded at least n times in all, i.e. in n syncs for an
// event recorded once a sync.
func waitEvents(ctx context.Context, t *testing.T, ns, reason, prefix string, n int32) corev1.Event {
	t.Helper()
	var found corev1.Event
	waitUntil(ctx, t, fmt.Sprintf("%d %s events starting %q", n, reason, prefix), func() (bool, string) {
		list, _ := events(ctx, t, ns, reason)
		var count int32
		var msgs []string
		for _, e := range list {
			msgs = append(msgs, fmt.Sprintf("%dx %q", e.Count, e.Message))
			if strings.HasPrefix(e.Message, prefix) {
				count += max(e.Count, 1)
				found = e
			}
		}
		return count >= n, fmt.Sprintf("events %s: %s", reason, strings.Join(msgs, ", "))
	})
	return found
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

// sample returns the value of the series of name with exactly labels in
// Prometheus text, and whether there is one.
func sample(text, name string, labels map[string]string) (float64, bool, error) {
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		series, value, ok := strings.Cut(line, " ")
		if !ok {
			return 0, false, fmt.Errorf("%s: no value in %q", name, line)
		}
		if !sameLabels(strings.TrimPrefix(series, name), labels) {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(value)[0], 64)
		if err != nil {
			return 0, false, fmt.Errorf("%s: %q: %w", name, line, err)
		}
		return v, true, nil
	}
	return 0, false, sc.Err()
}

// sameLabels reports whether `{a="1",b="2"}` (or "") holds exactly want.
// Label values here hold no commas or quotes.
func sameLabels(block string, want map[string]string) bool {
	block = strings.TrimSuffix(strings.TrimPrefix(block, "{"), "}")
	got := map[string]string{}
	if block != "" {
		for _, pair := range strings.Split(block, ",") {
			k, v, _ := strings.Cut(pair, "=")
			got[k] = strings.Trim(v, `"`)
		}
	}
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// reconciles is the autoscaler's count of reconciliations, all outcomes.
const reconciles = "tidal_autoscaler_reconciliations_total"

// waitSyncs waits until the autoscaler has reconciled n more times. Each
// test deletes its autoscalers when it ends, so while a test runs they
// are the only ones: these are its own syncs.
func waitSyncs(ctx context.Context, t *testing.T, n float64) {
	t.Helper()
	total := func() (float64, error) {
		text, err := env.h.ScrapeAutoscaler(ctx, env.autoscaler, "/metrics")
		if err != nil {
			return 0, err
		}
		return sum(text, reconciles)
	}
	from, err := total()
	must(t, err)
	waitUntil(ctx, t, fmt.Sprintf("%v more reconciles", n), func() (bool, string) {
		now, err := total()
		if err != nil {
			return false, err.Error()
		}
		return now >= from+n, fmt.Sprintf("%s from %v to %v", reconciles, from, now)
	})
}

// sum adds every series of name in Prometheus text.
func sum(text, name string) (float64, error) {
	var total float64
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q: %w", name, line, err)
		}
		total += v
	}
	return total, nil
}
