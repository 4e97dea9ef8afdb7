package discovery_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tidal-autoscaler/tidal/adapter/discovery"
	"github.com/tidal-autoscaler/tidal/adapter/internal/promtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const rules = `
rules:
- seriesQuery: 'http_requests_total{namespace!="",pod!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
      pod: {resource: pod}
  name: {matches: "^(.*)_total$", as: "${1}_per_second"}
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)'
- seriesQuery: '{__name__=~"queue_.*",namespace!=""}'
  resources: {template: "<<.Resource>>"}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
externalRules:
- seriesQuery: 'queue_messages{queue!=""}'
  resources: {namespaced: false}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (queue)'
`

const (
	httpSel  = `http_requests_total{namespace!="",pod!=""}`
	queueSel = `{__name__=~"queue_.*",namespace!=""}`
	extSel   = `queue_messages{queue!=""}`
)

func listed(s *discovery.Snapshot) string {
	var out []string
	for _, m := range s.CustomMetrics() {
		ns := ""
		if m.Namespaced {
			ns = " (namespaced)"
		}
		out = append(out, fmt.Sprintf("%s/%s%s", m.Resource, m.Name, ns))
	}
	for _, n := range s.ExternalMetrics() {
		out = append(out, "external/"+n)
	}
	return strings.Join(out, "\n")
}

func TestDiscovery(t *testing.T) {
	srv := promtest.New(t)
	srv.SetSeries(httpSel,
		map[string]string{"__name__": "http_requests_total", "namespace": "a", "pod": "web-1", "code": "200"},
		map[string]string{"__name__": "http_requests_total", "namespace": "a", "pod": "web-2", "code": "500"},
	)
	srv.SetSeries(queueSel,
		map[string]string{"__name__": "queue_length", "namespace": "a", "service": "worker", "job": "scraper"},
	)
	srv.SetSeries(extSel, map[string]string{"__name__": "queue_messages", "queue": "q1"})

	now := time.Unix(1700000000, 0)
	d := discovery.New(discovery.Options{Interval: time.Minute, MaxAge: 5 * time.Minute, Now: func() time.Time { return now }})
	if d.Ready() {
		t.Fatal("ready before any discovery")
	}
	d.SetRules(srv.Rules(t, rules, nil))
	if err := d.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !d.Ready() {
		t.Error("not ready after a successful discovery")
	}

	t.Run("series map to one metric per resource label", func(t *testing.T) {
		want := strings.Join([]string{
			"namespaces/http_requests_per_second",
			"pods/http_requests_per_second (namespaced)",
			"jobs.batch/queue_length (namespaced)",
			"namespaces/queue_length",
			"services/queue_length (namespaced)",
			"external/queue_messages",
		}, "\n")
		if got := listed(d.Snapshot()); got != want {
			t.Errorf("got\n%s\nwant\n%s", got, want)
		}
	})

	t.Run("bindings name the rule and series", func(t *testing.T) {
		snap := d.Snapshot()
		for _, m := range snap.CustomMetrics() {
			b, ok := snap.Custom(m.Resource, m.Name)
			if !ok || b.Series == "" || b.Rule == nil {
				t.Errorf("%s/%s: no binding", m.Resource, m.Name)
			}
		}
		if b, ok := snap.External("queue_messages"); !ok || b.Rule.ID != "externalRules[0]" {
			t.Errorf("external binding = %+v, %v", b, ok)
		}
	})

	t.Run("the series window is max-age", func(t *testing.T) {
		r := srv.Requests("/api/v1/series")[0]
		if r.Form.Get("start") != "1699999700.000" || r.Form.Get("end") != "1700000000.000" {
			t.Errorf("start %s end %s, want now-5m and now", r.Form.Get("start"), r.Form.Get("end"))
		}
	})

	t.Run("a failing query keeps its last result and does not blank others", func(t *testing.T) {
		srv.FailSeries(httpSel, true)
		srv.SetSeries(queueSel, map[string]string{"__name__": "queue_age", "namespace": "a", "deployment": "worker"})
		err := d.RunOnce(context.Background())
		if err == nil || !strings.Contains(err.Error(), "rules[0]") {
			t.Errorf("RunOnce = %v, want the failing rule named", err)
		}
		want := strings.Join([]string{
			"namespaces/http_requests_per_second",
			"pods/http_requests_per_second (namespaced)",
			"deployments.apps/queue_age (namespaced)",
			"namespaces/queue_age",
			"external/queue_messages",
		}, "\n")
		if got := listed(d.Snapshot()); got != want {
			t.Errorf("got\n%s\nwant\n%s", got, want)
		}
	})

	t.Run("new rules replace the mapping", func(t *testing.T) {
		srv.FailSeries(httpSel, false)
		d.SetRules(srv.Rules(t, "externalRules: []\n", nil))
		if got := listed(d.Snapshot()); got != "" {
			t.Errorf("got %q after removing every rule, want nothing", got)
		}
	})
}

// templateRules is the rule of prometheus-adapter's documentation
// (docs/sample-config.yaml) that maps resources with `template:
// "<<.Resource>>"`: any label naming a resource maps to it.
const templateRules = `
rules:
- seriesQuery: '{namespace!="",__name__!~"^container_.*"}'
  name: {matches: "^(.*)_total$"}
  resources: {template: "<<.Resource>>"}
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)'
`

// What discovery lists for series under the documentation's template, and
// with which scope: one metric per label naming a resource (job is
// batch/v1 jobs, as in prometheus-adapter), namespaces never namespaced.
func TestTemplateDiscovery(t *testing.T) {
	const sel = `{namespace!="",__name__!~"^container_.*"}`
	tests := []struct {
		name   string
		series []map[string]string
		want   []string
	}{
		{
			name: "namespace, pod, job and service labels",
			series: []map[string]string{
				{"__name__": "http_requests_total", "namespace": "shop", "pod": "web-1", "job": "kubernetes-pods", "service": "web", "verb": "GET"},
			},
			want: []string{
				"jobs.batch/http_requests (namespaced)",
				"namespaces/http_requests",
				"pods/http_requests (namespaced)",
				"services/http_requests (namespaced)",
			},
		},
		{
			name: "namespace and job only",
			series: []map[string]string{
				{"__name__": "scrapes_total", "namespace": "shop", "job": "kubernetes-pods", "instance": "10.0.0.1:8080"},
			},
			want: []string{"jobs.batch/scrapes (namespaced)", "namespaces/scrapes"},
		},
		{
			name: "namespace only: cluster-scoped",
			series: []map[string]string{
				{"__name__": "deploys_total", "namespace": "shop", "verb": "apply"},
			},
			want: []string{"namespaces/deploys"},
		},
		{
			name: "the same metric from series with and without pods: namespaces stays cluster-scoped",
			series: []map[string]string{
				{"__name__": "errors_total", "namespace": "shop"},
				{"__name__": "errors_total", "namespace": "shop", "pod": "web-1"},
			},
			want: []string{"namespaces/errors", "pods/errors (namespaced)"},
		},
		{
			name: "node and namespace",
			series: []map[string]string{
				{"__name__": "evictions_total", "namespace": "shop", "node": "n1"},
			},
			want: []string{"namespaces/evictions", "nodes/evictions"},
		},
		{
			name: "not a counter: no metric",
			series: []map[string]string{
				{"__name__": "temperature", "namespace": "shop", "pod": "web-1"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := promtest.New(t)
			srv.SetSeries(sel, tt.series...)
			d := discovery.New(discovery.Options{Interval: time.Minute})
			d.SetRules(srv.Rules(t, templateRules, nil))
			if err := d.RunOnce(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got, want := listed(d.Snapshot()), strings.Join(tt.want, "\n"); got != want {
				t.Errorf("got\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// TestReadiness: /readyz's discovery check passes once the first pass has
// ended, even when every query failed: an adapter whose Prometheus is down
// at start serves what it knows (its APIServices stay Available) and
// Pending names what it cannot know yet.
func TestReadiness(t *testing.T) {
	tests := []struct {
		name        string
		rules       string
		fail        []string // selectors whose series query fails
		wantReady   bool     // Ready: a query answered
		wantPending []string // rule IDs
	}{
		{name: "no rules: ready at once", rules: "", wantReady: true},
		{name: "every query fails: ready, every rule pending", rules: rules, fail: []string{httpSel, queueSel, extSel},
			wantPending: []string{"rules[0]", "rules[1]", "externalRules[0]"}},
		{name: "one query fails: that rule pending", rules: rules, fail: []string{queueSel}, wantReady: true,
			wantPending: []string{"rules[1]"}},
		{name: "queries answer: ready", rules: rules, wantReady: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := promtest.New(t)
			for _, sel := range tt.fail {
				srv.FailSeries(sel, true)
			}
			d := discovery.New(discovery.Options{Interval: time.Minute})
			d.SetRules(srv.Rules(t, tt.rules, nil))
			check := discovery.HealthChecker{D: d, Grace: time.Hour}
			if err := check.Check(nil); err == nil {
				t.Error("readyz check passes before the first pass")
			}
			_ = d.RunOnce(context.Background())
			if d.Ready() != tt.wantReady {
				t.Errorf("Ready() = %v, want %v", d.Ready(), tt.wantReady)
			}
			if err := check.Check(nil); err != nil {
				t.Errorf("readyz check after the first pass = %v, want ready", err)
			}
			p := d.Pending()
			if got, want := strings.Join(p.Rules, ","), strings.Join(tt.wantPending, ","); got != want {
				t.Errorf("Pending().Rules = %q, want %q", got, want)
			}
			if len(tt.wantPending) > 0 && len(p.Backends) != 1 {
				t.Errorf("Pending().Backends = %q, want the one backend", p.Backends)
			}
			// Prometheus comes back: nothing is pending any more.
			for _, sel := range tt.fail {
				srv.FailSeries(sel, false)
			}
			_ = d.RunOnce(context.Background())
			if p := d.Pending(); len(p.Rules) > 0 {
				t.Errorf("Pending() = %+v after every query answered", p)
			}
		})
	}
}

// TestReadinessGrace: a first pass that does not end (Prometheus accepts
// and never answers) holds readiness for Grace at most.
func TestReadinessGrace(t *testing.T) {
	now := time.Now()
	d := discovery.New(discovery.Options{Interval: time.Minute, Now: func() time.Time { return now }})
	check := discovery.HealthChecker{D: d, Grace: 10 * time.Second}
	if err := check.Check(nil); err == nil || !strings.Contains(err.Error(), "10s") {
		t.Errorf("readyz check at start = %v, want an error naming the 10s wait", err)
	}
	now = now.Add(10 * time.Second)
	if err := check.Check(nil); err != nil {
		t.Errorf("readyz check after the grace = %v, want ready", err)
	}
}

func TestRunStopsWithContext(t *testing.T) {
	srv := promtest.New(t)
	srv.SetSeries(extSel, map[string]string{"__name__": "queue_messages", "queue": "q1"})
	d := discovery.New(discovery.Options{Interval: time.Hour})
	d.SetRules(srv.Rules(t, rules, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	for !d.Ready() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !d.Ready() {
		t.Error("Run did not discover at once")
	}
	cancel()
	<-done
}
