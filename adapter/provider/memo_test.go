package provider_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/metrics/pkg/apis/custom_metrics"

	"github.com/tidal-autoscaler/tidal/adapter/monitor"
	"github.com/tidal-autoscaler/tidal/adapter/prom"
	"github.com/tidal-autoscaler/tidal/adapter/provider"
)

// A repeated request answered from the same cached Prometheus result
// reuses the items converted for the first one; a new result is converted
// again. Either way the answer is the same as without reuse.
func TestObjectsRemembered(t *testing.T) {
	tests := []struct {
		title    string
		cacheTTL time.Duration
		// selectors are requested in turn, twice each.
		selectors []string
		want      []string
		// shared says whether the second answer to a selector reuses the
		// first one's items.
		shared bool
	}{
		{
			title:     "cached result: items reused",
			cacheTTL:  time.Minute,
			selectors: []string{"app=web"},
			want:      []string{"web-1=312500u web-2=1000500u web-3=2"},
			shared:    true,
		},
		{
			title:     "cached results of different selectors: each its own",
			cacheTTL:  time.Minute,
			selectors: []string{"app=web", "canary=true", "app=web"},
			want:      []string{"web-1=312500u web-2=1000500u web-3=2", "web-3=2", "web-1=312500u web-2=1000500u web-3=2"},
			shared:    true,
		},
		{
			title:     "no Prometheus cache: every result converted",
			selectors: []string{"app=web"},
			want:      []string{"web-1=312500u web-2=1000500u web-3=2"},
			shared:    false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.title, func(t *testing.T) {
			f := newFixture(t, func(o *prom.Options) { o.CacheTTL = tt.cacheTTL })
			for i, s := range tt.selectors {
				var lists [2]*custom_metrics.MetricValueList
				for j := range lists {
					l, err := f.p.GetMetricBySelector(context.Background(), "a", labels.SelectorFromSet(mustSet(t, s)), info(pods), labels.Everything())
					if err != nil {
						t.Fatal(err)
					}
					if got := summary(l); got != tt.want[i] {
						t.Errorf("%s, request %d: %q, want %q", s, j, got, tt.want[i])
					}
					lists[j] = l
				}
				if shared := &lists[0].Items[0] == &lists[1].Items[0]; shared != tt.shared {
					t.Errorf("%s: items shared %v, want %v", s, shared, tt.shared)
				}
			}
		})
	}
}

// A NaN-only answer stays an empty list when it is remembered, and each
// request counts the value it left out.
func TestObjectsRememberedNaN(t *testing.T) {
	m := monitor.New()
	m.Register(metrics.NewKubeRegistry())
	f := newFixtureWith(t, func(o *prom.Options) { o.CacheTTL = time.Minute }, func(o *provider.Options) { o.Metrics = m })
	for i := range 2 {
		l, err := f.p.GetMetricBySelector(context.Background(), "a", labels.SelectorFromSet(labels.Set{"app": "nan"}), info(pods), labels.Everything())
		if err != nil || l.Items == nil || len(l.Items) != 0 {
			t.Errorf("request %d: %+v, %v; want an empty list", i, l, err)
		}
	}
	if got, _ := testutil.GetCounterMetricValue(m.QueryErrors.WithLabelValues(prom.DefaultBackend, "rules[0]", "bad_value")); got != 2 {
		t.Errorf("bad_value counter = %v, want 2", got)
	}
}

func mustSet(t *testing.T, s string) labels.Set {
	t.Helper()
	set, err := labels.ConvertSelectorToLabelsMap(s)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func summary(l *custom_metrics.MetricValueList) string {
	parts := make([]string, len(l.Items))
	for i, it := range l.Items {
		parts[i] = it.DescribedObject.Name + "=" + it.Value.String()
	}
	return strings.Join(parts, " ")
}
