package closedloop

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	cmv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/test/bench/samples"
	"github.com/tidal-autoscaler/tidal/test/harness"
)

const (
	namespace = "closedloop-bench"
	// row names the samples' row.
	row            = "closed-loop"
	balancerPeriod = 500 * time.Millisecond
	poll           = 200 * time.Millisecond
	// stepMargin is the least time between seeing the steady status and
	// the step.
	stepMargin = 300 * time.Millisecond
)

// apis are the APIServices each side's adapter is registered for, in
// turn.
var apis = [][2]string{{"custom.metrics.k8s.io", "v1beta1"}, {"custom.metrics.k8s.io", "v1beta2"}}

// side is one pipeline: an adapter, a controller (running throughout),
// and the autoscaler object of its Deployment.
type side struct {
	name, app string
	lb        *balancer
	// start runs the adapter and points the APIServices at it.
	start func(ctx context.Context) (*harness.Adapter, error)
	// create makes the autoscaler object; status reads its status.
	create func(ctx context.Context) error
	status func(ctx context.Context) (desired int32, read bool, describe string, err error)
	// remove deletes the autoscaler object; gone reports whether it is.
	remove func(ctx context.Context) error
	gone   func(ctx context.Context) (bool, error)
}

// turnResult is one turn's figures.
type turnResult struct {
	// frac is where in the sync period the step landed after the
	// object's creation.
	frac float64
	// toReplicas, firstRescale and toReady are measured from the step.
	toReplicas, firstRescale, toReady time.Duration
	// reached is the largest spec.replicas seen until toReady.
	reached int32
}

// BenchmarkClosedLoop times a load step to the new replica count with
// Tidal's pipeline and the upstream one, in turns (see the package
// comment).
func BenchmarkClosedLoop(b *testing.B) {
	cfg, err := configFromEnv()
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type built struct {
		tidal, peer string
		err         error
	}
	peerDir := b.TempDir()
	binc := make(chan built, 1)
	go func() {
		var out built
		if out.tidal, out.err = harness.TidalBinary(ctx); out.err == nil {
			out.peer, out.err = peerBinary(ctx, cfg.peer, peerDir)
		}
		binc <- out
	}()
	syncArg := "--horizontal-pod-autoscaler-sync-period=" + cfg.sync.String()
	h := harness.StartT(b, harness.Options{
		ControllerManager: true, Kwok: true, Prometheus: true,
		HPAController: true, HPAControllerArgs: []string{syncArg},
		Logf: b.Logf,
	})
	bins := <-binc
	if bins.err != nil {
		b.Fatal(bins.err)
	}
	scrape, err := readScrapeInterval(ctx, h.PrometheusURL)
	if err != nil {
		b.Fatal(err)
	}
	bnd := bound(scrape, cfg.window, cfg.sync)
	b.Logf("closed loop: %d -> %d replicas (demand %d -> %d requests/s, %d per pod), scrape %s, rate window %s, sync %s: bound %s; %d rounds",
		cfg.from, cfg.to, cfg.from*perPod, cfg.to*perPod, perPod, scrape, cfg.window, cfg.sync, bnd, cfg.rounds)

	ruleFile := filepath.Join(b.TempDir(), "rules.yaml")
	if err := os.WriteFile(ruleFile, []byte(rules(cfg.window)), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := h.EnsureNamespace(ctx, namespace); err != nil {
		b.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(h.Admin)
	if err != nil {
		b.Fatal(err)
	}
	sides := []*side{tidalSide(h, dyn, bins.tidal, ruleFile, cfg), upstreamSide(h, bins.peer, ruleFile, cfg)}

	// The Deployments and their load, steady from the start.
	lbCtx, stopLB := context.WithCancel(ctx)
	var lbs sync.WaitGroup
	defer func() { stopLB(); lbs.Wait() }()
	for _, s := range sides {
		d := harness.Deployment(namespace, s.app, int32(cfg.from))
		d.Spec.Template.Spec.NodeName, d.Spec.Template.Spec.NodeSelector = h.NodeName, nil // no scheduler needed
		if _, err := h.Client.AppsV1().Deployments(namespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		s.lb = newBalancer(h.Client, h.Exporter, namespace, s.app)
		s.lb.set(ctx, float64(cfg.from*perPod))
		lbs.Add(1)
		go func() { defer lbs.Done(); s.lb.run(lbCtx, balancerPeriod) }()
	}
	for _, s := range sides {
		if _, err := h.WaitDeploymentReady(ctx, namespace, s.app, 2*time.Minute); err != nil {
			b.Fatal(err)
		}
	}
	root, err := harness.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := h.ApplyCRDs(ctx, filepath.Join(root, "manifests", "crd")); err != nil {
		b.Fatal(err)
	}
	if _, err := h.StartAutoscaler(ctx, harness.AutoscalerOptions{Binary: bins.tidal, Args: []string{syncArg}}); err != nil {
		b.Fatal(err)
	}

	results := map[string][]float64{}
	for round := 1; round <= cfg.rounds; round++ {
		for _, s := range sides {
			r, err := runTurn(ctx, b, h, cfg, s, round, bnd)
			if err != nil {
				b.Fatalf("round %d, %s: %v", round, s.name, err)
			}
			b.Logf("round %d, %s: step at %.2f of a sync period after the object's creation; first rescale after %s, %d replicas after %s (bound %s), %d Ready after %s; largest count %d",
				round, s.name, r.frac, r.firstRescale.Round(time.Millisecond), cfg.to, r.toReplicas.Round(time.Millisecond), bnd,
				cfg.to, r.toReady.Round(time.Millisecond), r.reached)
			record(b, s.name, round, r, bnd)
			results[s.name] = append(results[s.name], r.toReplicas.Seconds())
		}
	}
	for _, s := range sides {
		v := slices.Sorted(slices.Values(results[s.name]))
		b.ReportMetric(v[len(v)/2], s.name+"-step-to-replicas-s")
	}
	b.ReportMetric(bnd.Seconds(), "bound-s")
}

// record appends one turn's figures to the samples file.
func record(b *testing.B, side string, round int, r turnResult, bnd time.Duration) {
	for _, f := range []samples.Sample{
		{Metric: "step-to-replicas", Value: r.toReplicas.Seconds(), Unit: "s"},
		{Metric: "first-rescale", Value: r.firstRescale.Seconds(), Unit: "s"},
		{Metric: "step-to-ready", Value: r.toReady.Seconds(), Unit: "s"},
		{Metric: "replicas-reached", Value: float64(r.reached), Unit: "replicas"},
		{Metric: "bound", Value: bnd.Seconds(), Unit: "s"},
		{Metric: "step-phase", Value: r.frac, Unit: "periods"},
	} {
		f.Row, f.Side, f.Round = row, side, round
		if err := samples.Record(f); err != nil {
			b.Errorf("samples: %v", err)
		}
	}
}

// runTurn is one side's turn: its adapter up and owning the APIServices,
// steady at cfg.from, the step, the Deployment followed to cfg.to, then a
// reset unless it was the last round.
func runTurn(ctx context.Context, b *testing.B, h *harness.Harness, cfg config, s *side, round int, bnd time.Duration) (turnResult, error) {
	r := turnResult{frac: phase(round, cfg.rounds)}
	a, err := s.start(ctx)
	if a != nil && a.Process != nil {
		// The other side's adapter must not answer in the next turn.
		defer func() { _ = a.Process.Stop(10 * time.Second) }()
	}
	if err != nil {
		return r, fmt.Errorf("start the adapter: %w", err)
	}
	// Only this side's adapter runs: once the metric is served through
	// the aggregator, it is this adapter that serves it.
	var proc *harness.Process
	if a != nil {
		proc = a.Process
	}
	if err := harness.WaitReady(ctx, proc, s.name+"'s metric served through the aggregator and steady", 3*time.Minute+2*cfg.window, func(ctx context.Context) error {
		vals, err := podValues(ctx, h, s.app)
		if err != nil {
			return err
		}
		return steady(vals, cfg.from)
	}); err != nil {
		return r, err
	}
	before := time.Now()
	if err := s.create(ctx); err != nil {
		return r, err
	}
	created := before.Add(time.Since(before) / 2)
	var last string
	if err := harness.WaitReady(ctx, nil, s.name+"'s controller at "+fmt.Sprint(cfg.from)+" replicas with the metric read", 2*cfg.sync+2*time.Minute, func(ctx context.Context) error {
		desired, read, describe, err := s.status(ctx)
		if err != nil {
			return err
		}
		last = describe
		if !read || desired != int32(cfg.from) {
			return fmt.Errorf("status: %s", describe)
		}
		return nil
	}); err != nil {
		return r, err
	}
	at := stepAt(created, time.Now().Add(stepMargin), cfg.sync, r.frac)
	d, err := h.Client.AppsV1().Deployments(namespace).Get(ctx, s.app, metav1.GetOptions{})
	if err != nil {
		return r, err
	}
	if n := ptr.Deref(d.Spec.Replicas, 1); n != int32(cfg.from) {
		return r, fmt.Errorf("%d replicas before the step, want %d (controller: %s)", n, cfg.from, last)
	}
	timeout := 2*bnd + time.Minute
	followCtx, cancel := context.WithTimeout(ctx, time.Until(at)+timeout)
	defer cancel()
	w, err := watchDeployment(followCtx, h, s.app, d.ResourceVersion)
	if err != nil {
		return r, err
	}
	if err := sleepUntil(ctx, at); err != nil {
		w.Stop()
		return r, err
	}
	stepped := s.lb.set(ctx, float64(cfg.to*perPod))
	if stepped.IsZero() {
		w.Stop()
		return r, fmt.Errorf("the step could not be applied: listing %s's pods failed", s.app)
	}
	if err := follow(followCtx, h, w, s.app, d.ResourceVersion, stepped, int32(cfg.from), int32(cfg.to), &r); err != nil {
		_, _, describe, _ := s.status(ctx)
		return r, fmt.Errorf("%w; controller: %s", err, describe)
	}
	if round < cfg.rounds {
		return r, reset(ctx, h, cfg, s)
	}
	return r, nil
}

// reset deletes the side's autoscaler object, sets the demand back and
// scales the Deployment back to cfg.from.
func reset(ctx context.Context, h *harness.Harness, cfg config, s *side) error {
	if err := s.remove(ctx); err != nil {
		return err
	}
	if err := harness.WaitReady(ctx, nil, s.name+"'s autoscaler object deleted", time.Minute, func(ctx context.Context) error {
		gone, err := s.gone(ctx)
		if err == nil && !gone {
			err = fmt.Errorf("still there")
		}
		return err
	}); err != nil {
		return err
	}
	s.lb.set(ctx, float64(cfg.from*perPod))
	deployments := h.Client.AppsV1().Deployments(namespace)
	sc, err := deployments.GetScale(ctx, s.app, metav1.GetOptions{})
	if err != nil {
		return err
	}
	sc.Spec.Replicas = int32(cfg.from)
	if _, err := deployments.UpdateScale(ctx, s.app, sc, metav1.UpdateOptions{}); err != nil {
		return err
	}
	if _, err := h.WaitDeploymentReady(ctx, namespace, s.app, 2*time.Minute); err != nil {
		return err
	}
	d, err := deployments.Get(ctx, s.app, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if n := ptr.Deref(d.Spec.Replicas, 1); n != int32(cfg.from) {
		return fmt.Errorf("reset: %s has %d replicas after the scale to %d: something else scaled it", s.app, n, cfg.from)
	}
	return nil
}

// watchDeployment watches the Deployment app from resourceVersion rv.
func watchDeployment(ctx context.Context, h *harness.Harness, app, rv string) (watch.Interface, error) {
	return h.Client.AppsV1().Deployments(namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", app).String(), ResourceVersion: rv,
	})
}

// follow reads the Deployment's events from the step until spec.replicas
// reaches to and then status.readyReplicas does, filling r's times from
// stepped (an event's time is when it arrived). A watch that ends early is
// opened again from the last version seen; ctx bounds the whole.
func follow(ctx context.Context, h *harness.Harness, w watch.Interface, app, rv string, stepped time.Time, from, to int32, r *turnResult) error {
	var first, reached time.Time
	r.reached = from
	state := fmt.Sprintf("%d replicas", from)
	for {
		for ev := range w.ResultChan() {
			now := time.Now()
			if ev.Type == watch.Error {
				w.Stop()
				return fmt.Errorf("watch %s: %v", app, apierrors.FromObject(ev.Object))
			}
			d, ok := ev.Object.(*appsv1.Deployment)
			if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) {
				continue
			}
			rv = d.ResourceVersion
			n := ptr.Deref(d.Spec.Replicas, 1)
			state = fmt.Sprintf("spec.replicas %d, ready %d", n, d.Status.ReadyReplicas)
			r.reached = max(r.reached, n)
			if n != from && first.IsZero() {
				first = now
				r.firstRescale = first.Sub(stepped)
			}
			if n >= to && reached.IsZero() {
				reached = now
				r.toReplicas = reached.Sub(stepped)
			}
			if !reached.IsZero() && d.Status.ObservedGeneration >= d.Generation && d.Status.ReadyReplicas >= to {
				r.toReady = now.Sub(stepped)
				w.Stop()
				return nil
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return fmt.Errorf("%s not at %d replicas, %d Ready, %s after the step; last seen: %s", app, to, to, time.Since(stepped).Round(time.Second), state)
		}
		var err error
		if w, err = watchDeployment(ctx, h, app, rv); err != nil {
			return err
		}
	}
}

// podValues reads the metric of app's pods through the aggregator, as
// the controllers do.
func podValues(ctx context.Context, h *harness.Harness, app string) ([]float64, error) {
	body, err := h.Client.Discovery().RESTClient().Get().
		AbsPath(fmt.Sprintf("/apis/custom.metrics.k8s.io/v1beta2/namespaces/%s/pods/*/%s", namespace, metric)).
		Param("labelSelector", "app="+app).DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	var list cmv1beta2.MetricValueList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, err
	}
	var out []float64
	for _, it := range list.Items {
		out = append(out, it.Value.AsApproximateFloat64())
	}
	return out, nil
}

// spec is both sides' autoscaler spec: the Pods metric at perPod per pod,
// default behavior.
func spec(app string, cfg config) autoscalingv2.HorizontalPodAutoscalerSpec {
	return autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: app},
		MinReplicas:    ptr.To[int32](1),
		MaxReplicas:    int32(2 * cfg.to),
		Metrics: []autoscalingv2.MetricSpec{{
			Type: autoscalingv2.PodsMetricSourceType,
			Pods: &autoscalingv2.PodsMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: metric},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: resource.NewQuantity(perPod, resource.DecimalSI)},
			},
		}},
	}
}

// tidalSide is `tidal adapter` + `tidal autoscaler` on web-a.
func tidalSide(h *harness.Harness, dyn dynamic.Interface, bin, ruleFile string, cfg config) *side {
	const app = "web-a"
	res := dyn.Resource(v1alpha1.GroupVersionResource).Namespace(namespace)
	return &side{
		name: "tidal", app: app,
		start: func(ctx context.Context) (*harness.Adapter, error) {
			return h.StartAdapter(ctx, harness.AdapterOptions{Binary: bin, RuleFile: ruleFile, APIServices: apis})
		},
		create: func(ctx context.Context) error {
			return harness.CreateHorizontalAutoscaler(ctx, dyn, &v1alpha1.HorizontalAutoscaler{
				ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: namespace},
				Spec:       v1alpha1.HorizontalAutoscalerSpec{HorizontalPodAutoscalerSpec: spec(app, cfg)},
			})
		},
		status: func(ctx context.Context) (int32, bool, string, error) {
			u, err := res.Get(ctx, app, metav1.GetOptions{})
			if err != nil {
				return 0, false, err.Error(), err
			}
			var ha v1alpha1.HorizontalAutoscaler
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ha); err != nil {
				return 0, false, err.Error(), err
			}
			return ha.Status.DesiredReplicas, len(ha.Status.CurrentMetrics) > 0, describe(ha.Status.CurrentReplicas, ha.Status.DesiredReplicas, ha.Status.Conditions), nil
		},
		remove: func(ctx context.Context) error { return res.Delete(ctx, app, metav1.DeleteOptions{}) },
		gone: func(ctx context.Context) (bool, error) {
			_, err := res.Get(ctx, app, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, err
		},
	}
}

// upstreamSide is prometheus-adapter + kube-controller-manager's HPA
// controller on web-b; peer empty runs the tools folder's
// prometheus-adapter.
func upstreamSide(h *harness.Harness, peer, ruleFile string, cfg config) *side {
	const app = "web-b"
	hpas := h.Client.AutoscalingV2().HorizontalPodAutoscalers(namespace)
	return &side{
		name: "upstream", app: app,
		start: func(ctx context.Context) (*harness.Adapter, error) {
			o := harness.PeerOptions{RuleFile: ruleFile, APIServices: apis}
			if peer == "" {
				return h.StartPrometheusAdapter(ctx, o)
			}
			return h.StartPrometheusAdapterFrom(ctx, peer, o)
		},
		create: func(ctx context.Context) error {
			_, err := hpas.Create(ctx, &autoscalingv2.HorizontalPodAutoscaler{
				ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: namespace}, Spec: spec(app, cfg),
			}, metav1.CreateOptions{})
			return err
		},
		status: func(ctx context.Context) (int32, bool, string, error) {
			hpa, err := hpas.Get(ctx, app, metav1.GetOptions{})
			if err != nil {
				return 0, false, err.Error(), err
			}
			return hpa.Status.DesiredReplicas, len(hpa.Status.CurrentMetrics) > 0, describe(hpa.Status.CurrentReplicas, hpa.Status.DesiredReplicas, hpa.Status.Conditions), nil
		},
		remove: func(ctx context.Context) error { return hpas.Delete(ctx, app, metav1.DeleteOptions{}) },
		gone: func(ctx context.Context) (bool, error) {
			_, err := hpas.Get(ctx, app, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, err
		},
	}
}

func describe(current, desired int32, conds []autoscalingv2.HorizontalPodAutoscalerCondition) string {
	s := fmt.Sprintf("current %d desired %d", current, desired)
	for _, c := range conds {
		s += fmt.Sprintf("; %s=%s/%s %q", c.Type, c.Status, c.Reason, c.Message)
	}
	return s
}

// peerBinary is prometheus-adapter's binary per TIDAL_BENCH_PEER: "" for
// the tools folder's, "build" to build it from test/bench/peer (which pins
// v0.12.0) into dir, or a path.
func peerBinary(ctx context.Context, v, dir string) (string, error) {
	if v != "build" {
		return v, nil
	}
	root, err := harness.RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, harness.PrometheusAdapterBinary)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "sigs.k8s.io/prometheus-adapter/cmd/adapter")
	cmd.Dir = filepath.Join(root, "test", "bench", "peer")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building prometheus-adapter in test/bench/peer: %w\n%s", err, msg)
	}
	return out, nil
}

// readScrapeInterval asks Prometheus for its global scrape interval.
func readScrapeInterval(ctx context.Context, promURL string) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, promURL+"/api/v1/status/config", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s/api/v1/status/config: %s", promURL, resp.Status)
	}
	return scrapeInterval(body)
}

func sleepUntil(ctx context.Context, t time.Time) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(t)):
		return nil
	}
}
