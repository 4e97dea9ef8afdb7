package metricsserver_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	resourceclient "k8s.io/metrics/pkg/client/clientset/versioned"
	customclient "k8s.io/metrics/pkg/client/custom_metrics"
	externalclient "k8s.io/metrics/pkg/client/external_metrics"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/test/harness"
	"github.com/tidal-autoscaler/tidal/test/metricsserver"
)

// TestServesThroughAggregator starts the server behind a real apiserver and
// reads every kind of value through the aggregator as the upstream HPA
// controller's identity, with the clients the HPA controller uses.
func TestServesThroughAggregator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	h := harness.StartT(t, harness.Options{})
	srvCtx, stop := context.WithCancel(ctx)
	s, err := metricsserver.Start(srvCtx, h, metricsserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop()
		if err := s.Wait(); err != nil {
			t.Errorf("server stopped with %v", err)
		}
	})

	const ns = "ms"
	if err := h.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	// No controller manager runs: create the service account pods need.
	if _, err := h.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// No scheduler runs: the pods stay Pending, which is enough to serve them.
	for i := range 3 {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Namespace: ns, Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "app", Image: "x"}, {Name: "sidecar", Image: "x"}},
				// A plain init container has finished: not served. One that
				// keeps running (a sidecar) is, as the kubelet reports it.
				InitContainers: []corev1.Container{{Name: "setup", Image: "x"}, {Name: "proxy", Image: "x", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}},
			},
		}
		if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1100 * time.Millisecond) // distinct creation seconds give a known rank
	}
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	s.SetPodUsage(ns, web, "app", corev1.ResourceCPU, metricsserver.Q("100m"), metricsserver.Q("200m"), metricsserver.Missing)
	s.SetPodUsage(ns, web, "sidecar", corev1.ResourceCPU, metricsserver.Q("5m"))
	s.SetPodUsage(ns, web, "proxy", corev1.ResourceCPU, metricsserver.Q("7m"))
	s.SetPodUsage(ns, web, "setup", corev1.ResourceCPU, metricsserver.Q("9m"))
	s.SetPodMetric(ns, web, "qps", metricsserver.Q("10"), metricsserver.Q("20"))
	s.SetObjectMetric(ns, "services", "front", "rps", metricsserver.Q("1500m"))
	s.SetExternalMetric(ns, "queue", []metricsserver.ExternalSeries{
		{Labels: map[string]string{"q": "a"}, Value: *metricsserver.Q("3")},
		{Labels: map[string]string{"q": "b"}, Value: *metricsserver.Q("4")},
	})

	cfg, err := h.RestConfigFor(harness.HPAServiceAccount)
	if err != nil {
		t.Fatal(err)
	}
	// The pod informer of the server may lag the creations slightly.
	err = harness.WaitReady(ctx, nil, "pod metrics", 30*time.Second, func(ctx context.Context) error {
		rc, err := resourceclient.NewForConfig(cfg)
		if err != nil {
			return err
		}
		list, err := rc.MetricsV1beta1().PodMetricses(ns).List(ctx, metav1.ListOptions{LabelSelector: web.String()})
		if err != nil {
			return err
		}
		got := map[string]string{}
		for _, m := range list.Items {
			for _, c := range m.Containers {
				got[m.Name+"/"+c.Name] = c.Usage.Cpu().String()
			}
		}
		want := map[string]string{"web-0/app": "100m", "web-0/sidecar": "5m", "web-0/proxy": "7m", "web-1/app": "200m", "web-1/sidecar": "5m", "web-1/proxy": "7m", "web-2/sidecar": "5m", "web-2/proxy": "7m"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("pod metrics %v, want %v", got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memoryDiscovery(disco))
	custom := customclient.NewForConfig(cfg, mapper, customclient.NewAvailableAPIsGetter(disco))
	pods, err := custom.NamespacedMetrics(ns).GetForObjects(schema.GroupKind{Kind: "Pod"}, web, "qps", labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	gotPods := map[string]string{}
	for _, m := range pods.Items {
		gotPods[m.DescribedObject.Name] = m.Value.String()
	}
	if want := map[string]string{"web-0": "10", "web-1": "20", "web-2": "20"}; fmt.Sprint(gotPods) != fmt.Sprint(want) {
		t.Errorf("pods metric %v, want %v", gotPods, want)
	}
	obj, err := custom.NamespacedMetrics(ns).GetForObject(schema.GroupKind{Kind: "Service"}, "front", "rps", labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	if obj.Value.MilliValue() != 1500 {
		t.Errorf("object metric %s, want 1500m", obj.Value.String())
	}
	if _, err := custom.NamespacedMetrics(ns).GetForObject(schema.GroupKind{Kind: "Service"}, "other", "rps", labels.Everything()); err == nil {
		t.Error("an unset object metric was served")
	}

	ext, err := externalclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sel := labels.SelectorFromSet(labels.Set{"q": "b"})
	series, err := ext.NamespacedMetrics(ns).List("queue", sel)
	if err != nil {
		t.Fatal(err)
	}
	if len(series.Items) != 1 || series.Items[0].Value.Value() != 4 {
		t.Errorf("external metric for %s: %+v", sel, series.Items)
	}
}

func memoryDiscovery(d discovery.DiscoveryInterface) discovery.CachedDiscoveryInterface {
	return memory.NewMemCacheClient(d)
}
