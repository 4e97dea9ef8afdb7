package prom_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"

	"github.com/tidal-autoscaler/tidal/adapter/internal/promtest"
	"github.com/tidal-autoscaler/tidal/adapter/monitor"
	"github.com/tidal-autoscaler/tidal/adapter/prom"
	"github.com/tidal-autoscaler/tidal/rules/config"
)

func newClient(t *testing.T, rawURL string, mod func(*prom.Options)) prom.Client {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	o := prom.Options{Name: prom.DefaultBackend, URL: u, Timeout: 2 * time.Second}
	if mod != nil {
		mod(&o)
	}
	c, err := prom.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestQueryVerb(t *testing.T) {
	long := `sum(rate(x{pod=~"` + strings.Repeat("web-abcdef|", 500) + `"}[1m]))`
	tests := []struct {
		name       string
		verb       string
		query      string
		wantMethod string
	}{
		{"GET sends a short query with GET", http.MethodGet, "up", http.MethodGet},
		{"GET sends a long query with POST", http.MethodGet, long, http.MethodPost},
		{"POST always posts", http.MethodPost, "up", http.MethodPost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := promtest.New(t)
			c := newClient(t, srv.URL, func(o *prom.Options) { o.Verb = tt.verb })
			if _, err := c.Query(context.Background(), tt.query, time.Time{}); err != nil {
				t.Fatal(err)
			}
			reqs := srv.Requests("/api/v1/query")
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			if reqs[0].Method != tt.wantMethod || reqs[0].Form.Get("query") != tt.query {
				t.Errorf("got %s with query of %d bytes, want %s with the query", reqs[0].Method, len(reqs[0].Form.Get("query")), tt.wantMethod)
			}
		})
	}
}

func TestQueryKeepsSampleTimestamps(t *testing.T) {
	srv := promtest.New(t)
	srv.OnQuery(func(string) promtest.Response {
		return promtest.Response{Vector: []promtest.Sample{{Labels: map[string]string{"pod": "a"}, Value: 1.5, Time: 1700000000.25}}}
	})
	c := newClient(t, srv.URL, nil)
	v, err := c.Query(context.Background(), "x", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != 1 || v[0].Timestamp.Time().UnixMilli() != 1700000000250 || float64(v[0].Value) != 1.5 {
		t.Fatalf("got %v, want the sample's own timestamp and value", v)
	}
}

func TestQueryCoalescesIdenticalQueries(t *testing.T) {
	srv := promtest.New(t)
	reg := metrics.NewKubeRegistry()
	m := monitor.New()
	m.Register(reg)
	srv.OnQuery(func(string) promtest.Response {
		return promtest.Response{Vector: []promtest.Sample{{Value: 7, Time: 1}}}
	})
	release := srv.Hold()
	c := newClient(t, srv.URL, func(o *prom.Options) { o.Metrics = m })

	const callers = 8
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := c.Query(context.Background(), "same", time.Time{})
			if err == nil && (len(v) != 1 || v[0].Value != 7) {
				err = errors.New("wrong result")
			}
			errs <- err
		}()
	}
	// Wait for the one request to reach the server, then for the other
	// callers to join it, before letting it answer.
	deadline := time.Now().Add(5 * time.Second)
	for len(srv.Requests("/api/v1/query")) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	release()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := len(srv.Requests("/api/v1/query")); n != 1 {
		t.Errorf("%d requests for %d identical concurrent queries, want 1", n, callers)
	}
	if got, _ := testutil.GetCounterMetricValue(m.Coalesced.WithLabelValues(prom.DefaultBackend)); got != callers-1 {
		t.Errorf("coalesced counter = %v, want %d", got, callers-1)
	}
}

func TestQueryCache(t *testing.T) {
	tests := []struct {
		name         string
		ttl          time.Duration
		ts           time.Time
		wantRequests int
	}{
		{"now queries are cached", time.Minute, time.Time{}, 1},
		{"no cache with TTL 0", 0, time.Time{}, 2},
		{"queries at a given time are not cached", time.Minute, time.Unix(1700000000, 0), 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := promtest.New(t)
			m := monitor.New()
			m.Register(metrics.NewKubeRegistry())
			c := newClient(t, srv.URL, func(o *prom.Options) { o.CacheTTL, o.Metrics = tt.ttl, m })
			for range 2 {
				if _, err := c.Query(context.Background(), "q", tt.ts); err != nil {
					t.Fatal(err)
				}
			}
			if n := len(srv.Requests("/api/v1/query")); n != tt.wantRequests {
				t.Errorf("%d requests, want %d", n, tt.wantRequests)
			}
			hits, _ := testutil.GetCounterMetricValue(m.CacheHits.WithLabelValues(prom.DefaultBackend))
			if want := float64(2 - tt.wantRequests); hits != want {
				t.Errorf("cache hits = %v, want %v", hits, want)
			}
		})
	}
}

func TestQueryErrors(t *testing.T) {
	closed := func(t *testing.T) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		return "http://" + addr
	}
	tests := []struct {
		name     string
		url      func(t *testing.T) string
		response promtest.Response
		hold     bool
		want     error
		wantText string
	}{
		{name: "unreachable", url: closed, want: prom.ErrUnavailable, wantText: `Prometheus backend "default"`},
		{name: "timeout", hold: true, want: prom.ErrTimeout, wantText: "did not answer in time"},
		{name: "bad query", response: promtest.Response{Status: 400, ErrorType: "bad_data", Error: "parse error"}, want: prom.ErrQuery, wantText: "parse error"},
		{name: "execution error", response: promtest.Response{Status: 422, ErrorType: "execution", Error: "many-to-many"}, want: prom.ErrQuery},
		{name: "proxy error page", response: promtest.Response{Status: 502, Raw: "<html>bad gateway</html>"}, want: prom.ErrUnavailable},
		{name: "tenant refused", response: promtest.Response{Status: 401, Raw: "no org id"}, want: prom.ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := promtest.New(t)
			srv.OnQuery(func(string) promtest.Response { return tt.response })
			if tt.hold {
				defer srv.Hold()()
			}
			u := srv.URL
			if tt.url != nil {
				u = tt.url(t)
			}
			c := newClient(t, u, func(o *prom.Options) { o.Timeout = 200 * time.Millisecond })
			// The caller's context has no deadline: a timeout can only be
			// the client's own.
			_, err := c.Query(context.Background(), "q", time.Time{})
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("err = %q, want it to contain %q", err, tt.wantText)
			}
			// The error is the first answer's: no request is retried.
			wantRequests := 1
			if tt.url != nil {
				wantRequests = 0 // the query went to the closed address
			}
			if got := len(srv.Requests("/api/v1/query")); got != wantRequests {
				t.Errorf("the server got %d queries, want %d", got, wantRequests)
			}
		})
	}
}

func TestSeriesKeepsDistinctShapes(t *testing.T) {
	srv := promtest.New(t)
	const sel = `{__name__=~"http_.*"}`
	srv.SetSeries(sel,
		map[string]string{"__name__": "http_requests_total", "namespace": "a", "pod": "p1"},
		map[string]string{"__name__": "http_requests_total", "pod": "p2", "namespace": "b"},
		map[string]string{"__name__": "http_requests_total", "namespace": "a", "pod": "p3", "code": "500"},
		map[string]string{"__name__": "http_errors_total", "namespace": "a"},
	)
	c := newClient(t, srv.URL, nil)
	end := time.Unix(1700000000, 0)
	shapes, err := c.Series(context.Background(), []string{sel}, end.Add(-10*time.Minute), end)
	if err != nil {
		t.Fatal(err)
	}
	want := []prom.Shape{
		{Name: "http_errors_total", Labels: []string{"namespace"}},
		{Name: "http_requests_total", Labels: []string{"code", "namespace", "pod"}},
		{Name: "http_requests_total", Labels: []string{"namespace", "pod"}},
	}
	if len(shapes) != len(want) {
		t.Fatalf("got %v, want %v", shapes, want)
	}
	for i := range want {
		if shapes[i].Name != want[i].Name || strings.Join(shapes[i].Labels, ",") != strings.Join(want[i].Labels, ",") {
			t.Errorf("shape %d = %v, want %v", i, shapes[i], want[i])
		}
	}
	req := srv.Requests("/api/v1/series")[0]
	if req.Form.Get("start") != "1699999400.000" || req.Form.Get("end") != "1700000000.000" {
		t.Errorf("start, end = %s, %s; want the max-age window", req.Form.Get("start"), req.Form.Get("end"))
	}
}

func TestSeriesError(t *testing.T) {
	srv := promtest.New(t)
	srv.FailSeries("up", true)
	c := newClient(t, srv.URL, nil)
	_, err := c.Series(context.Background(), []string{"up"}, time.Time{}, time.Time{})
	if !errors.Is(err, prom.ErrUnavailable) || !strings.Contains(err.Error(), "fake outage") {
		t.Fatalf("err = %v, want ErrUnavailable with Prometheus' message", err)
	}
}

func TestNamedBackendsSendTheirHeaders(t *testing.T) {
	def, tenant := promtest.New(t), promtest.New(t)
	u, _ := url.Parse(def.URL)
	opts := prom.Options{Name: prom.DefaultBackend, URL: u}
	defClient, err := prom.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := prom.NewBackends(defClient, opts, []config.Backend{{Name: "mimir", URL: tenant.URL, Headers: map[string]string{"X-Scope-OrgID": "team-a"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"", "mimir"} {
		c, err := b.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Query(context.Background(), "up", time.Time{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Series(context.Background(), []string{"up"}, time.Time{}, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range def.Requests("") {
		if r.Header.Get("X-Scope-OrgID") != "" {
			t.Errorf("default backend got the tenant header on %s", r.Path)
		}
	}
	got := tenant.Requests("")
	if len(got) != 2 {
		t.Fatalf("named backend got %d requests, want 2", len(got))
	}
	for _, r := range got {
		if r.Header.Get("X-Scope-OrgID") != "team-a" {
			t.Errorf("named backend request %s without its header", r.Path)
		}
	}
	if _, err := b.Get("nope"); err == nil || !strings.Contains(err.Error(), "mimir") {
		t.Errorf("Get(unknown) = %v, want an error listing the backends", err)
	}
}
