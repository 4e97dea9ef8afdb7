package discovery_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tidal-autoscaler/tidal/adapter/discovery"
	"github.com/tidal-autoscaler/tidal/adapter/internal/promtest"
)

// recoveryRules maps every label naming a resource, so a series with a
// service label adds services/http_requests_per_second.
const recoveryRules = `
rules:
- seriesQuery: 'http_requests_total{namespace!="",pod!=""}'
  resources: {template: "<<.Resource>>"}
  name: {matches: "^(.*)_total$", as: "${1}_per_second"}
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[5s])) by (<<.GroupBy>>)'
`

// After its backend failed, a seriesQuery's answers that lack series (a
// Prometheus that has just started is ready seconds before its first
// scrape, so a short window finds nothing) add to the query's last good
// result until the window lies after the recovery plus one relist
// interval (here 5s + 5s), instead of dropping the rule's metrics until
// the next relist. Without a failure before, an answer replaces the
// result at once, as in prometheus-adapter.
func TestDiscoveryRecovery(t *testing.T) {
	const (
		all     = "namespaces/http_requests_per_second\npods/http_requests_per_second (namespaced)\nservices/http_requests_per_second (namespaced)"
		podOnly = "namespaces/http_requests_per_second\npods/http_requests_per_second (namespaced)"
	)
	type answer int
	const (
		full    answer = iota // both series
		partial               // only the series without a service label
		empty                 // success, no series
		fail                  // 503
	)
	type step struct {
		at     time.Duration // since the first pass
		answer answer
		want   string // the metrics listed after the pass
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"an empty answer without a failure before drops the metrics", []step{
			{0, full, all},
			{5 * time.Second, empty, ""},
		}},
		{"empty answers right after an outage keep the metrics until the window lies after the recovery", []step{
			{0, full, all},
			{5 * time.Second, fail, all},
			{10 * time.Second, fail, all},
			{15 * time.Second, empty, all}, // Prometheus ready, not scraping yet
			{20 * time.Second, empty, all},
			{25 * time.Second, empty, ""}, // 10s after the recovery: trusted
		}},
		{"a partial answer while recovering adds to the last good result", []step{
			{0, full, all},
			{5 * time.Second, fail, all},
			{10 * time.Second, partial, all},
			{15 * time.Second, partial, all},
			{20 * time.Second, partial, podOnly},
		}},
		{"series found again while recovering are served", []step{
			{0, partial, podOnly},
			{5 * time.Second, fail, podOnly},
			{10 * time.Second, full, all},
			{15 * time.Second, partial, all},
			{20 * time.Second, partial, podOnly},
		}},
		{"a failure during the hold starts it again", []step{
			{0, full, all},
			{5 * time.Second, fail, all},
			{10 * time.Second, empty, all},
			{15 * time.Second, fail, all},
			{20 * time.Second, empty, all},
			{25 * time.Second, empty, all},
			{30 * time.Second, empty, ""},
		}},
	}
	pod := map[string]string{"__name__": "http_requests_total", "namespace": "a", "pod": "web-1"}
	svc := map[string]string{"__name__": "http_requests_total", "namespace": "a", "pod": "web-2", "service": "web"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := promtest.New(t)
			start := time.Unix(1700000000, 0)
			now := start
			d := discovery.New(discovery.Options{Interval: 5 * time.Second, MaxAge: 5 * time.Second, Now: func() time.Time { return now }})
			d.SetRules(srv.Rules(t, recoveryRules, nil))
			for _, s := range tt.steps {
				now = start.Add(s.at)
				srv.FailSeries(httpSel, s.answer == fail)
				switch s.answer {
				case full:
					srv.SetSeries(httpSel, pod, svc)
				case partial:
					srv.SetSeries(httpSel, pod)
				case empty:
					srv.SetSeries(httpSel)
				}
				err := d.RunOnce(context.Background())
				if (err != nil) != (s.answer == fail) {
					t.Fatalf("at %s: RunOnce = %v", s.at, err)
				}
				if got := listed(d.Snapshot()); got != s.want {
					t.Errorf("at %s: listed\n%s\nwant\n%s", s.at, indent(got), indent(s.want))
				}
			}
		})
	}
}

func indent(s string) string {
	if s == "" {
		return "  (nothing)"
	}
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}
