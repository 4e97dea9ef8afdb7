package failover

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/autoscaler/behavior"
	"github.com/tidal-autoscaler/tidal/test/harness"
	"github.com/tidal-autoscaler/tidal/test/metricsserver"
)

const (
	syncPeriod    = 2 * time.Second
	leaseDuration = 4 * time.Second
	retryPeriod   = 1 * time.Second
	// takeoverBound is how long after the dead leader's last renewal the
	// other replica holds the lease at the latest, by client-go's leader
	// election (as kube-controller-manager's): it polls the Lease every
	// retry period stretched by up to JitterFactor (1.2) more, sees the
	// last renewal at most one such period after it was written, counts
	// the lease duration from then, and acquires at the first poll after
	// that: leaseDuration + 2 x 2.2 x retryPeriod. No slack beyond it.
	takeoverBound = leaseDuration + 2*time.Duration((1+leaderelection.JitterFactor)*float64(retryPeriod))
	// window is spec.behavior.scaleDown.stabilizationWindowSeconds.
	window = 30 * time.Second

	ns, name    = "failover", "web"
	metric      = "load"
	maxReplicas = 4

	// tidalNamespace/tidalLease is the leader election Lease of
	// harness.StartAutoscaler's replicas.
	tidalNamespace, tidalLease = "tidal-system", "tidal-autoscaler"
)

// scenario is one HorizontalAutoscaler (target 10 per pod, scale-down
// window 30 s) on one Deployment, with two tidal replicas, already scaled
// up to the maximum by a high load.
type scenario struct {
	h        *harness.Harness
	ctx      context.Context
	dyn      dynamic.Interface
	replicas map[string]*harness.Autoscaler
	// setLoad sets every pod's metric.
	setLoad func(v string)
}

func start(t *testing.T) *scenario {
	h := harness.StartT(t, harness.Options{ControllerManager: true, Scheduler: true, Kwok: true})
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	ms, err := metricsserver.Start(ctx, h, metricsserver.Options{})
	if err != nil {
		cancel()
		t.Fatalf("test metrics server: %v", err)
	}
	t.Cleanup(func() { cancel(); _ = ms.Wait() })
	dyn, err := dynamic.NewForConfig(h.Admin)
	must(t, err)
	root, err := harness.RepoRoot()
	must(t, err)
	_, err = h.ApplyCRDs(ctx, filepath.Join(root, "manifests", "crd"))
	must(t, err)

	// The load is high from the start: ranks 0..3 all report 40 (target
	// 10 per pod), so 1 replica goes to 4.
	must(t, h.EnsureNamespace(ctx, ns))
	sel := labels.SelectorFromSet(labels.Set{"app": name})
	s := &scenario{h: h, ctx: ctx, dyn: dyn, replicas: map[string]*harness.Autoscaler{}}
	s.setLoad = func(v string) {
		q := make([]*resource.Quantity, maxReplicas)
		for i := range q {
			q[i] = metricsserver.Q(v)
		}
		ms.SetPodMetric(ns, sel, metric, q...)
	}
	s.setLoad("40")
	_, err = h.Client.AppsV1().Deployments(ns).Create(ctx, harness.Deployment(ns, name, 1), metav1.CreateOptions{})
	must(t, err)

	for _, id := range []string{"tidal-a", "tidal-b"} {
		r, err := startTidal(ctx, h, id)
		must(t, err)
		s.replicas[id] = r
	}
	must(t, createAutoscaler(ctx, dyn))
	waitUntil(t, ctx, 90*time.Second, "scale-up to 4", func() bool { return s.deployReplicas(t) == maxReplicas })
	return s
}

func (s *scenario) deployReplicas(t *testing.T) int32 {
	d, err := s.h.Client.AppsV1().Deployments(ns).Get(s.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Logf("get deployment: %v", err)
		return -1
	}
	return ptr.Deref(d.Spec.Replicas, 0)
}

// killLeader kills the replica holding the lease with SIGKILL, calls
// afterKill (if any), and waits until the other takes over. The takeover
// is measured on the Lease itself, from the dead leader's last renewTime
// to the new holder's acquireTime (both written by the replicas, on this
// machine's clock), and must be within takeoverBound. It returns when it
// killed the leader.
func (s *scenario) killLeader(t *testing.T, afterKill func()) time.Time {
	leader, err := holder(s.ctx, s.h)
	must(t, err)
	var killed, other string
	for id := range s.replicas {
		if matchesIdentity(t, s.replicas[id], leader) {
			killed = id
		} else {
			other = id
		}
	}
	if killed == "" || other == "" {
		t.Fatalf("cannot tell which replica holds the lease (%q)", leader)
	}
	must(t, syscall.Kill(s.replicas[killed].Process.PID(), syscall.SIGKILL))
	killedAt := time.Now()
	waitUntil(t, s.ctx, 10*time.Second, "the killed leader to exit", func() bool {
		done, _ := s.replicas[killed].Process.Exited()
		return done
	})
	// Dead now: its last renewal is the Lease's renewTime until taken over.
	dead, err := s.h.Client.CoordinationV1().Leases(tidalNamespace).Get(s.ctx, tidalLease, metav1.GetOptions{})
	must(t, err)
	if ptr.Deref(dead.Spec.HolderIdentity, "") != leader || dead.Spec.RenewTime == nil {
		t.Fatalf("lease after the kill: holder %q renewTime %v, want %q's last renewal", ptr.Deref(dead.Spec.HolderIdentity, ""), dead.Spec.RenewTime, leader)
	}
	lastRenewal := dead.Spec.RenewTime.Time
	if afterKill != nil {
		afterKill()
	}
	t.Logf("killed leader %s (%s), last renewed %s before the kill", killed, leader, killedAt.Sub(lastRenewal).Round(time.Millisecond))
	// The wait is generous; the assertion is on the Lease's own times.
	waitUntil(t, s.ctx, 3*takeoverBound, "takeover", func() bool {
		id, err := holder(s.ctx, s.h)
		return err == nil && id != "" && id != leader
	})
	taken, err := s.h.Client.CoordinationV1().Leases(tidalNamespace).Get(s.ctx, tidalLease, metav1.GetOptions{})
	must(t, err)
	if taken.Spec.AcquireTime == nil {
		t.Fatal("the new holder's Lease has no acquireTime")
	}
	takeover := taken.Spec.AcquireTime.Sub(lastRenewal)
	t.Logf("%s took over %s after the last renewal (bound %s: lease %s + 2 x %.1f x retry %s), %s after the kill",
		other, takeover.Round(time.Millisecond), takeoverBound, leaseDuration, 1+leaderelection.JitterFactor, retryPeriod, time.Since(killedAt).Round(100*time.Millisecond))
	if takeover > takeoverBound {
		t.Errorf("takeover %s after the dead leader's last renewal, more than the bound %s", takeover, takeoverBound)
	}
	if takeover < leaseDuration {
		t.Errorf("takeover %s after the dead leader's last renewal, before its lease of %s expired", takeover, leaseDuration)
	}
	return killedAt
}

// scaleDownBetween fails unless the Deployment goes from 4 to 1 replicas
// between early and late.
func (s *scenario) scaleDownBetween(t *testing.T, early, late time.Time, why string) {
	var downAt time.Time
	for downAt.IsZero() {
		if time.Now().After(late) {
			t.Fatalf("no scale-down by %s: %s", late.Format(time.StampMilli), why)
		}
		if got := s.deployReplicas(t); got >= 0 && got < maxReplicas {
			downAt = time.Now()
			if downAt.Before(early) {
				t.Fatalf("scaled down to %d at %s, %s before %s: %s", got,
					downAt.Format(time.StampMilli), early.Sub(downAt).Round(100*time.Millisecond), early.Format(time.StampMilli), why)
			}
			if got != 1 {
				t.Errorf("scaled down to %d, want 1", got)
			}
		}
		select {
		case <-s.ctx.Done():
			t.Fatal(s.ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	t.Logf("scaled down at %s (allowed from %s to %s)", downAt.Format(time.StampMilli), early.Format(time.StampMilli), late.Format(time.StampMilli))
}

// TestFailoverKeepsStabilization kills the leader half-way through a
// scale-down stabilization window: the new leader releases the scale-down
// when the window ends, not a window after it took over.
func TestFailoverKeepsStabilization(t *testing.T) {
	s := start(t)
	ctx, dyn, setLoad := s.ctx, s.dyn, s.setLoad
	deployReplicas := func() int32 { return s.deployReplicas(t) }
	// Let the leader see the full Deployment at 4 for a few periods.
	time.Sleep(2 * syncPeriod)

	// Drop the load, then find the last high recommendation in the
	// persisted history once a low one follows it.
	setLoad("1")
	dropped := time.Now()
	var lastHigh time.Time
	waitUntil(t, ctx, 60*time.Second, "a low recommendation in the persisted history", func() bool {
		hist, err := persisted(ctx, dyn)
		if err != nil {
			t.Logf("persisted history: %v", err)
			return false
		}
		// Recommendations are raw proposals (16 here, before the limits)
		// sorted by time; any above 1 holds the scale-down.
		recs := hist.Recommendations
		if len(recs) < 2 || recs[len(recs)-1].Replicas != 1 {
			return false
		}
		for _, r := range recs {
			if r.Replicas > 1 {
				lastHigh = r.Time
			}
		}
		return !lastHigh.IsZero()
	})
	releaseAt := lastHigh.Add(window)
	t.Logf("load dropped at %s; last high recommendation at %s; scale-down due at %s",
		dropped.Format(time.StampMilli), lastHigh.Format(time.StampMilli), releaseAt.Format(time.StampMilli))

	// Kill the leader half-way through the window.
	time.Sleep(time.Until(lastHigh.Add(window / 2)))
	if got := deployReplicas(); got != maxReplicas {
		t.Fatalf("scaled down to %d before the leader was killed (%s before the window ends)", got, time.Until(releaseAt))
	}
	s.killLeader(t, nil)

	// No scale-down before the window has passed since the last high
	// recommendation (a reconcile at exactly lastHigh+window may release
	// it; allow 1s for the clocks of the API server and this test); then
	// the scale-down within a sync period and some slack for a loaded
	// machine. Without the history the new leader would hold the
	// scale-down until a window after its takeover, at least
	// window/2 + the takeover time later than releaseAt: more than this
	// slack.
	s.scaleDownBetween(t, releaseAt.Add(-time.Second), releaseAt.Add(syncPeriod+8*time.Second),
		"the window ends a window after the last high recommendation; without the persisted history the new leader holds 4 replicas until a window after its takeover")
}

// TestFailoverContinuesSteadyRecommendation: the load stays high for
// longer than the window, so the newest high recommendation stored (a
// steady one is not written again) is older than the window when the
// leader is killed, and the load falls at that moment. The controller
// that never stopped would hold the scale-down for a window after its last
// high recommendation, just before the kill; so must the new leader, which
// learns from the lease when its predecessor was last alive. Without that
// it would scale down as soon as it took over.
func TestFailoverContinuesSteadyRecommendation(t *testing.T) {
	s := start(t)
	hist, err := persisted(s.ctx, s.dyn)
	must(t, err)
	recs := hist.Recommendations
	if len(recs) == 0 || recs[len(recs)-1].Replicas <= 1 {
		t.Fatalf("persisted recommendations %+v, want a high one last", recs)
	}
	stored := recs[len(recs)-1].Time
	time.Sleep(time.Until(stored.Add(window + 5*time.Second)))
	if hist, err = persisted(s.ctx, s.dyn); err == nil && len(hist.Recommendations) > 0 {
		stored = hist.Recommendations[len(hist.Recommendations)-1].Time
	}
	t.Logf("newest stored recommendation at %s, %s ago", stored.Format(time.StampMilli), time.Since(stored).Round(100*time.Millisecond))
	if time.Since(stored) < window {
		t.Fatalf("the newest stored recommendation is only %s old: the scenario needs one older than the window (%s)", time.Since(stored), window)
	}

	// The load falls as the leader dies, before the new one takes over.
	killedAt := s.killLeader(t, func() { s.setLoad("1") })
	// The predecessor renewed the lease at most a retry period (1 s)
	// before the kill and recommended high until then: hold until a window
	// after that (1 s more for clocks), then scale down within a sync
	// period and some slack.
	s.scaleDownBetween(t, killedAt.Add(window-2*time.Second), killedAt.Add(window+syncPeriod+8*time.Second),
		"a window after the previous leader's last high recommendation, just before the kill")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func waitUntil(t *testing.T, ctx context.Context, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s", what, timeout)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func createAutoscaler(ctx context.Context, dyn dynamic.Interface) error {
	ha := &v1alpha1.HorizontalAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.HorizontalAutoscalerSpec{HorizontalPodAutoscalerSpec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name},
			MinReplicas:    ptr.To[int32](1),
			MaxReplicas:    maxReplicas,
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.PodsMetricSourceType,
				Pods: &autoscalingv2.PodsMetricSource{
					Metric: autoscalingv2.MetricIdentifier{Name: metric},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("10"))},
				},
			}},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To(int32(window / time.Second))},
			},
		}},
	}
	return harness.CreateHorizontalAutoscaler(ctx, dyn, ha)
}

// persisted reads the history annotation of the HorizontalAutoscaler.
func persisted(ctx context.Context, dyn dynamic.Interface) (behavior.History, error) {
	u, err := dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return behavior.History{}, err
	}
	v, _, err := unstructured.NestedString(u.Object, "status", "tidal", "history")
	if err != nil {
		return behavior.History{}, err
	}
	if v == "" {
		return behavior.History{}, errors.New("no history in status.tidal.history yet")
	}
	return behavior.Decode(v)
}

// holder is the identity holding the leader election Lease.
func holder(ctx context.Context, h *harness.Harness) (string, error) {
	lease, err := h.Client.CoordinationV1().Leases(tidalNamespace).Get(ctx, tidalLease, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return ptr.Deref(lease.Spec.HolderIdentity, ""), nil
}

// matchesIdentity tells whether r is the replica with identity: each
// replica logs its identity ("Waiting to lead ... identity=...") in its own
// log.
func matchesIdentity(t *testing.T, r *harness.Autoscaler, identity string) bool {
	t.Helper()
	if identity == "" {
		return false
	}
	data, err := os.ReadFile(r.Process.LogPath())
	if err != nil {
		t.Logf("read %s: %v", r.Process.LogPath(), err)
		return false
	}
	return strings.Contains(string(data), fmt.Sprintf("identity=%q", identity))
}

// startTidal runs one `tidal autoscaler --mode=crd` replica under the
// harness with a short lease, and waits until it is ready (leading or
// standing by while another replica holds the lease).
func startTidal(ctx context.Context, h *harness.Harness, name string) (*harness.Autoscaler, error) {
	bin, err := harness.TidalBinary(ctx)
	if err != nil {
		return nil, err
	}
	return h.StartAutoscaler(ctx, harness.AutoscalerOptions{
		Binary: bin, Name: name,
		Args: []string{
			"--leader-elect-lease-duration=" + leaseDuration.String(),
			"--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=" + retryPeriod.String(),
			"--horizontal-pod-autoscaler-sync-period=" + syncPeriod.String(),
			"--kube-api-qps=100", "--kube-api-burst=200", "-v=2",
		},
	})
}
