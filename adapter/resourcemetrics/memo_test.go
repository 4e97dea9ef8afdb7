package resourcemetrics_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/metrics/pkg/apis/metrics"

	"github.com/tidal-autoscaler/tidal/adapter/internal/promtest"
	"github.com/tidal-autoscaler/tidal/adapter/prom"
	"github.com/tidal-autoscaler/tidal/adapter/resourcemetrics"
	"github.com/tidal-autoscaler/tidal/adapter/ruleset"
)

// A repeated pods request answered from the same cached Prometheus
// results reuses the usage found for the first one, but each answer is
// its own: the request's pods (labels) and a fresh creationTimestamp.
func TestPodMetricsRemembered(t *testing.T) {
	tests := []struct {
		title    string
		cacheTTL time.Duration
		shared   bool
	}{
		{title: "cached results: usage reused", cacheTTL: time.Minute, shared: true},
		{title: "no Prometheus cache: usage found again", shared: false},
	}
	for _, tt := range tests {
		t.Run(tt.title, func(t *testing.T) {
			now := time.Unix(1800000000, 0)
			p := podsAB(t, tt.cacheTTL, func() time.Time { now = now.Add(time.Second); return now })
			want := map[string]map[string]string{"ns/a": {"app": "cpu=250m memory=1Mi"}, "ns/b": {"app": "cpu=500m memory=2Mi"}}
			var created []metav1.Time
			var answers [][]metrics.PodMetrics
			for i := range 2 {
				a, b := pod("ns", "a"), pod("ns", "b")
				a.Labels["request"] = string(rune('0' + i))
				ms, err := p.GetPodMetrics(a, b)
				if err != nil {
					t.Fatal(err)
				}
				if got := podsSummary(ms); !equal(got, want) {
					t.Errorf("request %d: %v, want %v", i, got, want)
				}
				if ms[0].Labels["request"] != a.Labels["request"] {
					t.Errorf("request %d: labels %v, want the pod's %v", i, ms[0].Labels, a.Labels)
				}
				created = append(created, ms[0].CreationTimestamp)
				answers = append(answers, ms)
			}
			if created[0].Equal(&created[1]) {
				t.Errorf("creationTimestamp %v twice, want each answer's own", created[0])
			}
			if shared := &answers[0][0].Containers[0] == &answers[1][0].Containers[0]; shared != tt.shared {
				t.Errorf("containers shared %v, want %v", shared, tt.shared)
			}
		})
	}
}

func equal(a, b map[string]map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, m := range a {
		if len(m) != len(b[k]) {
			return false
		}
		for c, v := range m {
			if b[k][c] != v {
				return false
			}
		}
	}
	return true
}

// The pods a request selects change (a pod goes away, another comes): the
// answer follows them, from the same cached results.
func TestPodMetricsForChangingPods(t *testing.T) {
	srv := promtest.New(t)
	srv.OnQuery(func(q string) promtest.Response {
		if strings.Contains(q, "cpu") {
			return promtest.Response{Vector: []promtest.Sample{c("ns", "a", "app", 0.25), c("ns", "b", "app", 0.5), c("ns", "c", "app", 1)}}
		}
		return promtest.Response{Vector: []promtest.Sample{c("ns", "a", "app", 1<<20), c("ns", "b", "app", 2<<20), c("ns", "c", "app", 3<<20)}}
	})
	set := srv.Rules(t, strings.Replace(rulesTemplate, "WINDOW", "", 1), func(o *prom.Options) { o.CacheTTL = time.Minute })
	p := resourcemetrics.New(resourcemetrics.Options{Rules: func() *ruleset.Set { return set }})
	tests := []struct {
		title string
		pods  []string
		want  map[string]map[string]string
	}{
		{"two pods", []string{"a", "b"}, map[string]map[string]string{"ns/a": {"app": "cpu=250m memory=1Mi"}, "ns/b": {"app": "cpu=500m memory=2Mi"}}},
		{"one went away", []string{"a"}, map[string]map[string]string{"ns/a": {"app": "cpu=250m memory=1Mi"}}},
		{"another came", []string{"a", "c"}, map[string]map[string]string{"ns/a": {"app": "cpu=250m memory=1Mi"}, "ns/c": {"app": "cpu=1 memory=3Mi"}}},
	}
	for _, tt := range tests {
		t.Run(tt.title, func(t *testing.T) {
			var pods []*metav1.PartialObjectMetadata
			for _, n := range tt.pods {
				pods = append(pods, pod("ns", n))
			}
			l, err := p.PodMetricsListFor("ns?app=web", pods...)
			if err != nil {
				t.Fatal(err)
			}
			ms := l.Items
			if got := podsSummary(ms); !equal(got, tt.want) {
				t.Errorf("%v, want %v", got, tt.want)
			}
		})
	}
}

// Within a second, requests with the same pods and the same cached
// Prometheus results get the same list (the server keeps its encoding);
// anything served that changes makes a new one.
func TestPodMetricsListShared(t *testing.T) {
	type step struct {
		title   string
		advance time.Duration // of the clock, before the request
		rv      string        // pod a's resourceVersion
		label   string        // pod a's "v" label
		same    bool          // the previous step's list
	}
	tests := []struct {
		title    string
		cacheTTL time.Duration
		steps    []step
	}{
		{"cached results", time.Minute, []step{
			{title: "first", rv: "1", label: "x"},
			{title: "same second, same pods", rv: "1", label: "x", same: true},
			{title: "later in the same second", advance: 400 * time.Millisecond, rv: "1", label: "x", same: true},
			{title: "next second: a new creationTimestamp", advance: time.Second, rv: "1", label: "x"},
			{title: "a pod's labels changed", rv: "2", label: "y"},
			{title: "and stay", rv: "2", label: "y", same: true},
			{title: "pods without resourceVersion are never shared", rv: "", label: "z"},
			{title: "not even with themselves", rv: "", label: "z"},
		}},
		{"no Prometheus cache: every result is new", 0, []step{
			{title: "first", rv: "1", label: "x"},
			{title: "same second, same pods", rv: "1", label: "x"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.title, func(t *testing.T) {
			now := time.Unix(1800000000, 0)
			p := podsAB(t, tt.cacheTTL, func() time.Time { return now })
			var prev *metrics.PodMetricsList
			for _, s := range tt.steps {
				now = now.Add(s.advance)
				a, b := pod("ns", "a"), pod("ns", "b")
				a.ResourceVersion, a.Labels["v"] = s.rv, s.label
				if s.rv != "" {
					b.ResourceVersion = "7"
				}
				l, err := p.PodMetricsListFor("ns?app", a, b)
				if err != nil {
					t.Fatal(err)
				}
				if same := l == prev; same != s.same {
					t.Errorf("%s: the previous list %v, want %v", s.title, same, s.same)
				}
				if len(l.Items) != 2 || l.Items[0].Labels["v"] != s.label {
					t.Errorf("%s: %+v, want pod a labelled v=%s", s.title, l.Items, s.label)
				}
				if created := l.Items[0].CreationTimestamp.Time; !s.same && !created.Equal(now) {
					t.Errorf("%s: created %s, want %s", s.title, created, now)
				}
				prev = l
			}
		})
	}
}

// podsAB is a Provider over a fake Prometheus with the app containers of
// pods ns/a (0.25 cores, 1 MiB) and ns/b (0.5 cores, 2 MiB), its query
// cache kept for cacheTTL, stamping objects with now.
func podsAB(t *testing.T, cacheTTL time.Duration, now func() time.Time) *resourcemetrics.Provider {
	t.Helper()
	srv := promtest.New(t)
	srv.OnQuery(func(q string) promtest.Response {
		if strings.Contains(q, "cpu") {
			return promtest.Response{Vector: []promtest.Sample{c("ns", "a", "app", 0.25), c("ns", "b", "app", 0.5)}}
		}
		return promtest.Response{Vector: []promtest.Sample{c("ns", "a", "app", 1<<20), c("ns", "b", "app", 2<<20)}}
	})
	set := srv.Rules(t, strings.Replace(rulesTemplate, "WINDOW", "", 1), func(o *prom.Options) { o.CacheTTL = cacheTTL })
	return resourcemetrics.New(resourcemetrics.Options{Rules: func() *ruleset.Set { return set }, Now: now})
}
