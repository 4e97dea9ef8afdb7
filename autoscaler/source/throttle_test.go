package source

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	autoscalingclient "k8s.io/client-go/kubernetes/typed/autoscaling/v2"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/metrics"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
)

// countingLimiter lets every request through at once and counts them.
type countingLimiter struct {
	flowcontrol.RateLimiter
	mu    sync.Mutex
	waits int
}

func (l *countingLimiter) Wait(ctx context.Context) error {
	l.mu.Lock()
	l.waits++
	l.mu.Unlock()
	return l.RateLimiter.Wait(ctx)
}

func (l *countingLimiter) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.waits
}

// recordedLatency records client-go's rate limiter samples.
type recordedLatency struct {
	mu      sync.Mutex
	samples []string // "VERB URL"
}

func (r *recordedLatency) Observe(_ context.Context, verb string, u url.URL, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.samples = append(r.samples, verb+" "+u.String())
}

func (r *recordedLatency) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.samples
	r.samples = nil
	return s
}

// recordRateLimiterLatency replaces client-go's rate limiter metric for
// the test (metrics.Register sets it once per process, so the test sets
// the variable itself).
func recordRateLimiterLatency(t *testing.T) *recordedLatency {
	t.Helper()
	rec := &recordedLatency{}
	old := metrics.RateLimiterLatency
	metrics.RateLimiterLatency = rec
	t.Cleanup(func() { metrics.RateLimiterLatency = old })
	return rec
}

// TestStatusWriteThrottle: in both modes a status write takes one token
// from the shared limiter, not two (the status client has none), and
// client-go's rate limiter metric gets the sample client-go would give
// it for the same write: the same verb and URL template.
func TestStatusWriteThrottle(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(srv.Close)
	rec := recordRateLimiterLatency(t)
	ctx := context.Background()
	meta := metav1.ObjectMeta{Name: "web", Namespace: "ns"}
	for _, tc := range []struct {
		name string
		// write writes meta's status three times through tidal's writer
		// built with limiter.
		write func(t *testing.T, limiter flowcontrol.RateLimiter)
		// upstream writes it once as client-go alone would, its client
		// taking from limiter.
		upstream func(t *testing.T, limiter flowcontrol.RateLimiter) error
	}{{
		name: "native mode",
		write: func(t *testing.T, limiter flowcontrol.RateLimiter) {
			w, err := NewHPAStatusWriter(&rest.Config{Host: srv.URL}, limiter, 1)
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if err := w.UpdateStatus(ctx, &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: meta}); err != nil {
					t.Fatal(err)
				}
			}
		},
		upstream: func(t *testing.T, limiter flowcontrol.RateLimiter) error {
			c, err := rest.RESTClientFor(&rest.Config{Host: srv.URL, RateLimiter: limiter, APIPath: "/apis",
				ContentConfig: rest.ContentConfig{GroupVersion: &autoscalingv2.SchemeGroupVersion, NegotiatedSerializer: newHAJSON(nil, nil)}})
			if err != nil {
				t.Fatal(err)
			}
			return c.Put().Namespace("ns").Resource("horizontalpodautoscalers").Name("web").SubResource("status").
				Param("fieldManager", FieldManager).Body([]byte(`{}`)).Do(ctx).Error()
		},
	}, {
		name: "crd mode",
		write: func(t *testing.T, limiter flowcontrol.RateLimiter) {
			clients, err := NewHorizontalAutoscalerClients(&rest.Config{Host: srv.URL, RateLimiter: limiter}, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			source := CRDSource(clients, 0)
			for range 3 {
				if err := source.UpdateStatus(ctx, haObject{&v1alpha1.HorizontalAutoscaler{ObjectMeta: meta}}); err != nil {
					t.Fatal(err)
				}
			}
		},
		upstream: func(t *testing.T, limiter flowcontrol.RateLimiter) error {
			clients, err := NewHorizontalAutoscalerClients(&rest.Config{Host: srv.URL, RateLimiter: limiter}, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			return clients.Watch.Put().Namespace("ns").Resource(v1alpha1.Resource).Name("web").SubResource("status").
				Param("fieldManager", FieldManager).Body([]byte(`{}`)).Do(ctx).Error()
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			rec.take()
			limiter := &countingLimiter{RateLimiter: flowcontrol.NewFakeAlwaysRateLimiter()}
			tc.write(t, limiter)
			if n := limiter.count(); n != 3 {
				t.Errorf("3 status writes waited on the limiter %d times, want 3", n)
			}
			got := rec.take()
			if err := tc.upstream(t, &countingLimiter{RateLimiter: flowcontrol.NewFakeAlwaysRateLimiter()}); err != nil {
				t.Fatal(err)
			}
			want := rec.take()
			if len(want) != 1 {
				t.Fatalf("client-go's write gave %d rate limiter samples, want 1: %q", len(want), want)
			}
			if len(got) != 3 {
				t.Fatalf("3 status writes gave %d rate limiter samples, want 3: %q", len(got), got)
			}
			for _, s := range got {
				if s != want[0] {
					t.Errorf("rate limiter sample %q, client-go's %q", s, want[0])
				}
			}
		})
	}
}

// TestStatusWriteThrottleCanceled: a write whose context ends while it
// waits for a token is not sent, and says why.
func TestStatusWriteThrottleCanceled(t *testing.T) {
	var sent atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(srv.Close)
	recordRateLimiterLatency(t)
	// One token a minute, the first taken here: the write must wait.
	limiter := flowcontrol.NewTokenBucketRateLimiter(1.0/60, 1)
	limiter.Accept()
	w, err := NewHPAStatusWriter(&rest.Config{Host: srv.URL}, limiter, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = w.UpdateStatus(ctx, &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}})
	if err == nil {
		t.Fatal("a write that could not get a token succeeded")
	}
	if n := sent.Load(); n != 0 {
		t.Errorf("the server got %d writes, want none", n)
	}
}

// TestStatusWriteThrottleAllocs: a status write that waits on the limiter
// itself allocates less than one whose client waits (client-go builds the
// metric's URL template for each request: a map, the URL, its path split
// and joined again).
func TestStatusWriteThrottleAllocs(t *testing.T) {
	recordRateLimiterLatency(t)
	answer := func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(`{}`))}, nil
	}
	putter := func(clientLimiter, ownLimiter flowcontrol.RateLimiter) statusPutter {
		cfg := statusConfig(&rest.Config{Host: "https://127.0.0.1:6443", Transport: roundTripFunc(answer)}, 1)
		cfg.RateLimiter = clientLimiter
		c, err := autoscalingclient.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return newStatusPutter(c.RESTClient(), "tidal", metadataAnswer(runtime.ContentTypeJSON), ownLimiter, autoscalingv2.SchemeGroupVersion, "horizontalpodautoscalers")
	}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}}
	allocs := func(p statusPutter) float64 {
		return testing.AllocsPerRun(100, func() {
			if _, err := p.put(context.Background(), "ns", "web", hpa); err != nil {
				t.Fatal(err)
			}
		})
	}
	own := allocs(putter(nil, flowcontrol.NewFakeAlwaysRateLimiter()))
	client := allocs(putter(flowcontrol.NewFakeAlwaysRateLimiter(), nil))
	t.Logf("allocations a write: %.0f waiting itself, %.0f with the client waiting", own, client)
	if own+8 > client {
		t.Errorf("a write waiting itself allocates %.0f times, with the client waiting %.0f: want at least 8 fewer", own, client)
	}
}
