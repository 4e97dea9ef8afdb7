package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	scalefake "k8s.io/client-go/scale/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	cmapi "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	emapi "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	metricsapi "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"
	cmfake "k8s.io/metrics/pkg/client/custom_metrics/fake"
	emfake "k8s.io/metrics/pkg/client/external_metrics/fake"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/autoscaler/decision"
	"github.com/tidal-autoscaler/tidal/autoscaler/guard"
	"github.com/tidal-autoscaler/tidal/autoscaler/metrics"
	"github.com/tidal-autoscaler/tidal/autoscaler/monitor"
	"github.com/tidal-autoscaler/tidal/autoscaler/source"
)

const ns = "default"

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// world is what the cluster and the metrics APIs hold in a test.
type world struct {
	// scale is the target's /scale; nil: the target has none (NotFound).
	scale *autoscalingv1.Scale
	pods  []*corev1.Pod
	// podMetrics are the metrics.k8s.io PodMetrics (cpu, milli).
	podMetrics map[string]int64
	// customPods are a pods metric's values per pod, milli.
	customPods map[string]int64
	// objectValue is an object metric's value, milli.
	objectValue *int64
	// external are the series of an external metric, milli.
	external []int64
	// history is the persisted history the autoscalers start with (see
	// Object.PersistedHistory); "" for none.
	history string
	// handover is Options.Handover (leader election's); nil: none.
	handover Handover
	// tidal is what tidal adds to the spec: spec fields of a
	// HorizontalAutoscaler, annotations of an HPA (tidalAnnotations).
	tidal v1alpha1.TidalSpec
	// metricFailures is the persisted count of all-failed syncs the
	// autoscalers start with.
	metricFailures int32
	// guard turns on the other-writer guard: in crd mode otherHPAs are the
	// cluster's autoscaling/v2 HPAs (guard.HPAs over a synced informer);
	// in native mode fixture.writers is the StatusWriters the test feeds.
	guard     bool
	otherHPAs []*autoscalingv2.HorizontalPodAutoscaler
}

// tidalAnnotations are native mode's annotations for t.
func tidalAnnotations(t *testing.T, ts v1alpha1.TidalSpec) map[string]string {
	a := map[string]string{}
	if ts.DryRun {
		a[source.DryRunAnnotation] = "true"
	}
	if ts.Fallback != nil {
		raw, err := json.Marshal(ts.Fallback)
		must(t, err)
		a[source.FallbackAnnotation] = string(raw)
	}
	if ts.ScaleDownPodSelection != nil {
		raw, err := json.Marshal(ts.ScaleDownPodSelection)
		must(t, err)
		a[source.ScaleDownPodSelectionAnnotation] = string(raw)
	}
	if ts.HoldScaleDownDuringRollout {
		a[source.HoldScaleDownDuringRolloutAnnotation] = "true"
	}
	return a
}

// staticHandover says the previous leader was last alive at a fixed time.
type staticHandover time.Time

func (h staticHandover) PredecessorAlive() time.Time { return time.Time(h) }

// fixture is a reconciler wired to fake clients, in one mode.
type fixture struct {
	t        *testing.T
	mode     source.Mode
	kube     *fake.Clientset
	dyn      *dynamicfake.FakeDynamicClient
	scales   *scalefake.FakeScaleClient
	recorder *record.FakeRecorder
	ctrl     *Controller
	source   source.Source
	// scaleUpdates are the replica counts written to /scale.
	scaleUpdates []int32
	scaleGets    int
	// reg holds the controller's self-metrics.
	reg *prometheus.Registry
	// writers is the native mode's guard (world.guard).
	writers *guard.StatusWriters
	// pods is the pod informer's indexer, which tests change as a
	// watch would.
	pods cache.Indexer
}

func newFixture(t *testing.T, mode source.Mode, w world, hpas ...*autoscalingv2.HorizontalPodAutoscaler) *fixture {
	t.Helper()
	f := &fixture{t: t, mode: mode, recorder: record.NewFakeRecorder(100)}

	var kubeObjs []runtime.Object
	for _, p := range w.pods {
		kubeObjs = append(kubeObjs, p)
	}
	if w.history != "" || w.metricFailures != 0 || !reflect.DeepEqual(w.tidal, v1alpha1.TidalSpec{}) {
		seeded := make([]*autoscalingv2.HorizontalPodAutoscaler, 0, len(hpas))
		for _, h := range hpas {
			h = h.DeepCopy()
			if mode == source.ModeNative {
				if w.history != "" {
					source.ObjectOfHPA(h).SetPersistedHistory(w.history)
				}
				source.ObjectOfHPA(h).SetMetricFailures(w.metricFailures)
				for k, v := range tidalAnnotations(t, w.tidal) {
					if h.Annotations == nil {
						h.Annotations = map[string]string{}
					}
					h.Annotations[k] = v
				}
			}
			seeded = append(seeded, h)
		}
		hpas = seeded
	}
	if mode == source.ModeNative {
		for _, h := range hpas {
			kubeObjs = append(kubeObjs, h.DeepCopy())
		}
	}
	if mode == source.ModeCRD {
		for _, h := range w.otherHPAs {
			kubeObjs = append(kubeObjs, h.DeepCopy())
		}
	}
	f.kube = fake.NewClientset(kubeObjs...)
	factory := informers.NewSharedInformerFactory(f.kube, 15*time.Second)
	var otherHPAs *guard.HPAs
	switch {
	case w.guard && mode == source.ModeCRD:
		inf := factory.Autoscaling().V2().HorizontalPodAutoscalers().Informer()
		var err error
		otherHPAs, err = guard.NewHPAs(inf)
		must(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		go inf.Run(ctx.Done())
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			t.Fatal("the HPA informer did not sync")
		}
	case w.guard:
		f.writers = guard.NewStatusWriters(source.FieldManager, time.Minute, testingclock.NewFakePassiveClock(now))
	}
	f.pods = factory.Core().V1().Pods().Informer().GetIndexer()
	for _, p := range w.pods {
		must(t, f.pods.Add(p))
	}

	switch mode {
	case source.ModeNative:
		f.source = source.NativeSource(factory, f.kube.AutoscalingV2())
		for _, h := range hpas {
			must(t, f.source.Informer().GetIndexer().Add(h.DeepCopy()))
		}
	case source.ModeCRD:
		scheme := runtime.NewScheme()
		must(t, v1alpha1.AddToScheme(scheme))
		var objs []runtime.Object
		for _, h := range hpas {
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(w.toHA(h))
			must(t, err)
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
		f.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme,
			map[schema.GroupVersionResource]string{v1alpha1.GroupVersionResource: "HorizontalAutoscalerList"}, objs...)
		// The informer is never run: the tests put objects in its cache.
		inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &v1alpha1.HorizontalAutoscaler{}, 0,
			cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		f.source = source.CRDSourceWith(inf, dynamicStatusWriter{f.dyn})
		for _, h := range hpas {
			must(t, f.source.Informer().GetIndexer().Add(w.toHA(h)))
		}
	}

	f.scales = &scalefake.FakeScaleClient{}
	f.scales.AddReactor("get", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
		f.scaleGets++
		if w.scale == nil {
			return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web")
		}
		return true, w.scale.DeepCopy(), nil
	})
	f.scales.AddReactor("update", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sc := a.(k8stesting.UpdateAction).GetObject().(*autoscalingv1.Scale)
		f.scaleUpdates = append(f.scaleUpdates, sc.Spec.Replicas)
		return true, sc, nil
	})
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{appsv1.SchemeGroupVersion})
	mapper.Add(appsv1.SchemeGroupVersion.WithKind("Deployment"), meta.RESTScopeNamespace)

	f.reg = prometheus.NewRegistry()
	mon, err := monitor.New(f.reg, nil)
	must(t, err)
	f.ctrl, err = New(context.Background(), Options{
		Source: f.source, Pods: factory.Core().V1().Pods(), Scales: f.scales, Mapper: mapper,
		Metrics:  metrics.NewRESTClient(resourceMetricsFake(w).MetricsV1beta1(), customMetricsFake(w), externalMetricsFake(w)),
		Recorder: f.recorder, Decision: decision.DefaultConfig(), SyncPeriod: 15 * time.Second,
		Clock: testingclock.NewFakePassiveClock(now), Handover: w.handover, Monitor: mon,
		PodClient: f.kube.CoreV1(), OtherHPAs: otherHPAs, StatusWriters: f.writers,
	})
	must(t, err)
	f.ctrl.takeOver(klog.Background())
	// The informer would deliver the adds.
	for _, h := range hpas {
		f.ctrl.add(h)
	}
	return f
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// dynamicStatusWriter writes status through the fake dynamic client, whose
// actions the tests count.
type dynamicStatusWriter struct {
	dyn *dynamicfake.FakeDynamicClient
}

func (w dynamicStatusWriter) UpdateStatus(ctx context.Context, ha *v1alpha1.HorizontalAutoscaler) error {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ha)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(v1alpha1.SchemeGroupVersion.WithKind(v1alpha1.Kind))
	_, err = w.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ha.Namespace).UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: source.FieldManager})
	return err
}

// toHA converts h to a HorizontalAutoscaler with the persisted history
// (status.tidal.history; "" for none).
func toHA(h *autoscalingv2.HorizontalPodAutoscaler, history string) *v1alpha1.HorizontalAutoscaler {
	ha := &v1alpha1.HorizontalAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: *h.ObjectMeta.DeepCopy(),
		Spec:       v1alpha1.HorizontalAutoscalerSpec{HorizontalPodAutoscalerSpec: *h.Spec.DeepCopy()},
		Status:     v1alpha1.HorizontalAutoscalerStatus{HorizontalPodAutoscalerStatus: *h.Status.DeepCopy()},
	}
	if history != "" {
		source.ObjectOfHA(ha).SetPersistedHistory(history)
	}
	return ha
}

// toHA is toHA(h, w.history) with w's tidal spec and failure count.
func (w world) toHA(h *autoscalingv2.HorizontalPodAutoscaler) *v1alpha1.HorizontalAutoscaler {
	ha := toHA(h, w.history)
	ha.Spec.TidalSpec = *w.tidal.DeepCopy()
	source.ObjectOfHA(ha).SetMetricFailures(w.metricFailures)
	return ha
}

func resourceMetricsFake(w world) *metricsfake.Clientset {
	c := &metricsfake.Clientset{}
	c.AddReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		list := &metricsapi.PodMetricsList{}
		for name, milli := range w.podMetrics {
			list.Items = append(list.Items, metricsapi.PodMetrics{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "web"}},
				Timestamp:  metav1.NewTime(now.Add(-10 * time.Second)), Window: metav1.Duration{Duration: 30 * time.Second},
				Containers: []metricsapi.ContainerMetrics{{Name: "app", Usage: corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(milli, resource.DecimalSI)}}},
			})
		}
		return true, list, nil
	})
	return c
}

func customMetricsFake(w world) *cmfake.FakeCustomMetricsClient {
	c := &cmfake.FakeCustomMetricsClient{}
	c.AddReactor("get", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		get := a.(cmfake.GetForAction)
		list := &cmapi.MetricValueList{}
		if get.GetName() == "*" { // pods metric
			if len(w.customPods) == 0 {
				return true, nil, fmt.Errorf("the server could not find the metric %s for pods", get.GetMetricName())
			}
			for pod, milli := range w.customPods {
				list.Items = append(list.Items, cmapi.MetricValue{
					DescribedObject: corev1.ObjectReference{Kind: "Pod", Name: pod, Namespace: ns},
					Metric:          cmapi.MetricIdentifier{Name: get.GetMetricName()},
					Timestamp:       metav1.NewTime(now), Value: *resource.NewMilliQuantity(milli, resource.DecimalSI),
				})
			}
			return true, list, nil
		}
		if w.objectValue == nil {
			return true, nil, fmt.Errorf("the server could not find the metric %s", get.GetMetricName())
		}
		list.Items = append(list.Items, cmapi.MetricValue{Timestamp: metav1.NewTime(now), Value: *resource.NewMilliQuantity(*w.objectValue, resource.DecimalSI)})
		return true, list, nil
	})
	return c
}

func externalMetricsFake(w world) *emfake.FakeExternalMetricsClient {
	c := &emfake.FakeExternalMetricsClient{}
	c.AddReactor("list", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		list := &emapi.ExternalMetricValueList{}
		for _, v := range w.external {
			list.Items = append(list.Items, emapi.ExternalMetricValue{Timestamp: metav1.NewTime(now), Value: *resource.NewMilliQuantity(v, resource.DecimalSI)})
		}
		return true, list, nil
	})
	return c
}

// reconcile runs one reconcile of the object default/name.
func (f *fixture) reconcile(name string) error {
	f.t.Helper()
	_, err := f.ctrl.r.reconcileKey(context.Background(), ns+"/"+name, time.Time{})
	return err
}

// stored returns the object as the API server holds it.
func (f *fixture) stored(name string) source.Object {
	f.t.Helper()
	switch f.mode {
	case source.ModeNative:
		h, err := f.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(context.Background(), name, metav1.GetOptions{})
		must(f.t, err)
		return source.ObjectOfHPA(h)
	default:
		u, err := f.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
		must(f.t, err)
		ha := &v1alpha1.HorizontalAutoscaler{}
		must(f.t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ha))
		return source.ObjectOfHA(ha)
	}
}

// sync delivers the stored object to the informer cache, as a watch would.
func (f *fixture) sync(name string) {
	f.t.Helper()
	must(f.t, f.source.Informer().GetIndexer().Update(f.stored(name).Runtime()))
}

// statusUpdates counts the writes of the status subresource.
func (f *fixture) statusUpdates() int {
	var actions []k8stesting.Action
	if f.mode == source.ModeNative {
		actions = f.kube.Actions()
	} else {
		actions = f.dyn.Actions()
	}
	n := 0
	for _, a := range actions {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" {
			n++
		}
	}
	return n
}

// events drains the recorded events ("Type Reason Message").
func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func condition(st *autoscalingv2.HorizontalPodAutoscalerStatus, t autoscalingv2.HorizontalPodAutoscalerConditionType) *autoscalingv2.HorizontalPodAutoscalerCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

func hasEvent(events []string, prefix string) bool {
	for _, e := range events {
		if strings.HasPrefix(e, prefix) {
			return true
		}
	}
	return false
}

// Builders.

func newHPA(name string, minR *int32, maxR int32, metrics ...autoscalingv2.MetricSpec) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: k8stypes.UID("uid-" + name), Generation: 1},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    minR, MaxReplicas: maxR, Metrics: metrics,
		},
	}
}

// withScaleUpTolerance sets the object's scale-up tolerance (a quantity).
func withScaleUpTolerance(hpa *autoscalingv2.HorizontalPodAutoscaler, tolerance string) *autoscalingv2.HorizontalPodAutoscaler {
	q := resource.MustParse(tolerance)
	hpa.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: &autoscalingv2.HPAScalingRules{Tolerance: &q}}
	return hpa
}

func newScale(spec, status int32, selector string) *autoscalingv1.Scale {
	return &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec:       autoscalingv1.ScaleSpec{Replicas: spec},
		Status:     autoscalingv1.ScaleStatus{Replicas: status, Selector: selector},
	}
}

// newPod is a Running pod, Ready long ago, requesting cpu (milli).
func newPod(name string, cpuRequest int64) *corev1.Pod {
	start := metav1.NewTime(now.Add(-10 * time.Minute))
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(cpuRequest, resource.DecimalSI)},
		}}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, StartTime: &start,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-9 * time.Minute))}},
		},
	}
}

func pods(requests ...int64) []*corev1.Pod {
	var out []*corev1.Pod
	for i, r := range requests {
		out = append(out, newPod(fmt.Sprintf("web-%d", i), r))
	}
	return out
}

func milliByPod(values ...int64) map[string]int64 {
	m := map[string]int64{}
	for i, v := range values {
		m[fmt.Sprintf("web-%d", i)] = v
	}
	return m
}

func cpuUtilization(target int32) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(target)},
	}}
}

func podsMetric(name, target string) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: name},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse(target))},
	}}
}

func objectMetric(name, target string) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{
		DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "networking.k8s.io/v1", Kind: "Ingress", Name: "web"},
		Metric:          autoscalingv2.MetricIdentifier{Name: name},
		Target:          autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: ptr.To(resource.MustParse(target))},
	}}
}

func externalMetric(name, target string) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: name, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"queue": "jobs"}}},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: ptr.To(resource.MustParse(target))},
	}}
}
