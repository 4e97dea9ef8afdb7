package delegate

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	"k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"
)

// ownCustom is Tidal's side: pods/http_requests.
type ownCustom struct{}

func (ownCustom) GetMetricByName(_ context.Context, name types.NamespacedName, info cmprovider.CustomMetricInfo, _ labels.Selector) (*custom_metrics.MetricValue, error) {
	return &custom_metrics.MetricValue{DescribedObject: custom_metrics.ObjectReference{Name: name.Name}, Metric: custom_metrics.MetricIdentifier{Name: info.Metric}, Value: resource.MustParse("1")}, nil
}

func (o ownCustom) GetMetricBySelector(ctx context.Context, ns string, _ labels.Selector, info cmprovider.CustomMetricInfo, ms labels.Selector) (*custom_metrics.MetricValueList, error) {
	v, _ := o.GetMetricByName(ctx, types.NamespacedName{Namespace: ns, Name: "own"}, info, ms)
	return &custom_metrics.MetricValueList{Items: []custom_metrics.MetricValue{*v}}, nil
}

func (ownCustom) ListAllMetrics() []cmprovider.CustomMetricInfo {
	return []cmprovider.CustomMetricInfo{{GroupResource: schema.GroupResource{Resource: "pods"}, Namespaced: true, Metric: "http_requests"}}
}

// customDelegate lists pods/rps and nodes/temp and answers any v1beta2
// request for rps or temp with one item per request it records; other
// metrics are 404.
type customDelegate struct {
	mu   sync.Mutex
	seen []string
}

func (f *customDelegate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path == "/apis/custom.metrics.k8s.io/v1beta1" {
		_ = json.NewEncoder(w).Encode(metav1.APIResourceList{
			TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: "custom.metrics.k8s.io/v1beta1",
			APIResources: []metav1.APIResource{{Name: "pods/rps", Namespaced: true}, {Name: "nodes/temp"}, {Name: "pods/http_requests", Namespaced: true}},
		})
		return
	}
	f.mu.Lock()
	f.seen = append(f.seen, r.URL.Path+"?"+r.URL.RawQuery)
	f.mu.Unlock()
	if !strings.HasSuffix(r.URL.Path, "/rps") && !strings.HasSuffix(r.URL.Path, "/temp") {
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: "Failure", Code: 404, Reason: metav1.StatusReasonNotFound, Message: "no such metric"})
		return
	}
	_ = json.NewEncoder(w).Encode(v1beta2.MetricValueList{
		TypeMeta: metav1.TypeMeta{Kind: "MetricValueList", APIVersion: "custom.metrics.k8s.io/v1beta2"},
		Items: []v1beta2.MetricValue{{
			DescribedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "team-a", Name: "web-1", APIVersion: "v1"},
			Metric:          v1beta2.MetricIdentifier{Name: "rps"},
			Value:           resource.MustParse("250m"),
		}},
	})
}

func (f *customDelegate) last() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.seen) == 0 {
		return ""
	}
	return f.seen[len(f.seen)-1]
}

func TestCustomProvider(t *testing.T) {
	fake := &customDelegate{}
	srv := httptest.NewTLSServer(fake)
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := New(Options{Group: CustomGroup, URL: srv.URL, CAFile: ca, Credentials: &rest.Config{Host: "https://kube.invalid", BearerToken: "t"}})
	if err != nil {
		t.Fatal(err)
	}
	p := CustomProvider{Own: ownCustom{}, Delegate: d}
	d.Refresh(p.OwnNames())
	pods := cmprovider.CustomMetricInfo{GroupResource: schema.GroupResource{Resource: "pods"}, Namespaced: true}
	nodes := cmprovider.CustomMetricInfo{GroupResource: schema.GroupResource{Resource: "nodes"}}
	ns := cmprovider.CustomMetricInfo{GroupResource: schema.GroupResource{Resource: "namespaces"}}
	with := func(i cmprovider.CustomMetricInfo, m string) cmprovider.CustomMetricInfo { i.Metric = m; return i }
	app := labels.SelectorFromSet(labels.Set{"app": "web"})
	code := labels.SelectorFromSet(labels.Set{"code": "200"})

	tests := []struct {
		name     string
		call     func() (string, error) // the first value
		forwards string
	}{
		{"Tidal's metric is Tidal's", func() (string, error) {
			l, err := p.GetMetricBySelector(context.Background(), "team-a", app, with(pods, "http_requests"), nil)
			return first(l, err)
		}, ""},
		{"pods by selector, forwarded with both selectors", func() (string, error) {
			l, err := p.GetMetricBySelector(context.Background(), "team-a", app, with(pods, "rps"), code)
			return first(l, err)
		}, "/apis/custom.metrics.k8s.io/v1beta2/namespaces/team-a/pods/*/rps?labelSelector=app%3Dweb&metricLabelSelector=code%3D200"},
		{"one pod by name", func() (string, error) {
			v, err := p.GetMetricByName(context.Background(), types.NamespacedName{Namespace: "team-a", Name: "web-1"}, with(pods, "rps"), nil)
			if err != nil {
				return "", err
			}
			return v.Value.String(), nil
		}, "/apis/custom.metrics.k8s.io/v1beta2/namespaces/team-a/pods/web-1/rps?"},
		{"a cluster-scoped object at the root", func() (string, error) {
			v, err := p.GetMetricByName(context.Background(), types.NamespacedName{Name: "n1"}, with(nodes, "temp"), nil)
			if err != nil {
				return "", err
			}
			return v.Value.String(), nil
		}, "/apis/custom.metrics.k8s.io/v1beta2/nodes/n1/temp?"},
		{"a namespace's own metric", func() (string, error) {
			_, err := p.GetMetricByName(context.Background(), types.NamespacedName{Name: "team-a"}, with(ns, "quota"), nil)
			return "", err
		}, "/apis/custom.metrics.k8s.io/v1beta2/namespaces/team-a/metrics/quota?"},
	}
	wants := []string{"1", "250m", "250m", "250m", string(metav1.StatusReasonNotFound)}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := fake.last()
			got, err := tt.call()
			if err != nil {
				got = string(apierrors.ReasonForError(err))
			}
			if got != wants[i] {
				t.Errorf("got %q (%v), want %q", got, err, wants[i])
			}
			after := fake.last()
			switch {
			case tt.forwards == "" && after != before:
				t.Errorf("forwarded %s, want nothing", after)
			case tt.forwards != "" && after != tt.forwards:
				t.Errorf("forwarded %q, want %q", after, tt.forwards)
			}
		})
	}
	t.Run("discovery lists both sides, a collision once", func(t *testing.T) {
		var got []string
		for _, in := range p.ListAllMetrics() {
			got = append(got, customName(in.GroupResource, in.Metric))
		}
		if strings.Join(got, ",") != "pods/http_requests,pods/rps,nodes/temp" {
			t.Errorf("metrics %v", got)
		}
		if c := d.Collisions(); len(c) != 1 || c[0] != "pods/http_requests" {
			t.Errorf("collisions %v, want [pods/http_requests]", c)
		}
	})
	srv.Close()
	t.Run("a delegate that does not answer is 503", func(t *testing.T) {
		_, err := p.GetMetricBySelector(context.Background(), "team-a", app, with(pods, "rps"), nil)
		if !apierrors.IsServiceUnavailable(err) {
			t.Errorf("error %v, want ServiceUnavailable", err)
		}
	})
}

func first(l *custom_metrics.MetricValueList, err error) (string, error) {
	if err != nil {
		return "", err
	}
	if len(l.Items) == 0 {
		return "", nil
	}
	return l.Items[0].Value.String(), nil
}
