package controller

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	scalefake "k8s.io/client-go/scale/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/tidal-autoscaler/tidal/autoscaler/decision"
	"github.com/tidal-autoscaler/tidal/autoscaler/metrics"
	"github.com/tidal-autoscaler/tidal/autoscaler/monitor"
	"github.com/tidal-autoscaler/tidal/autoscaler/source"
)

// metricValue is the value of the counter or gauge name whose labels are
// labels in reg; 0 when there is none.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	must(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue metrics
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// TestRunReconcilesNativeHPAs drives the whole controller: informers, the
// queue, a worker, the scale update and the status write.
func TestRunReconcilesNativeHPAs(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	w := world{scale: newScale(3, 3, "app=web"), pods: pods(2000, 2000, 2000), podMetrics: milliByPod(600, 1000, 1400)}
	hpa := newHPA("web", ptr.To[int32](1), 10, cpuUtilization(30))
	objs := []runtime.Object{hpa}
	for _, p := range w.pods {
		objs = append(objs, p)
	}
	kube := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(kube, 0)

	var scaled atomic.Int32
	scales := &scalefake.FakeScaleClient{}
	scales.AddReactor("get", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
		sc := w.scale.DeepCopy()
		if n := scaled.Load(); n != 0 {
			sc.Spec.Replicas = n
		}
		return true, sc, nil
	})
	scales.AddReactor("update", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sc := a.(k8stesting.UpdateAction).GetObject().(*autoscalingv1.Scale)
		scaled.Store(sc.Spec.Replicas)
		return true, sc, nil
	})
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{appsv1.SchemeGroupVersion})
	mapper.Add(appsv1.SchemeGroupVersion.WithKind("Deployment"), meta.RESTScopeNamespace)
	reg := prometheus.NewRegistry()
	mon, err := monitor.New(reg, nil)
	must(t, err)
	ctrl, err := New(context.Background(), Options{
		Source: source.NativeSource(factory, kube.AutoscalingV2()), Pods: factory.Core().V1().Pods(),
		Scales: scales, Mapper: mapper,
		Metrics:  metrics.NewRESTClient(resourceMetricsFake(w).MetricsV1beta1(), customMetricsFake(w), externalMetricsFake(w)),
		Recorder: record.NewFakeRecorder(100), Decision: decision.DefaultConfig(), SyncPeriod: time.Hour, Monitor: mon,
	})
	must(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	factory.Start(ctx.Done())
	go func() {
		defer close(done)
		ctrl.Run(ctx, 2)
	}()
	defer func() {
		cancel()
		<-done
		factory.Shutdown()
	}()

	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "web", metav1.GetOptions{})
		must(t, err)
		// The reconcile records its metrics after the status write, and
		// the per-object status series read the informer's copy, which the
		// watch updates after the write: wait for all three, or the checks
		// below race them.
		reconciled := metricValue(t, reg, "tidal_autoscaler_reconciliations_total", map[string]string{"action": monitor.ActionScaleUp, "error": monitor.ErrorNone}) >= 1
		cached := metricValue(t, reg, "tidal_autoscaler_hpa_status_desired_replicas", map[string]string{"namespace": ns, "hpa_name": "web"}) == 5
		if got.Status.DesiredReplicas == 5 && reconciled && cached {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status after 10s: %+v", got.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !ctrl.HasSynced() {
		t.Error("HasSynced() = false while reconciling")
	}
	if n := scaled.Load(); n != 5 {
		t.Errorf("scaled to %d, want 5", n)
	}
	if got := metricValue(t, reg, "tidal_autoscaler_reconciliations_total", map[string]string{"action": monitor.ActionScaleUp, "error": monitor.ErrorNone}); got != 1 {
		t.Errorf("reconciliations_total{scale_up,none} = %v, want 1", got)
	}
	if got := metricValue(t, reg, "tidal_autoscaler_desired_replicas", map[string]string{"namespace": ns, "hpa_name": "web"}); got != 5 {
		t.Errorf("desired_replicas = %v, want 5", got)
	}
	if got := metricValue(t, reg, "tidal_autoscaler_autoscalers", nil); got != 1 {
		t.Errorf("autoscalers = %v, want 1", got)
	}
	// The per-object series, as kube-state-metrics' for HPAs.
	web := map[string]string{"namespace": ns, "hpa_name": "web"}
	for name, want := range map[string]float64{
		"tidal_autoscaler_hpa_status_desired_replicas": 5, "tidal_autoscaler_hpa_status_current_replicas": 3,
		"tidal_autoscaler_hpa_spec_min_replicas": 1, "tidal_autoscaler_hpa_spec_max_replicas": 10,
	} {
		if got := metricValue(t, reg, name, web); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := metricValue(t, reg, "tidal_autoscaler_hpa_scale_events_total", map[string]string{"namespace": ns, "hpa_name": "web",
		"direction": monitor.DirectionUp, "reason": monitor.ScaleReasonMetric}); got != 1 {
		t.Errorf("hpa_scale_events_total{up,metric_above_target} = %v, want 1", got)
	}
	if got := metricValue(t, reg, "tidal_autoscaler_hpa_spec_target_metric", map[string]string{"namespace": ns, "hpa_name": "web",
		"metric_name": "cpu", "metric_target_type": "utilization"}); got != 30 {
		t.Errorf("hpa_spec_target_metric{cpu,utilization} = %v, want 30", got)
	}
	if got := metricValue(t, reg, "tidal_autoscaler_leader", nil); got != 1 {
		t.Errorf("leader = %v while running, want 1", got)
	}
	mfs, err := reg.Gather()
	must(t, err)
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	for _, want := range []string{"tidal_autoscaler_reconciliations_total", "tidal_autoscaler_reconciliation_duration_seconds",
		"tidal_autoscaler_metric_computation_total", "tidal_autoscaler_metric_computation_duration_seconds",
		"tidal_autoscaler_autoscalers", "tidal_autoscaler_desired_replicas",
		// client-go's queue metrics, named as in kube-controller-manager.
		"workqueue_adds_total", "workqueue_depth", "workqueue_queue_duration_seconds", "workqueue_work_duration_seconds"} {
		if !names[want] {
			t.Errorf("metric %s not registered; have %v", want, names)
		}
	}

	// Deleting the HPA drops its series.
	must(t, kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Delete(ctx, "web", metav1.DeleteOptions{}))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		n, err := testutil.GatherAndCount(reg, "tidal_autoscaler_hpa_spec_max_replicas", "tidal_autoscaler_hpa_scale_events_total",
			"tidal_autoscaler_hpa_status_condition", "tidal_autoscaler_hpa_spec_target_metric", "tidal_autoscaler_hpa_status_target_metric")
		must(t, err)
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d tidal_autoscaler_hpa_* series 10s after the HPA was deleted, want 0", n)
		}
	}
}

// TestStopLeavesTheQueue: once the controller's context is done, a worker
// takes no further key from the queue, which would go on handing out
// every key it holds.
func TestStopLeavesTheQueue(t *testing.T) {
	f := newFixture(t, source.ModeNative, world{scale: newScale(3, 3, "app=web"), pods: pods(1000), podMetrics: milliByPod(500)},
		newHPA("web", nil, 10, cpuUtilization(50)))
	c := f.ctrl
	defer c.queue.ShutDown()
	key := ns + "/web"

	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	c.queue.Add(key)
	if c.processNextWorkItem(stopped) {
		t.Error("processNextWorkItem = true with the context done, want false: the worker stops")
	}
	if f.scaleGets != 0 {
		t.Errorf("%d /scale reads with the context done, want 0: nothing reconciled", f.scaleGets)
	}

	c.queue.Add(key)
	if !c.processNextWorkItem(context.Background()) {
		t.Error("processNextWorkItem = false with a live context, want true")
	}
	if f.scaleGets == 0 {
		t.Error("no /scale read with a live context: the key was not reconciled")
	}
}

func TestQueueing(t *testing.T) {
	tests := []struct {
		name string
		// act delivers events to the controller.
		act func(c *Controller)
		// wantNow is how many keys are ready at once (the others wait for
		// the sync period).
		wantNow int
	}{{
		name:    "add queues at once",
		act:     func(c *Controller) { c.add(newHPA("a", nil, 3)) },
		wantNow: 1,
	}, {
		name: "spec change queues at once",
		act: func(c *Controller) {
			old, cur := newHPA("a", nil, 3), newHPA("a", nil, 4)
			cur.Generation = 2
			c.update(old, cur)
		},
		wantNow: 1,
	}, {
		name: "status change waits for the period",
		act:  func(c *Controller) { c.update(newHPA("a", nil, 3), newHPA("a", nil, 3)) },
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, source.ModeNative, world{})
			c := f.ctrl
			defer c.queue.ShutDown()
			tt.act(c)
			if got := c.queue.Len(); got != tt.wantNow {
				t.Errorf("ready keys = %d, want %d", got, tt.wantNow)
			}
		})
	}
}

func TestDeleteForgetsTheObject(t *testing.T) {
	f := newFixture(t, source.ModeNative, world{scale: newScale(3, 3, "app=web"), pods: pods(1000), podMetrics: milliByPod(500)},
		newHPA("web", nil, 10, cpuUtilization(50)))
	_ = f.reconcile("web")
	if f.ctrl.r.history.Len() != 1 {
		t.Fatalf("history entries = %d, want 1", f.ctrl.r.history.Len())
	}
	f.ctrl.delete(newHPA("web", nil, 10))
	if n := f.ctrl.r.history.Len(); n != 0 {
		t.Errorf("history entries after delete = %d, want 0", n)
	}
	if got := f.ctrl.r.selectors.Matching(ns, pods(1000), 0); len(got) != 0 {
		t.Errorf("selectors still match %v", got)
	}
	must(t, f.source.Informer().GetIndexer().Delete(newHPA("web", nil, 10)))
	deleted, err := f.ctrl.r.reconcileKey(context.Background(), ns+"/web", time.Time{})
	if !deleted || err != nil {
		t.Errorf("reconcile of a deleted object = %v, %v; want deleted", deleted, err)
	}
}

// coverRecorder is a metrics client that keeps the cover function the
// controller hands it.
type coverRecorder struct {
	metrics.Client
	cover metrics.CoverFunc
}

func (c *coverRecorder) CoverNamespaceLists(f metrics.CoverFunc) { c.cover = f }

// TestNewCoversNamespaceLists: the controller hands the metrics client a
// cover for its shared namespace lists. On the namespace's beat (most of
// its autoscalers due by the list's end) the list serves them all: the
// whole namespace for one replica, all its autoscalers' pods for a sharded
// one. Off the beat it covers only the autoscalers due by then, and the
// reconcile making the list.
func TestNewCoversNamespaceLists(t *testing.T) {
	beat := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	until := beat.Add(2 * time.Second)
	later := beat.Add(10 * time.Second)
	for _, tc := range []struct {
		name       string
		coverLists bool
		due        map[string]time.Time // a, b, c, d: app=a .. app=d
		caller     string
		want       string // "none": the whole namespace
	}{
		{"on the beat, one replica", false, map[string]time.Time{"a": beat, "b": beat, "c": beat, "d": beat}, "app=a", "none"},
		{"on the beat, sharded", true, map[string]time.Time{"a": beat, "b": beat, "c": beat, "d": beat}, "app=a", "app in (a,b,c,d)"},
		{"half due by the list's end is on the beat", false, map[string]time.Time{"a": beat, "b": beat, "c": later, "d": later}, "app=a", "none"},
		{"off the beat, one replica", false, map[string]time.Time{"a": beat, "b": later, "c": later, "d": later}, "app=e", "app in (a,e)"},
		{"off the beat, sharded", true, map[string]time.Time{"a": later, "b": beat.Add(-time.Minute), "c": later, "d": later}, "app=a", "app in (a,b)"},
		{"off the beat, none other waiting", false, map[string]time.Time{}, "app=a", "app in (a)"},
		{"off the beat, the caller not coverable", false, map[string]time.Time{"a": beat}, "tier=web", "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube := fake.NewClientset()
			factory := informers.NewSharedInformerFactory(kube, 0)
			rec := &coverRecorder{Client: metrics.NewRESTClient(resourceMetricsFake(world{}).MetricsV1beta1(), customMetricsFake(world{}), externalMetricsFake(world{}))}
			ctrl, err := New(context.Background(), Options{
				Source: source.NativeSource(factory, kube.AutoscalingV2()), Pods: factory.Core().V1().Pods(),
				Scales: &scalefake.FakeScaleClient{}, Mapper: meta.NewDefaultRESTMapper(nil), Metrics: rec,
				Recorder: record.NewFakeRecorder(1), Decision: decision.DefaultConfig(), SyncPeriod: time.Hour, CoverLists: tc.coverLists,
			})
			must(t, err)
			if rec.cover == nil {
				t.Fatal("the controller handed the metrics client no cover")
			}
			for _, name := range []string{"a", "b", "c", "d"} {
				ctrl.r.selectors.PutIfAbsent(ns, ns+"/"+name, labels.SelectorFromSet(labels.Set{"app": name}))
				if d, ok := tc.due[name]; ok {
					ctrl.cadence.scheduled(ns+"/"+name, d)
				}
			}
			caller, err := labels.Parse(tc.caller)
			must(t, err)
			got := "none"
			if c, ok := rec.cover(ns, caller, until); ok {
				got = c.String()
			}
			if got != tc.want {
				t.Errorf("cover %q, want %q", got, tc.want)
			}
		})
	}
}
