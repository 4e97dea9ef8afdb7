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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/metrics/pkg/apis/external_metrics"
	"k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"
)

// own is Tidal's side: queue_messages and shared.
type own struct{}

func (own) GetExternalMetric(_ context.Context, _ string, _ labels.Selector, info cmprovider.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
	return &external_metrics.ExternalMetricValueList{Items: []external_metrics.ExternalMetricValue{{MetricName: info.Metric, Value: resource.MustParse("1")}}}, nil
}

func (own) ListAllExternalMetrics() []cmprovider.ExternalMetricInfo {
	return []cmprovider.ExternalMetricInfo{{Metric: "queue_messages"}, {Metric: "shared"}}
}

func (own) ListAPIResources() []metav1.APIResource {
	return []metav1.APIResource{{Name: "queue_messages", Namespaced: true}, {Name: "shared", Namespaced: true}}
}

// fakeDelegate is a delegate server: it lists s0-prometheus-queue and
// shared, answers the first with 7 per request it records, and 404 for
// anything else.
type fakeDelegate struct {
	mu   sync.Mutex
	seen []string // path?query Authorization
}

func (f *fakeDelegate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.seen = append(f.seen, r.URL.Path+"?"+r.URL.RawQuery+" "+r.Header.Get("Authorization"))
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	base := "/apis/external.metrics.k8s.io/v1beta1"
	switch {
	case r.URL.Path == base:
		_ = json.NewEncoder(w).Encode(metav1.APIResourceList{
			TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: "external.metrics.k8s.io/v1beta1",
			APIResources: []metav1.APIResource{{Name: "s0-prometheus-queue", Namespaced: true, Kind: "ExternalMetricValueList", Verbs: []string{"get"}}, {Name: "shared", Namespaced: true}},
		})
	case strings.HasSuffix(r.URL.Path, "/s0-prometheus-queue"):
		_ = json.NewEncoder(w).Encode(v1beta1.ExternalMetricValueList{
			TypeMeta: metav1.TypeMeta{Kind: "ExternalMetricValueList", APIVersion: "external.metrics.k8s.io/v1beta1"},
			Items:    []v1beta1.ExternalMetricValue{{MetricName: "s0-prometheus-queue", MetricLabels: map[string]string{"q": "a"}, Value: resource.MustParse("7")}},
		})
	default:
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: "Failure", Code: 404, Reason: metav1.StatusReasonNotFound, Message: "no such metric"})
	}
}

func (f *fakeDelegate) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.seen...)
}

func start(t *testing.T) (*httptest.Server, *fakeDelegate, Provider) {
	t.Helper()
	fake := &fakeDelegate{}
	srv := httptest.NewTLSServer(fake)
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := New(Options{URL: srv.URL, CAFile: ca, Credentials: &rest.Config{Host: "https://kube.invalid", BearerToken: "tidal-token"}, Timeout: 0})
	if err != nil {
		t.Fatal(err)
	}
	p := Provider{Own: own{}, OwnResources: own{}, Delegate: d}
	d.Refresh(p.OwnNames())
	return srv, fake, p
}

func TestProvider(t *testing.T) {
	srv, fake, p := start(t)
	sel := labels.SelectorFromSet(labels.Set{"scaledobject.keda.sh/name": "x"})
	tests := []struct {
		name     string
		metric   string
		want     string // the first item's value, or the error's reason
		forwards string // the request the delegate got, "" for none
	}{
		{"Tidal's metric is Tidal's", "queue_messages", "1", ""},
		{"a collision is Tidal's", "shared", "1", ""},
		{"another is forwarded unchanged, as the adapter", "s0-prometheus-queue", "7",
			"/apis/external.metrics.k8s.io/v1beta1/namespaces/team-a/s0-prometheus-queue?labelSelector=scaledobject.keda.sh%2Fname%3Dx Bearer tidal-token"},
		{"the delegate's 404 is passed on", "nope", string(metav1.StatusReasonNotFound),
			"/apis/external.metrics.k8s.io/v1beta1/namespaces/team-a/nope?labelSelector=scaledobject.keda.sh%2Fname%3Dx Bearer tidal-token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(fake.requests())
			l, err := p.GetExternalMetric(context.Background(), "team-a", sel, cmprovider.ExternalMetricInfo{Metric: tt.metric})
			got := ""
			switch {
			case err != nil:
				got = string(apierrors.ReasonForError(err))
			case len(l.Items) > 0:
				got = l.Items[0].Value.String()
			}
			if got != tt.want {
				t.Errorf("GetExternalMetric(%s) = %q (%v), want %q", tt.metric, got, err, tt.want)
			}
			reqs := fake.requests()[before:]
			switch {
			case tt.forwards == "" && len(reqs) > 0:
				t.Errorf("forwarded %v, want nothing", reqs)
			case tt.forwards != "" && (len(reqs) != 1 || reqs[0] != tt.forwards):
				t.Errorf("forwarded %v, want [%s]", reqs, tt.forwards)
			}
		})
	}

	t.Run("discovery lists both sides, a collision once", func(t *testing.T) {
		var got []string
		for _, r := range p.ListAPIResources() {
			got = append(got, r.Name)
		}
		if strings.Join(got, ",") != "queue_messages,shared,s0-prometheus-queue" {
			t.Errorf("discovery %v", got)
		}
		if c := Collisions(p.OwnNames(), []string{"s0-prometheus-queue", "shared"}); strings.Join(c, ",") != "shared" {
			t.Errorf("collisions %v, want [shared]", c)
		}
	})

	srv.Close()
	t.Run("a delegate that does not answer is 503 for its metrics only", func(t *testing.T) {
		_, err := p.GetExternalMetric(context.Background(), "team-a", sel, cmprovider.ExternalMetricInfo{Metric: "s0-prometheus-queue"})
		if !apierrors.IsServiceUnavailable(err) || !strings.Contains(err.Error(), srv.URL) {
			t.Errorf("error %v, want ServiceUnavailable naming %s", err, srv.URL)
		}
		if _, err := p.GetExternalMetric(context.Background(), "team-a", sel, cmprovider.ExternalMetricInfo{Metric: "queue_messages"}); err != nil {
			t.Errorf("Tidal's own metric: %v", err)
		}
	})
	t.Run("its last list stays in discovery", func(t *testing.T) {
		p.Delegate.Refresh(p.OwnNames())
		if n := len(p.ListAPIResources()); n != 3 {
			t.Errorf("%d resources listed, want 3", n)
		}
	})
}

func TestNewRefusesBadURL(t *testing.T) {
	for _, u := range []string{"http://keda.svc:443", "keda.svc", ""} {
		if _, err := New(Options{URL: u, Credentials: &rest.Config{}}); err == nil || !strings.Contains(err.Error(), "--delegate-external-metrics") {
			t.Errorf("New(%q) = %v, want an error naming the flag", u, err)
		}
	}
}
