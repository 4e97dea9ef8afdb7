package conformance

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/test/harness"
	"github.com/tidal-autoscaler/tidal/test/metricsserver"
)

// The twins of a scenario: Deployment, and autoscaler, names.
const oracleName, tidalName = "oracle", "tidal"

// twinLabel is on both twins' pods; metric values are set for it, so both
// get the same values by pod rank.
const twinLabel = "tidal.test/twin"

// scenario is a native HPA spec (without scaleTargetRef) and steps of metric
// values; each step is compared once both controllers have settled.
type scenario struct {
	name string
	// replicas is the Deployments' initial spec.replicas.
	replicas int32
	spec     autoscalingv2.HorizontalPodAutoscalerSpec
	steps    []step
	// pod, when set, changes the twins' pod template (sidecars, pod-level
	// resources).
	pod func(*corev1.PodSpec)
	// skip, when set, is why the scenario cannot run here.
	skip string
}

// step changes the inputs, then waits until both controllers settle.
type step struct {
	name string
	// set changes the metric values of the twins.
	set func(m twinMetrics)
	// act changes the twins otherwise (e.g. marks a pod unready); it is
	// called once per twin with that twin's Deployment name.
	act func(ctx context.Context, ns, deployment string) error
	// settle is how long both must stay unchanged to count as settled;
	// default settleDefault. Steps that wait out a stabilization window
	// need longer.
	settle time.Duration
}

// settleDefault outlasts the 15s legacy downscale stabilization by more
// than a sync period, so a held-back scale-down is not taken as settled.
const settleDefault = 22 * time.Second

// twinMetrics sets values for both twins of one scenario.
type twinMetrics struct {
	ns  string
	sel labels.Selector
}

func quantities(vals []string) []*resource.Quantity {
	if vals == nil {
		return nil
	}
	out := make([]*resource.Quantity, len(vals))
	for i, v := range vals {
		if v != "" {
			out[i] = metricsserver.Q(v)
		}
	}
	return out
}

// cpu sets the cpu usage of container "app" by pod rank; "" is no sample.
func (m twinMetrics) cpu(vals ...string) {
	env.metrics.SetPodUsage(m.ns, m.sel, "app", corev1.ResourceCPU, quantities(vals)...)
}

// containerCPU sets the cpu usage of another container by pod rank.
func (m twinMetrics) containerCPU(container string, vals ...string) {
	env.metrics.SetPodUsage(m.ns, m.sel, container, corev1.ResourceCPU, quantities(vals)...)
}

// memory sets the memory usage of container "app" by pod rank.
func (m twinMetrics) memory(vals ...string) {
	env.metrics.SetPodUsage(m.ns, m.sel, "app", corev1.ResourceMemory, quantities(vals)...)
}

// pods sets a per-pod custom metric by pod rank; "" is no sample.
func (m twinMetrics) pods(metric string, vals ...string) {
	env.metrics.SetPodMetric(m.ns, m.sel, metric, quantities(vals)...)
}

// object sets a metric of Service "front"; "" removes it.
func (m twinMetrics) object(metric, val string) {
	var q *resource.Quantity
	if val != "" {
		q = metricsserver.Q(val)
	}
	env.metrics.SetObjectMetric(m.ns, "services", "front", metric, q)
}

// external sets the series of an external metric, labelled series=a, b, ...
// in order; no values removes the metric.
func (m twinMetrics) external(metric string, vals ...string) {
	if len(vals) == 0 {
		env.metrics.SetExternalMetric(m.ns, metric, nil)
		return
	}
	series := make([]metricsserver.ExternalSeries, len(vals))
	for i, v := range vals {
		series[i] = metricsserver.ExternalSeries{Labels: map[string]string{"series": string(rune('a' + i))}, Value: *metricsserver.Q(v)}
	}
	env.metrics.SetExternalMetric(m.ns, metric, series)
}

// observation is what one controller decided, as its status and its
// Deployment show it.
type observation struct {
	DesiredReplicas int32
	CurrentReplicas int32
	// Conditions are "Type=Status/Reason: Message", sorted by type.
	Conditions []string
	// Metrics is status.currentMetrics as JSON.
	Metrics string
	// DeploymentReplicas is the Deployment's spec.replicas.
	DeploymentReplicas int32
	// Desired are the distinct successive desiredReplicas seen during the
	// step (a scale-up in stages shows each stage).
	Desired []int32
}

func (o observation) String() string {
	return fmt.Sprintf("desired=%d current=%d deployment=%d sequence=%v\n      conditions: %s\n      metrics: %s",
		o.DesiredReplicas, o.CurrentReplicas, o.DeploymentReplicas, o.Desired, strings.Join(o.Conditions, "\n                  "), o.Metrics)
}

// comparable drops what may legitimately differ.
func (o observation) equal(p observation) bool {
	return o.DesiredReplicas == p.DesiredReplicas && o.CurrentReplicas == p.CurrentReplicas &&
		slices.Equal(o.Conditions, p.Conditions) && o.Metrics == p.Metrics &&
		o.DeploymentReplicas == p.DeploymentReplicas && slices.Equal(o.Desired, p.Desired)
}

func formatStatus(st *autoscalingv2.HorizontalPodAutoscalerStatus) (observation, error) {
	o := observation{DesiredReplicas: st.DesiredReplicas, CurrentReplicas: st.CurrentReplicas}
	for _, c := range st.Conditions {
		o.Conditions = append(o.Conditions, fmt.Sprintf("%s=%s/%s: %s", c.Type, c.Status, c.Reason, c.Message))
	}
	slices.Sort(o.Conditions)
	data, err := json.Marshal(st.CurrentMetrics)
	if err != nil {
		return o, err
	}
	o.Metrics = string(data)
	return o, nil
}

// runScenario creates the twins, walks through the steps and compares.
func runScenario(t *testing.T, sc scenario) {
	if env.setupErr != nil {
		t.Fatalf("environment: %v", env.setupErr)
	}
	if sc.skip != "" {
		t.Skip(sc.skip)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	h := env.h
	ns := "c-" + sc.name
	if err := h.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	m := twinMetrics{ns: ns, sel: labels.SelectorFromSet(labels.Set{twinLabel: "yes"})}
	for _, name := range []string{oracleName, tidalName} {
		d := harness.Deployment(ns, name, sc.replicas)
		d.Spec.Template.Labels[twinLabel] = "yes"
		if sc.pod != nil {
			sc.pod(&d.Spec.Template.Spec)
		}
		if _, err := h.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{oracleName, tidalName} {
		if _, err := h.WaitDeploymentReady(ctx, ns, name, 90*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if len(sc.steps) == 0 {
		t.Fatal("scenario without steps")
	}
	// The first step's inputs are in place before the twins exist: both
	// controllers reconcile a new autoscaler at once, so a change made
	// after creating them races with that first reconcile.
	first := sc.steps[0]
	if first.set != nil {
		first.set(m)
	}
	if first.act != nil {
		for _, name := range []string{oracleName, tidalName} {
			if err := first.act(ctx, ns, name); err != nil {
				t.Fatalf("step 0 (%s): %v", first.name, err)
			}
		}
	}
	if err := createBystander(ctx, ns); err != nil {
		t.Fatal(err)
	}
	if err := createTwins(ctx, ns, sc.spec); err != nil {
		t.Fatal(err)
	}
	// The desired replicas each settled on in the previous step: the next
	// step's sequences start from them.
	var prevO, prevT *int32
	for i, st := range sc.steps {
		if i > 0 && st.set != nil {
			st.set(m)
		}
		if i > 0 && st.act != nil {
			for _, name := range []string{oracleName, tidalName} {
				if err := st.act(ctx, ns, name); err != nil {
					t.Fatalf("step %d (%s): %v", i, st.name, err)
				}
			}
		}
		oracle, tidal, err := settle(ctx, ns, cmp.Or(st.settle, settleDefault), prevO, prevT)
		if err != nil {
			t.Fatalf("step %d (%s): %v", i, st.name, err)
		}
		prevO, prevT = ptr.To(oracle.DesiredReplicas), ptr.To(tidal.DesiredReplicas)
		if !oracle.equal(tidal) {
			t.Errorf("step %d (%s): tidal decided differently from the upstream HPA controller\n  upstream: %s\n  tidal:    %s", i, st.name, oracle, tidal)
		} else {
			t.Logf("step %d (%s): both %s", i, st.name, oracle)
		}
	}
	// The rescales were announced alike: the same SuccessfulRescale
	// messages ("New size: N; reason: ..."). Events are written in the
	// background, so both are given a few seconds to arrive.
	var up, ti []string
	err := harness.WaitReady(ctx, nil, "the same SuccessfulRescale events", 15*time.Second, func(ctx context.Context) error {
		var err error
		if up, err = rescales(ctx, ns, oracleName); err != nil {
			return err
		}
		if ti, err = rescales(ctx, ns, tidalName); err != nil {
			return err
		}
		if !slices.Equal(up, ti) {
			return fmt.Errorf("upstream %q, tidal %q", up, ti)
		}
		return nil
	})
	if err != nil {
		t.Errorf("rescale events differ: %v", err)
	} else if len(up) > 0 {
		t.Logf("rescale events alike: %q", up)
	}
}

// rescales are the distinct messages of the SuccessfulRescale events of
// the autoscaler name, sorted.
func rescales(ctx context.Context, ns, name string) ([]string, error) {
	list, err := env.h.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
		FieldSelector: fields.AndSelectors(fields.OneTermEqualSelector("involvedObject.name", name), fields.OneTermEqualSelector("reason", "SuccessfulRescale")).String(),
	})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Message)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// bystanderName is a third Deployment of every scenario's namespace with a
// HorizontalAutoscaler of its own: with two autoscalers in the namespace,
// tidal lists the namespace's PodMetrics once for both and picks each
// one's pods by label (its podMetricsLister), so every scenario compares
// that path with upstream's LIST by selector. Its pods carry no twin label
// and get no metrics; it never scales (min = max = 1).
const bystanderName = "bystander"

func createBystander(ctx context.Context, ns string) error {
	if _, err := env.h.Client.AppsV1().Deployments(ns).Create(ctx, harness.Deployment(ns, bystanderName, 1), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the bystander Deployment: %w", err)
	}
	return harness.CreateHorizontalAutoscaler(ctx, env.dyn, &v1alpha1.HorizontalAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: bystanderName, Namespace: ns},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: bystanderName},
			MinReplicas:    ptr.To[int32](1), MaxReplicas: 1,
			Metrics: []autoscalingv2.MetricSpec{resourceMetric(corev1.ResourceCPU, utilization(50))},
		},
	})
}

// createTwins creates the native HPA on the oracle Deployment and the
// HorizontalAutoscaler on the tidal one, with the same spec.
func createTwins(ctx context.Context, ns string, spec autoscalingv2.HorizontalPodAutoscalerSpec) error {
	target := func(name string) autoscalingv2.CrossVersionObjectReference {
		return autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name}
	}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: oracleName, Namespace: ns}, Spec: *spec.DeepCopy()}
	hpa.Spec.ScaleTargetRef = target(oracleName)
	if _, err := env.h.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, hpa, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the native HPA: %w", err)
	}
	ha := &v1alpha1.HorizontalAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: tidalName, Namespace: ns},
		Spec:       *spec.DeepCopy(),
	}
	ha.Spec.ScaleTargetRef = target(tidalName)
	return harness.CreateHorizontalAutoscaler(ctx, env.dyn, ha)
}

// observe reads both controllers' status and Deployments.
func observe(ctx context.Context, ns string) (oracle, tidal observation, err error) {
	hpa, err := env.h.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, oracleName, metav1.GetOptions{})
	if err != nil {
		return oracle, tidal, err
	}
	if oracle, err = formatStatus(&hpa.Status); err != nil {
		return oracle, tidal, err
	}
	u, err := env.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Get(ctx, tidalName, metav1.GetOptions{})
	if err != nil {
		return oracle, tidal, err
	}
	var ha v1alpha1.HorizontalAutoscaler
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ha); err != nil {
		return oracle, tidal, err
	}
	if tidal, err = formatStatus(&ha.Status.HorizontalPodAutoscalerStatus); err != nil {
		return oracle, tidal, err
	}
	for _, o := range []struct {
		name string
		obs  *observation
	}{{oracleName, &oracle}, {tidalName, &tidal}} {
		d, err := env.h.Client.AppsV1().Deployments(ns).Get(ctx, o.name, metav1.GetOptions{})
		if err != nil {
			return oracle, tidal, err
		}
		o.obs.DeploymentReplicas = ptr.Deref(d.Spec.Replicas, 1)
	}
	return oracle, tidal, nil
}

// settle polls both controllers until neither has changed for `quiet`,
// and returns what they settled on, with the sequence of desired replicas
// each went through. prevO and prevT are what each settled on in the
// previous step (nil before the first): each sequence starts there, so
// whether the first poll still sees that value (a controller has not yet
// reconciled since the step's change) is timing and does not count.
func settle(ctx context.Context, ns string, quiet time.Duration, prevO, prevT *int32) (oracle, tidal observation, err error) {
	const timeout = 3 * time.Minute
	deadline := time.Now().Add(timeout)
	var seqO, seqT []int32
	if prevO != nil && prevT != nil {
		seqO, seqT = []int32{*prevO}, []int32{*prevT}
	}
	var lastO, lastT observation
	changed := time.Now()
	for first := true; ; first = false {
		o, tw, err := observe(ctx, ns)
		if err != nil {
			return o, tw, err
		}
		// A status without conditions has not been written yet; when each
		// controller writes it first is timing, not a decision.
		if len(o.Conditions) > 0 {
			seqO = appendDistinct(seqO, o.DesiredReplicas)
		}
		if len(tw.Conditions) > 0 {
			seqT = appendDistinct(seqT, tw.DesiredReplicas)
		}
		if first || !o.equalIgnoringSequence(lastO) || !tw.equalIgnoringSequence(lastT) {
			changed = time.Now()
		}
		lastO, lastT = o, tw
		if time.Since(changed) >= quiet {
			lastO.Desired, lastT.Desired = seqO, seqT
			return lastO, lastT, nil
		}
		if time.Now().After(deadline) {
			return o, tw, fmt.Errorf("not settled after %s:\n  upstream: %s\n  tidal:    %s", timeout, o, tw)
		}
		select {
		case <-ctx.Done():
			return o, tw, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (o observation) equalIgnoringSequence(p observation) bool {
	o.Desired, p.Desired = nil, nil
	return o.equal(p)
}

func appendDistinct(seq []int32, v int32) []int32 {
	if len(seq) > 0 && seq[len(seq)-1] == v {
		return seq
	}
	return append(seq, v)
}

// markFirstPodUnready sets Ready=False on the twin's pod of rank 0, as a
// failing readiness probe would; kwok leaves a Running pod's conditions
// alone.
func markFirstPodUnready(ctx context.Context, ns, deployment string) error {
	list, err := env.h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + deployment})
	if err != nil {
		return err
	}
	pods := make([]*corev1.Pod, 0, len(list.Items))
	for i := range list.Items {
		pods = append(pods, &list.Items[i])
	}
	ranks := metricsserver.Rank(pods)
	for _, p := range pods {
		if ranks[p.UID] != 0 {
			continue
		}
		p = p.DeepCopy()
		for i, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
				p.Status.Conditions[i].Status = corev1.ConditionFalse
				p.Status.Conditions[i].LastTransitionTime = metav1.Now()
			}
		}
		_, err := env.h.Client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	}
	return fmt.Errorf("no pod of %s/%s", ns, deployment)
}

// addPendingPod adds a pod matched by the twin's selector that no node
// can run, so it stays Pending. No ReplicaSet adopts it: their selectors
// also name the pod-template-hash.
func addPendingPod(ctx context.Context, ns, deployment string) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: deployment + "-pending", Namespace: ns,
			Labels: map[string]string{"app": deployment, twinLabel: "yes"},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "app", Image: "fake-app:latest",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi"),
				}},
			}},
			NodeSelector: map[string]string{"type": "no-such-node"},
		},
	}
	_, err := env.h.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	return err
}
