package conformance

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
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
	// target is what the twins scale; a Deployment by default.
	target targetKind
	// skip, when set, is why the scenario cannot run here.
	skip string
}

// step changes the inputs, then waits until both controllers settle.
type step struct {
	name string
	// set changes the metric values of the twins.
	set func(m twinMetrics)
	// act changes the twins otherwise (e.g. marks a pod unready); it is
	// called once per twin with that twin's target name.
	act func(ctx context.Context, p *profile, ns, target string) error
	// settle is how long both must stay unchanged to count as settled;
	// default the profile's settleDefault. Steps that wait out a
	// stabilization window need longer.
	settle time.Duration
}

// twinMetrics sets values for both twins of one scenario.
type twinMetrics struct {
	p   *profile
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
	m.p.metrics.SetPodUsage(m.ns, m.sel, "app", corev1.ResourceCPU, quantities(vals)...)
}

// containerCPU sets the cpu usage of another container by pod rank.
func (m twinMetrics) containerCPU(container string, vals ...string) {
	m.p.metrics.SetPodUsage(m.ns, m.sel, container, corev1.ResourceCPU, quantities(vals)...)
}

// memory sets the memory usage of container "app" by pod rank.
func (m twinMetrics) memory(vals ...string) {
	m.p.metrics.SetPodUsage(m.ns, m.sel, "app", corev1.ResourceMemory, quantities(vals)...)
}

// pods sets a per-pod custom metric by pod rank; "" is no sample.
func (m twinMetrics) pods(metric string, vals ...string) {
	m.p.metrics.SetPodMetric(m.ns, m.sel, metric, quantities(vals)...)
}

// object sets a metric of Service "front"; "" removes it.
func (m twinMetrics) object(metric, val string) {
	var q *resource.Quantity
	if val != "" {
		q = metricsserver.Q(val)
	}
	m.p.metrics.SetObjectMetric(m.ns, "services", "front", metric, q)
}

// external sets the series of an external metric, labelled series=a, b, ...
// in order; no values removes the metric.
func (m twinMetrics) external(metric string, vals ...string) {
	if len(vals) == 0 {
		m.p.metrics.SetExternalMetric(m.ns, metric, nil)
		return
	}
	series := make([]metricsserver.ExternalSeries, len(vals))
	for i, v := range vals {
		series[i] = metricsserver.ExternalSeries{Labels: map[string]string{"series": string(rune('a' + i))}, Value: *metricsserver.Q(v)}
	}
	m.p.metrics.SetExternalMetric(m.ns, metric, series)
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
	// DeploymentReplicas is the target's spec.replicas.
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

// runScenario creates the twins in profile p, walks through the steps and
// compares.
func runScenario(t *testing.T, p *profile, sc scenario) {
	if p.skip != "" {
		t.Skip(p.skip)
	}
	if p.setupErr != nil {
		t.Fatalf("environment %s: %v", p.name, p.setupErr)
	}
	if sc.skip != "" {
		t.Skip(sc.skip)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	h := p.h
	ns := "c-" + sc.name
	if err := h.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	m := twinMetrics{p: p, ns: ns, sel: labels.SelectorFromSet(labels.Set{twinLabel: "yes"})}
	for _, name := range []string{oracleName, tidalName} {
		if err := createTarget(ctx, p, ns, name, sc.target, sc.replicas, sc.pod); err != nil {
			t.Fatal(err)
		}
	}
	if sc.target == scalableTarget {
		go mirrorScalables(ctx, p, ns, oracleName, tidalName)
	}
	for _, name := range []string{oracleName, tidalName} {
		if err := waitTargetReady(ctx, p, ns, name, sc.target); err != nil {
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
			if err := first.act(ctx, p, ns, name); err != nil {
				t.Fatalf("step 0 (%s): %v", first.name, err)
			}
		}
	}
	if err := createBystander(ctx, p, ns); err != nil {
		t.Fatal(err)
	}
	if err := createTwins(ctx, p, ns, sc.spec, sc.target); err != nil {
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
				if err := st.act(ctx, p, ns, name); err != nil {
					t.Fatalf("step %d (%s): %v", i, st.name, err)
				}
			}
		}
		oracle, tidal, err := settle(ctx, p, ns, sc.target, cmp.Or(st.settle, p.settleDefault()), prevO, prevT)
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
	compareEvents(ctx, t, p, ns)
}

// compareEvents checks that both controllers announced the same rescales
// (the SuccessfulRescale messages "New size: N; reason: ...") and raised
// the same warnings (reason and message, object names made alike). Events
// are written in the background, so both are given a few seconds.
func compareEvents(ctx context.Context, t *testing.T, p *profile, ns string) {
	t.Helper()
	for _, kind := range []struct{ what, reason, typ string }{
		{"SuccessfulRescale events", "SuccessfulRescale", ""},
		{"Warning events", "", corev1.EventTypeWarning},
	} {
		var up, ti []string
		err := harness.WaitReady(ctx, nil, "the same "+kind.what, 15*time.Second, func(ctx context.Context) error {
			var err error
			if up, err = events(ctx, p, ns, oracleName, kind.reason, kind.typ); err != nil {
				return err
			}
			if ti, err = events(ctx, p, ns, tidalName, kind.reason, kind.typ); err != nil {
				return err
			}
			if !slices.Equal(up, ti) {
				return fmt.Errorf("upstream %q, tidal %q", up, ti)
			}
			return nil
		})
		if err != nil {
			t.Errorf("%s differ: %v", kind.what, err)
		} else if len(up) > 0 {
			t.Logf("%s alike: %q", kind.what, up)
		}
	}
}

// twinNames matches the names of a twin's target and pods in an event
// message, which differ between the twins only by the twin's name.
var twinNames = regexp.MustCompile(`\b(oracle|tidal)(-[a-z0-9]+)*\b`)

// events are the distinct messages of the events of the autoscaler name
// with the given reason and type (either may be empty for any), as
// "Reason: message" with the twins' object names replaced, sorted.
func events(ctx context.Context, p *profile, ns, name, reason, typ string) ([]string, error) {
	// The twins' targets share the autoscalers' names; their controllers'
	// events (FailedCreate, ...) are not compared.
	kind := "HorizontalPodAutoscaler"
	if name == tidalName {
		kind = v1alpha1.Kind
	}
	sel := []fields.Selector{fields.OneTermEqualSelector("involvedObject.name", name), fields.OneTermEqualSelector("involvedObject.kind", kind)}
	if reason != "" {
		sel = append(sel, fields.OneTermEqualSelector("reason", reason))
	}
	if typ != "" {
		sel = append(sel, fields.OneTermEqualSelector("type", typ))
	}
	list, err := p.h.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.AndSelectors(sel...).String()})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range list.Items {
		msg := e.Message
		if reason == "" {
			msg = e.Reason + ": " + twinNames.ReplaceAllString(msg, "<twin>")
		}
		out = append(out, msg)
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

func createBystander(ctx context.Context, p *profile, ns string) error {
	if _, err := p.h.Client.AppsV1().Deployments(ns).Create(ctx, harness.Deployment(ns, bystanderName, 1), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the bystander Deployment: %w", err)
	}
	return harness.CreateHorizontalAutoscaler(ctx, p.dyn, &v1alpha1.HorizontalAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: bystanderName, Namespace: ns},
		Spec: v1alpha1.HorizontalAutoscalerSpec{HorizontalPodAutoscalerSpec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: bystanderName},
			MinReplicas:    ptr.To[int32](1), MaxReplicas: 1,
			Metrics: []autoscalingv2.MetricSpec{resourceMetric(corev1.ResourceCPU, utilization(50))},
		}},
	})
}

// createTwins creates the native HPA on the oracle target and the
// HorizontalAutoscaler on the tidal one, with the same spec.
func createTwins(ctx context.Context, p *profile, ns string, spec autoscalingv2.HorizontalPodAutoscalerSpec, k targetKind) error {
	target := k.ref
	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: oracleName, Namespace: ns}, Spec: *spec.DeepCopy()}
	hpa.Spec.ScaleTargetRef = target(oracleName)
	if _, err := p.h.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, hpa, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the native HPA: %w", err)
	}
	ha := &v1alpha1.HorizontalAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: tidalName, Namespace: ns},
		Spec:       v1alpha1.HorizontalAutoscalerSpec{HorizontalPodAutoscalerSpec: *spec.DeepCopy()},
	}
	ha.Spec.ScaleTargetRef = target(tidalName)
	return harness.CreateHorizontalAutoscaler(ctx, p.dyn, ha)
}

// observe reads both controllers' status and targets.
func observe(ctx context.Context, p *profile, ns string, k targetKind) (oracle, tidal observation, err error) {
	hpa, err := p.h.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, oracleName, metav1.GetOptions{})
	if err != nil {
		return oracle, tidal, err
	}
	if oracle, err = formatStatus(&hpa.Status); err != nil {
		return oracle, tidal, err
	}
	u, err := p.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Get(ctx, tidalName, metav1.GetOptions{})
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
		if o.obs.DeploymentReplicas, err = targetReplicas(ctx, p, ns, o.name, k); err != nil {
			return oracle, tidal, err
		}
	}
	return oracle, tidal, nil
}

// settle polls both controllers until neither has changed for `quiet`,
// and returns what they settled on, with the sequence of desired replicas
// each went through. prevO and prevT are what each settled on in the
// previous step (nil before the first): each sequence starts there, so
// whether the first poll still sees that value (a controller has not yet
// reconciled since the step's change) is timing and does not count.
func settle(ctx context.Context, p *profile, ns string, k targetKind, quiet time.Duration, prevO, prevT *int32) (oracle, tidal observation, err error) {
	const timeout = 3 * time.Minute
	deadline := time.Now().Add(timeout)
	var seqO, seqT []int32
	if prevO != nil && prevT != nil {
		seqO, seqT = []int32{*prevO}, []int32{*prevT}
	}
	var lastO, lastT observation
	changed := time.Now()
	for first := true; ; first = false {
		o, tw, err := observe(ctx, p, ns, k)
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
