package monitor

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// observeFleet observes n autoscalers like testSpec/testStatus, one with
// label values that need escaping.
func observeFleet(m *Monitor, n int) {
	for i := range n {
		m.ObserveAutoscaler(fmt.Sprintf("ns-%d", i%7), fmt.Sprintf("web-%d", i), testSpec(), testStatus())
	}
	spec := testSpec()
	spec.Metrics[1].Pods.Metric.Name = "odd \"name\" with \\ and\nline"
	m.ObserveAutoscaler("ns-0", "odd", spec, &autoscalingv2.HorizontalPodAutoscalerStatus{CurrentReplicas: 1, DesiredReplicas: 1})
}

// normalized writes families as the text format does, with every
// family's metrics and every metric's labels sorted, so that two sources
// of the same series compare equal.
func normalized(t *testing.T, mfs map[string]*dto.MetricFamily) string {
	t.Helper()
	var b strings.Builder
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range mfs {
			if !yield(k) {
				return
			}
		}
	}) {
		mf := mfs[name]
		for _, m := range mf.Metric {
			slices.SortFunc(m.Label, func(a, b *dto.LabelPair) int { return strings.Compare(a.GetName(), b.GetName()) })
		}
		slices.SortFunc(mf.Metric, func(a, b *dto.Metric) int { return strings.Compare(a.String(), b.String()) })
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// TestWriteTextIsTheRegistrysExposition: the rendered text, parsed, holds
// exactly the series (names, help, type, labels, values) that a registry
// gathers from the same ObjectSeries, escaping included.
func TestWriteTextIsTheRegistrysExposition(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	observeFleet(m, 20)
	m.Forget("ns-3", "web-3")

	gathered, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]*dto.MetricFamily{}
	for _, mf := range gathered {
		if strings.HasPrefix(mf.GetName(), "tidal_autoscaler_hpa_") && mf.GetName() != "tidal_autoscaler_hpa_scale_events_total" {
			want[mf.GetName()] = mf
		}
	}
	if len(want) != int(numFamilies) {
		t.Fatalf("registry has %d tidal_autoscaler_hpa_* gauge families, want %d", len(want), numFamilies)
	}
	var text bytes.Buffer
	if err := m.objects.series.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	got, err := parser.TextToMetricFamilies(bytes.NewReader(text.Bytes()))
	if err != nil {
		t.Fatalf("parsing the rendered text: %v\n%s", err, text.String())
	}
	if g, w := normalized(t, got), normalized(t, want); g != w {
		t.Errorf("rendered text differs from the registry's exposition\ngot:\n%s\nwant:\n%s", g, w)
	}
	if strings.Contains(text.String(), `hpa_name="web-3"`) {
		t.Error("a forgotten object's series are still rendered")
	}
}

// TestHandlerServesBoth: /metrics holds the registry's metrics and the
// object series, once each, gzipped when asked for.
func TestHandlerServesBoth(t *testing.T) {
	reg := prometheus.NewRegistry()
	objects := NewObjectSeries()
	m, err := New(reg, objects)
	if err != nil {
		t.Fatal(err)
	}
	observeFleet(m, 3)
	m.ObserveReconciliation(ActionNone, ErrorNone, 0)
	srv := httptest.NewServer(Handler(reg, objects))
	defer srv.Close()

	for _, gz := range []bool{false, true} {
		t.Run(fmt.Sprintf("gzip=%v", gz), func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
			if gz {
				req.Header.Set("Accept-Encoding", "gzip")
			} else {
				req.Header.Set("Accept-Encoding", "identity")
			}
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body io.Reader = resp.Body
			if got := resp.Header.Get("Content-Encoding") == "gzip"; got != gz {
				t.Fatalf("Content-Encoding %q, gzip asked: %v", resp.Header.Get("Content-Encoding"), gz)
			}
			if gz {
				if body, err = gzip.NewReader(resp.Body); err != nil {
					t.Fatal(err)
				}
			}
			parser := expfmt.NewTextParser(model.UTF8Validation)
			mfs, err := parser.TextToMetricFamilies(body)
			if err != nil {
				t.Fatalf("parsing /metrics: %v", err)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
				t.Errorf("Content-Type %q, want the text format 0.0.4", ct)
			}
			for name, want := range map[string]int{
				"tidal_autoscaler_reconciliations_total":              1,
				"tidal_autoscaler_hpa_spec_max_replicas":              4,
				"tidal_autoscaler_hpa_status_condition":               27,
				"tidal_autoscaler_hpa_status_last_scale_time_seconds": 3,
			} {
				if got := len(mfs[name].GetMetric()); got != want {
					t.Errorf("%s: %d series, want %d", name, got, want)
				}
			}
		})
	}
}

// BenchmarkScrape compares a scrape of 1,000 autoscalers' series through
// a registry (promhttp) with Handler's.
func BenchmarkScrape(b *testing.B) {
	for _, rendered := range []bool{false, true} {
		b.Run(fmt.Sprintf("rendered=%v", rendered), func(b *testing.B) {
			reg := prometheus.NewRegistry()
			var objects *ObjectSeries
			if rendered {
				objects = NewObjectSeries()
			}
			m, err := New(reg, objects)
			if err != nil {
				b.Fatal(err)
			}
			observeFleet(m, 1000)
			var h http.Handler
			if rendered {
				h = Handler(reg, objects)
			} else {
				h = promhttpHandler(reg)
			}
			req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			req.Header.Set("Accept-Encoding", "gzip")
			b.ResetTimer()
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("status %d", w.Code)
				}
			}
		})
	}
}

func promhttpHandler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}

// TestSetRendersOnlyWhatChanged: an observation renders the lines of the
// families whose samples changed, into one buffer sized for them (its
// entry and the buffer: two allocations), and keeps the others' lines;
// rendering every line each reconcile was 6% of the controller's
// allocations. The exposition is the one a fresh set renders.
func TestSetRendersOnlyWhatChanged(t *testing.T) {
	s := NewObjectSeries()
	m, err := New(prometheus.NewRegistry(), s)
	if err != nil {
		t.Fatal(err)
	}
	m.ObserveAutoscaler("shop", "web", testSpec(), testStatus())
	first := s.objects[objectKey{"shop", "web"}]
	families := 0
	for _, text := range first.text {
		if len(text) > 0 {
			families++
		}
	}
	if families < 5 {
		t.Fatalf("the test object has series in %d families, want 5 or more", families)
	}
	if got := testing.AllocsPerRun(100, func() { s.set("shop", "web", first.samples) }); got > 1 {
		t.Errorf("setting the same samples made %.0f allocations, want 1 (the entry)", got)
	}

	moved := testStatus()
	moved.CurrentMetrics[1].Pods.Current.AverageValue = ptr.To(resource.MustParse("750m"))
	m.ObserveAutoscaler("shop", "web", testSpec(), moved)
	second := s.objects[objectKey{"shop", "web"}]
	for fam := range numFamilies {
		kept := len(first.text[fam]) == 0 || &first.text[fam][0] == &second.text[fam][0]
		if want := fam != famStatusTarget; kept != want {
			t.Errorf("family %s: lines kept %v, want %v", objectFamilies[fam].name, kept, want)
		}
	}
	samples := second.samples
	if got := testing.AllocsPerRun(100, func() {
		s.set("shop", "web", first.samples)
		s.set("shop", "web", samples)
	}); got > 4 {
		t.Errorf("two sets each changing a family made %.0f allocations, want 4", got)
	}

	fresh := NewObjectSeries()
	fm, err := New(prometheus.NewRegistry(), fresh)
	if err != nil {
		t.Fatal(err)
	}
	fm.ObserveAutoscaler("shop", "web", testSpec(), moved)
	var got, want bytes.Buffer
	if err := s.WriteText(&got); err != nil {
		t.Fatal(err)
	}
	if err := fresh.WriteText(&want); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() || !strings.Contains(got.String(), "0.75") {
		t.Errorf("exposition after the change:\n%s\nwant a fresh set's:\n%s", got.String(), want.String())
	}
}
