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
const oracleName, tidalName, nativeName = "oracle", "tidal", "native"

// twin is one of a scenario's targets with its autoscaler and the
// controller that reconciles it.
type twin struct {
	name string
	// who names its controller in failures.
	who string
	// crd: a HorizontalAutoscaler; else a native HorizontalPodAutoscaler.
	crd bool
	// manager is the field manager of its controller's writes, the
	// autoscaler's status, its target's scale and its events.
	manager string
}

// Field managers: a client's user agent up to its first slash.
const upstreamManager, tidalManager = "kube-controller-manager", "tidal-autoscaler"

var (
	oracleTwin = twin{name: oracleName, who: "the upstream HPA controller", manager: upstreamManager}
	crdTwin    = twin{name: tidalName, who: "tidal (crd mode)", crd: true, manager: tidalManager}
	nativeTwin = twin{name: nativeName, who: "tidal (native mode)", manager: tidalManager}
)

// twins are the twins p runs, the oracle first.
func (p *profile) twins() []twin {
	out := []twin{oracleTwin}
	if p.modes[modeCRD] {
		out = append(out, crdTwin)
	}
	if p.modes[modeNative] {
		out = append(out, nativeTwin)
	}
	return out
}

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
// compares each Tidal twin with the oracle.
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
	twins := p.twins()
	m := twinMetrics{p: p, ns: ns, sel: labels.SelectorFromSet(labels.Set{twinLabel: "yes"})}
	for _, tw := range twins {
		if err := createTarget(ctx, p, ns, tw.name, sc.target, sc.replicas, sc.pod); err != nil {
			t.Fatal(err)
		}
	}
	if sc.target == scalableTarget {
		go mirrorScalables(ctx, p, ns, twinNames(twins)...)
	}
	for _, tw := range twins {
		if err := waitTargetReady(ctx, p, ns, tw.name, sc.target); err != nil {
			t.Fatal(err)
		}
	}
	if len(sc.steps) == 0 {
		t.Fatal("scenario without steps")
	}
	act := func(i int, st step) {
		if st.act == nil {
			return
		}
		for _, tw := range twins {
			if err := st.act(ctx, p, ns, tw.name); err != nil {
				t.Fatalf("step %d (%s): %v", i, st.name, err)
			}
		}
	}
	// The first step's inputs are in place before the twins exist: the
	// controllers reconcile a new autoscaler at once, so a change made
	// after creating them races with that first reconcile.
	first := sc.steps[0]
	if first.set != nil {
		first.set(m)
	}
	act(0, first)
	if first.act != nil {
		for _, tw := range twins {
			if err := waitTargetStatus(ctx, p, ns, tw.name, sc.target); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := createBystander(ctx, p, ns); err != nil {
		t.Fatal(err)
	}
	if err := createTwins(ctx, p, ns, twins, sc.spec, sc.target); err != nil {
		t.Fatal(err)
	}
	// The desired replicas each settled on in the previous step: the next
	// step's sequences start from them.
	var prev []int32
	for i, st := range sc.steps {
		if i > 0 && st.set != nil {
			st.set(m)
		}
		if i > 0 {
			act(i, st)
		}
		obs, err := settle(ctx, p, ns, twins, sc.target, cmp.Or(st.settle, p.settleDefault()), prev)
		if err != nil {
			t.Fatalf("step %d (%s): %v", i, st.name, err)
		}
		prev = prev[:0]
		for _, o := range obs {
			prev = append(prev, o.DesiredReplicas)
		}
		same := true
		for j, tw := range twins[1:] {
			if !obs[0].equal(obs[j+1]) {
				same = false
				t.Errorf("step %d (%s): %s decided differently from the upstream HPA controller\n  upstream: %s\n  %-8s  %s",
					i, st.name, tw.who, obs[0], tw.name+":", obs[j+1])
			}
		}
		if same {
			t.Logf("step %d (%s): all %d %s", i, st.name, len(twins), obs[0])
		}
	}
	compareEvents(ctx, t, p, ns, twins)
	checkWriters(ctx, t, p, ns, twins, sc.target)
	logRefusals(ctx, t, p, ns, twins)
}

func twinNames(twins []twin) []string {
	var out []string
	for _, tw := range twins {
		out = append(out, tw.name)
	}
	return out
}

// compareEvents checks that every controller announced the same rescales
// as upstream (the SuccessfulRescale messages "New size: N; reason: ...")
// and raised the same warnings (reason and message, object names made
// alike). Events are written in the background, one at a time per
// controller, so they are given up to a minute: with every scenario
// starting together on two cores, tidal's events were seen written up to
// 40 s after they were recorded.
func compareEvents(ctx context.Context, t *testing.T, p *profile, ns string, twins []twin) {
	t.Helper()
	for _, kind := range []struct{ what, reason, typ string }{
		{"SuccessfulRescale events", "SuccessfulRescale", ""},
		{"Warning events", "", corev1.EventTypeWarning},
	} {
		for _, tw := range twins[1:] {
			var up, ti []string
			err := harness.WaitReady(ctx, nil, "the same "+kind.what, time.Minute, func(ctx context.Context) error {
				var err error
				if up, err = events(ctx, p, ns, oracleTwin, kind.reason, kind.typ); err != nil {
					return err
				}
				if ti, err = events(ctx, p, ns, tw, kind.reason, kind.typ); err != nil {
					return err
				}
				if !slices.Equal(up, ti) {
					return fmt.Errorf("upstream %q, %s %q", up, tw.who, ti)
				}
				return nil
			})
			if err != nil {
				t.Errorf("%s differ: %v", kind.what, err)
			} else if len(up) > 0 {
				t.Logf("%s alike (%s): %q", kind.what, tw.who, up)
			}
		}
	}
}

// twinObjectNames matches the names of a twin's target and pods in an
// event message, which differ between the twins only by the twin's name.
var twinObjectNames = regexp.MustCompile(`\b(oracle|tidal|native)(-[a-z0-9]+)*\b`)

// events are the distinct messages of the events of twin tw's autoscaler
// written by its controller, with the given reason and type (either may be
// empty for any), as "Reason: message" with the twins' object names
// replaced, sorted. The HPA twins' events are told apart by their writer:
// upstream and native-mode tidal record with the same source component,
// and each also reconciles the other's HPA, whose writes it may not make
// (see restrictWrites), and warns about that.
func events(ctx context.Context, p *profile, ns string, tw twin, reason, typ string) ([]string, error) {
	// The twins' targets share the autoscalers' names; their controllers'
	// events (FailedCreate, ...) are not compared.
	kind := "HorizontalPodAutoscaler"
	if tw.crd {
		kind = v1alpha1.Kind
	}
	sel := []fields.Selector{fields.OneTermEqualSelector("involvedObject.name", tw.name), fields.OneTermEqualSelector("involvedObject.kind", kind)}
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
		if !writtenBy(e.ManagedFields, tw.manager) {
			continue
		}
		msg := e.Message
		if reason == "" {
			msg = e.Reason + ": " + twinObjectNames.ReplaceAllString(msg, "<twin>")
		}
		out = append(out, msg)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// writtenBy: manager created the object (its first managedFields entry).
func writtenBy(fields []metav1.ManagedFieldsEntry, manager string) bool {
	return len(fields) > 0 && fields[0].Manager == manager
}

// bystanderName is a third Deployment of every scenario's namespace with a
// HorizontalAutoscaler of its own: with two autoscalers in the namespace,
// tidal lists the namespace's PodMetrics once for both and picks each
// one's pods by label (its podMetricsLister), so every scenario compares
// that path with upstream's LIST by selector. Its pods carry no twin label;
// they use half their CPU request, the bystander's target, and it never
// scales (min = max = 1). Without a usage it failed every sync, two Warning
// events each time: across all the scenarios that kept tidal's event queue
// tens of seconds behind, and events the twins' comparison waits for were
// dropped from the full queue (client-go keeps 1,000).
const bystanderName = "bystander"

func createBystander(ctx context.Context, p *profile, ns string) error {
	if _, err := p.h.Client.AppsV1().Deployments(ns).Create(ctx, harness.Deployment(ns, bystanderName, 1), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the bystander Deployment: %w", err)
	}
	p.metrics.SetPodUsage(ns, labels.SelectorFromSet(labels.Set{"app": bystanderName}), "app", corev1.ResourceCPU, metricsserver.Q("50m"))
	return harness.CreateHorizontalAutoscaler(ctx, p.dyn, &v1alpha1.HorizontalAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: bystanderName, Namespace: ns},
		Spec: v1alpha1.HorizontalAutoscalerSpec{HorizontalPodAutoscalerSpec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: bystanderName},
			MinReplicas:    ptr.To[int32](1), MaxReplicas: 1,
			Metrics: []autoscalingv2.MetricSpec{resourceMetric(corev1.ResourceCPU, utilization(50))},
		}},
	})
}

// createTwins creates the twins' autoscalers, with the same spec: native
// HPAs, and a HorizontalAutoscaler for the crd twin.
func createTwins(ctx context.Context, p *profile, ns string, twins []twin, spec autoscalingv2.HorizontalPodAutoscalerSpec, k targetKind) error {
	for _, tw := range twins {
		if tw.crd {
			ha := &v1alpha1.HorizontalAutoscaler{
				TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.Kind},
				ObjectMeta: metav1.ObjectMeta{Name: tw.name, Namespace: ns},
				Spec:       v1alpha1.HorizontalAutoscalerSpec{HorizontalPodAutoscalerSpec: *spec.DeepCopy()},
			}
			ha.Spec.ScaleTargetRef = k.ref(tw.name)
			if err := harness.CreateHorizontalAutoscaler(ctx, p.dyn, ha); err != nil {
				return err
			}
			continue
		}
		hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: tw.name, Namespace: ns}, Spec: *spec.DeepCopy()}
		hpa.Spec.ScaleTargetRef = k.ref(tw.name)
		if _, err := p.h.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, hpa, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create the HPA %s: %w", tw.name, err)
		}
	}
	return nil
}

// observe reads one twin's status and target.
func observe(ctx context.Context, p *profile, ns string, tw twin, k targetKind) (observation, error) {
	var status *autoscalingv2.HorizontalPodAutoscalerStatus
	if tw.crd {
		u, err := p.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Get(ctx, tw.name, metav1.GetOptions{})
		if err != nil {
			return observation{}, err
		}
		var ha v1alpha1.HorizontalAutoscaler
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ha); err != nil {
			return observation{}, err
		}
		status = &ha.Status.HorizontalPodAutoscalerStatus
	} else {
		hpa, err := p.h.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, tw.name, metav1.GetOptions{})
		if err != nil {
			return observation{}, err
		}
		status = &hpa.Status
	}
	o, err := formatStatus(status)
	if err != nil {
		return o, err
	}
	o.DeploymentReplicas, err = targetReplicas(ctx, p, ns, tw.name, k)
	return o, err
}

// settle polls the twins until none has changed for `quiet`, and returns
// what each settled on, in the order of twins, with the sequence of
// desired replicas each went through. prev is what each settled on in the
// previous step (nil before the first): each sequence starts there, so
// whether the first poll still sees that value (a controller has not yet
// reconciled since the step's change) is timing and does not count.
func settle(ctx context.Context, p *profile, ns string, twins []twin, k targetKind, quiet time.Duration, prev []int32) ([]observation, error) {
	const timeout = 3 * time.Minute
	deadline := time.Now().Add(timeout)
	seqs := make([][]int32, len(twins))
	if len(prev) == len(twins) {
		for i, v := range prev {
			seqs[i] = []int32{v}
		}
	}
	last := make([]observation, len(twins))
	changed := time.Now()
	for first := true; ; first = false {
		obs := make([]observation, len(twins))
		for i, tw := range twins {
			o, err := observe(ctx, p, ns, tw, k)
			if err != nil {
				return nil, err
			}
			// A status without conditions has not been written yet; when
			// each controller writes it first is timing, not a decision.
			if len(o.Conditions) > 0 {
				seqs[i] = appendDistinct(seqs[i], o.DesiredReplicas)
			}
			if first || !o.equalIgnoringSequence(last[i]) {
				changed = time.Now()
			}
			obs[i] = o
		}
		last = obs
		if time.Since(changed) >= quiet {
			for i := range last {
				last[i].Desired = seqs[i]
			}
			return last, nil
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for i, tw := range twins {
				fmt.Fprintf(&b, "\n  %-8s  %s", tw.name+":", obs[i])
			}
			return nil, fmt.Errorf("not settled after %s:%s", timeout, b.String())
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
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
