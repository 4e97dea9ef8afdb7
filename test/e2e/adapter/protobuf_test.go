package adapter

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/metrics/pkg/client/custom_metrics"

	"github.com/tidal-autoscaler/tidal/test/harness"
)

const protobuf = "application/vnd.kubernetes.protobuf"

// seenTypes records the Content-Type of the answers to a client's
// requests whose path has a given part.
type seenTypes struct {
	part  string
	mu    sync.Mutex
	types []string
}

func (s *seenTypes) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Compact(slices.Sorted(slices.Values(s.types)))
}

// asControllerManager is the HPA's identity configured as
// kube-controller-manager configures its clients: ContentType ct
// (--kube-api-content-type, protobuf by default), so every request
// accepts "ct, */*". It records what the answers were.
func asControllerManager(t *testing.T, ct, part string) (*rest.Config, *seenTypes) {
	t.Helper()
	cfg, err := need(t).RestConfigFor(harness.HPAServiceAccount)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ContentType, cfg.AcceptContentTypes = ct, ""
	seen := &seenTypes{part: part}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return harness.RoundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(r)
			if err == nil && strings.Contains(r.URL.Path, part) {
				seen.mu.Lock()
				seen.types = append(seen.types, resp.Header.Get("Content-Type"))
				seen.mu.Unlock()
			}
			return resp, err
		})
	})
	return cfg, seen
}

// customMetricsProtobuf reads pods/* with the client
// kube-controller-manager's HPA controller uses (k8s.io/metrics
// custom_metrics), configured as kube-controller-manager configures it:
// protobuf. The answers must be protobuf and agree with Prometheus. (A
// part of TestCustomMetrics: it needs the steady rates that
// TestPrometheusOutage disturbs.)
func customMetricsProtobuf(t *testing.T) {
	cfg, seen := asControllerManager(t, protobuf, "/pods/*/")
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	cm := custom_metrics.NewForConfig(cfg, mapper, custom_metrics.NewAvailableAPIsGetter(dc))
	sel := labels.SelectorFromSet(labels.Set{"app": "web"})
	got, err := cm.NamespacedMetrics(ns).GetForObjects(schema.GroupKind{Kind: "Pod"}, sel, "http_requests_per_second", labels.Everything())
	if err != nil {
		t.Fatalf("pods/* as the HPA: %v", err)
	}
	if len(got.Items) != len(env.pods) {
		t.Fatalf("%d items, want %d", len(got.Items), len(env.pods))
	}
	for _, v := range got.Items {
		var it item
		it.DescribedObject.Name = v.DescribedObject.Name
		it.Metric.Name = v.Metric.Name
		it.Timestamp = v.Timestamp.Time
		it.Value = v.Value.String()
		sameAsPrometheus(t, it, rateQuery(`namespace="e2e",pod="`+v.DescribedObject.Name+`"`, "pod"))
	}
	if types := seen.all(); !slices.Equal(types, []string{protobuf}) {
		t.Errorf("pods/* answers were %v, want %s", types, protobuf)
	}
}
