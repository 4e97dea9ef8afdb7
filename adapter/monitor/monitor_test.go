package monitor_test

import (
	"context"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/tidal-autoscaler/tidal/adapter/discovery"
	"github.com/tidal-autoscaler/tidal/adapter/internal/promtest"
	"github.com/tidal-autoscaler/tidal/adapter/monitor"
	"github.com/tidal-autoscaler/tidal/adapter/prom"
	"github.com/tidal-autoscaler/tidal/adapter/provider"
	"github.com/tidal-autoscaler/tidal/adapter/resourcemetrics"
	"github.com/tidal-autoscaler/tidal/adapter/ruleset"
)

// registered returns fresh metrics registered into a throwaway registry,
// since recording into unregistered metrics is a no-op.
func registered() (*monitor.Metrics, metrics.KubeRegistry) {
	reg := metrics.NewKubeRegistry()
	m := monitor.New()
	m.Register(reg)
	return m, reg
}

// series returns the series of the metric name as /metrics would show
// them: keyed by their labels ("backend=default,rule=rules[0]"), valued by
// the counter's or gauge's value or the histogram's sample count (its
// durations vary from run to run). Comparing every series, not a chosen
// few, also catches a value recorded under the wrong labels.
func series(t *testing.T, reg metrics.KubeRegistry, name string) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(ls)
			var v float64
			switch {
			case m.GetHistogram() != nil:
				v = float64(m.GetHistogram().GetSampleCount())
			case m.GetCounter() != nil:
				v = m.GetCounter().GetValue()
			default:
				v = m.GetGauge().GetValue()
			}
			out[strings.Join(ls, ",")] = v
		}
	}
	return out
}

func checkSeries(t *testing.T, reg metrics.KubeRegistry, name string, want map[string]float64) {
	t.Helper()
	got := series(t, reg, name)
	if len(want) == 0 && len(got) == 0 {
		return
	}
	if len(got) != len(want) {
		t.Errorf("%s = %v, want %v", name, got, want)
		return
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			t.Errorf("%s = %v, want %v", name, got, want)
			return
		}
	}
}

const (
	httpSel  = `http_requests_total{namespace!="",pod!=""}`
	queueSel = `queue_messages{queue!=""}`
)

// rules[0] and rules[1] share one seriesQuery, so one discovery query
// serves both.
const discoveryRules = `
rules:
- seriesQuery: 'http_requests_total{namespace!="",pod!=""}'
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
  name: {matches: "^(.*)_total$", as: "${1}_per_second"}
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)'
- seriesQuery: 'http_requests_total{namespace!="",pod!=""}'
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
  name: {matches: "^(.*)_total$", as: "${1}_per_minute"}
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>) * 60'
externalRules:
- seriesQuery: 'queue_messages{queue!=""}'
  resources: {namespaced: false}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (queue)'
`

// TestDiscoveryMetrics: each discovery pass records, per rule, how long
// its query took and whether it failed (each rule sharing a query counts
// it), and how many metrics are served afterwards, failed queries keeping
// their last good metrics. Passes run in order on one Discoverer; the
// counts are cumulative.
func TestDiscoveryMetrics(t *testing.T) {
	srv := promtest.New(t)
	srv.SetSeries(httpSel, map[string]string{"__name__": "http_requests_total", "namespace": "a", "pod": "web-1"})
	srv.SetSeries(queueSel, map[string]string{"__name__": "queue_messages", "queue": "q1"})
	m, reg := registered()
	d := discovery.New(discovery.Options{Interval: time.Minute, Metrics: m})
	d.SetRules(srv.Rules(t, discoveryRules, nil))

	passes := []struct {
		name           string
		change         func()
		wantErr        bool
		wantDurations  map[string]float64
		wantErrors     map[string]float64
		wantDiscovered map[string]float64
	}{
		{
			name: "every query answers",
			wantDurations: map[string]float64{
				"result=success,rule=rules[0]": 1, "result=success,rule=rules[1]": 1, "result=success,rule=externalRules[0]": 1,
			},
			// pods and namespaces for each of the two custom names.
			wantDiscovered: map[string]float64{"api=custom": 4, "api=external": 1},
		},
		{
			name:    "the shared query fails: both its rules count it, and keep their metrics",
			change:  func() { srv.FailSeries(httpSel, true) },
			wantErr: true,
			wantDurations: map[string]float64{
				"result=success,rule=rules[0]": 1, "result=success,rule=rules[1]": 1, "result=success,rule=externalRules[0]": 2,
				"result=error,rule=rules[0]": 1, "result=error,rule=rules[1]": 1,
			},
			wantErrors:     map[string]float64{"rule=rules[0]": 1, "rule=rules[1]": 1},
			wantDiscovered: map[string]float64{"api=custom": 4, "api=external": 1},
		},
		{
			name: "the query answers again and the external series are gone",
			change: func() {
				srv.FailSeries(httpSel, false)
				srv.SetSeries(queueSel)
			},
			wantDurations: map[string]float64{
				"result=success,rule=rules[0]": 2, "result=success,rule=rules[1]": 2, "result=success,rule=externalRules[0]": 3,
				"result=error,rule=rules[0]": 1, "result=error,rule=rules[1]": 1,
			},
			wantErrors:     map[string]float64{"rule=rules[0]": 1, "rule=rules[1]": 1},
			wantDiscovered: map[string]float64{"api=custom": 4, "api=external": 0},
		},
	}
	for _, p := range passes {
		t.Run(p.name, func(t *testing.T) {
			if p.change != nil {
				p.change()
			}
			before := time.Now()
			if err := d.RunOnce(context.Background()); (err != nil) != p.wantErr {
				t.Errorf("RunOnce() = %v, want an error: %v", err, p.wantErr)
			}
			after := time.Now()
			checkSeries(t, reg, "tidal_adapter_discovery_duration_seconds", p.wantDurations)
			checkSeries(t, reg, "tidal_adapter_discovery_errors_total", p.wantErrors)
			checkSeries(t, reg, "tidal_adapter_discovered_metrics", p.wantDiscovered)
			last := series(t, reg, "tidal_adapter_discovery_last_run_timestamp_seconds")[""]
			if last < float64(before.UnixNano())/1e9 || last > float64(after.UnixNano())/1e9 {
				t.Errorf("last run timestamp %f, want the end of this pass (between %d and %d)", last, before.Unix(), after.Unix()+1)
			}
		})
	}
}

// queryRules send the custom rule to the default backend and the
// external one to the backend named team-a.
const queryRules = `
backends:
- name: team-a
  url: TEAM_A_URL
rules:
- seriesQuery: 'http_requests_total{namespace!="",pod!=""}'
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
  name: {matches: "^(.*)_total$", as: "${1}_per_second"}
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)'
externalRules:
- seriesQuery: 'queue_messages{queue!=""}'
  backend: team-a
  resources: {namespaced: false}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (queue)'
`

// onePod is an objects.Lister knowing the pod a/web-1 only.
type onePod struct{}

func (onePod) Names(context.Context, schema.GroupVersionResource, string, labels.Selector) ([]string, error) {
	return []string{"web-1"}, nil
}

func (onePod) Exists(_ context.Context, gvr schema.GroupVersionResource, ns, name string) (bool, error) {
	return gvr.Resource == "pods" && ns == "a" && name == "web-1", nil
}

// TestQueryMetrics: each custom or external metric request records its
// query's latency, and each failure its reason, under the rule and the
// backend the rule queries.
func TestQueryMetrics(t *testing.T) {
	const (
		custom   = "backend=default,rule=rules[0]"
		external = "backend=team-a,rule=externalRules[0]"
	)
	podValue := func(v float64) promtest.Response {
		return promtest.Response{Vector: []promtest.Sample{{Labels: map[string]string{"pod": "web-1"}, Value: v, Time: 1}}}
	}
	queueValue := func(v float64) promtest.Response {
		return promtest.Response{Vector: []promtest.Sample{{Labels: map[string]string{"queue": "q1"}, Value: v, Time: 1}}}
	}
	tests := []struct {
		name string
		// external asks for the external metric, else the custom one.
		external bool
		answer   promtest.Response
		// hold keeps the answer back past the query timeout.
		hold          bool
		wantDurations map[string]float64
		wantErrors    map[string]float64
		// answered: the request succeeds although a value was counted as
		// an error (a NaN left out of an external list, which is empty).
		answered bool
	}{
		{name: "custom metric answered", answer: podValue(2), wantDurations: map[string]float64{custom: 1}},
		{name: "external metric answered by its backend", external: true, answer: queueValue(5), wantDurations: map[string]float64{external: 1}},
		{
			name: "custom NaN value", answer: podValue(math.NaN()),
			wantDurations: map[string]float64{custom: 1},
			wantErrors:    map[string]float64{"backend=default,reason=bad_value,rule=rules[0]": 1},
		},
		{
			name: "external NaN value, left out of the list", external: true, answer: queueValue(math.NaN()),
			wantDurations: map[string]float64{external: 1},
			wantErrors:    map[string]float64{"backend=team-a,reason=bad_value,rule=externalRules[0]": 1},
			answered:      true,
		},
		{
			name: "query refused", answer: promtest.Response{Status: 400, ErrorType: "bad_data", Error: "parse error"},
			wantDurations: map[string]float64{custom: 1},
			wantErrors:    map[string]float64{"backend=default,reason=query,rule=rules[0]": 1},
		},
		{
			name: "backend unavailable", external: true, answer: promtest.Response{Status: 502, Raw: "<html>bad gateway</html>"},
			wantDurations: map[string]float64{external: 1},
			wantErrors:    map[string]float64{"backend=team-a,reason=unavailable,rule=externalRules[0]": 1},
		},
		{
			name: "backend too slow", external: true, hold: true,
			wantDurations: map[string]float64{external: 1},
			wantErrors:    map[string]float64{"backend=team-a,reason=timeout,rule=externalRules[0]": 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			def, teamA := promtest.New(t), promtest.New(t)
			def.SetSeries(httpSel, map[string]string{"__name__": "http_requests_total", "namespace": "a", "pod": "web-1"})
			teamA.SetSeries(queueSel, map[string]string{"__name__": "queue_messages", "queue": "q1"})
			target := def
			if tt.external {
				target = teamA
			}
			target.OnQuery(func(string) promtest.Response { return tt.answer })
			if tt.hold {
				defer target.Hold()()
			}
			set := def.Rules(t, strings.Replace(queryRules, "TEAM_A_URL", teamA.URL, 1), func(o *prom.Options) {
				o.Timeout = 500 * time.Millisecond
			})
			d := discovery.New(discovery.Options{Interval: time.Minute})
			d.SetRules(set)
			if err := d.RunOnce(context.Background()); err != nil {
				t.Fatal(err)
			}
			m, reg := registered()
			p := provider.New(provider.Options{Discovery: d, Mapper: promtest.Mapper(), Objects: onePod{}, Metrics: m})

			var err error
			if tt.external {
				_, err = p.GetExternalMetric(context.Background(), "a", labels.Everything(), cmprovider.ExternalMetricInfo{Metric: "queue_messages"})
			} else {
				info := cmprovider.CustomMetricInfo{GroupResource: schema.GroupResource{Resource: "pods"}, Metric: "http_requests_per_second", Namespaced: true}
				_, err = p.GetMetricByName(context.Background(), types.NamespacedName{Namespace: "a", Name: "web-1"}, info, labels.Everything())
			}
			if wantErr := tt.wantErrors != nil && !tt.answered; (err != nil) != wantErr {
				t.Errorf("request error = %v, want one: %v", err, wantErr)
			}
			checkSeries(t, reg, "tidal_adapter_query_duration_seconds", tt.wantDurations)
			checkSeries(t, reg, "tidal_adapter_query_errors_total", tt.wantErrors)
		})
	}
}

const resourceRules = `
resourceRules:
  cpu:
    containerQuery: 'sum by (<<.GroupBy>>) (rate(container_cpu_usage_seconds_total{<<.LabelMatchers>>}[3m]))'
    nodeQuery: 'sum by (<<.GroupBy>>) (rate(node_cpu_usage_seconds_total{<<.LabelMatchers>>}[3m]))'
    resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}, node: {resource: node}}}
    containerLabel: container
  memory:
    containerQuery: 'sum by (<<.GroupBy>>) (container_memory_working_set_bytes{<<.LabelMatchers>>})'
    nodeQuery: 'sum by (<<.GroupBy>>) (node_memory_working_set_bytes{<<.LabelMatchers>>})'
    resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}, node: {resource: node}}}
    containerLabel: container
`

// TestResourceMetricsMetrics: metrics.k8s.io requests record each
// query's latency and failures under the resource rule's query, and count
// the objects answered without a resource for lack of samples.
func TestResourceMetricsMetrics(t *testing.T) {
	const (
		cpuPods  = "backend=default,rule=resourceRules.cpu.containerQuery"
		memPods  = "backend=default,rule=resourceRules.memory.containerQuery"
		cpuNodes = "backend=default,rule=resourceRules.cpu.nodeQuery"
		memNodes = "backend=default,rule=resourceRules.memory.nodeQuery"
	)
	container := func(pod string, v float64) promtest.Sample {
		return promtest.Sample{Labels: map[string]string{"namespace": "ns", "pod": pod, "container": "app"}, Value: v, Time: 1}
	}
	node := func(name string, v float64) promtest.Sample {
		return promtest.Sample{Labels: map[string]string{"node": name}, Value: v, Time: 1}
	}
	pods := []*metav1.PartialObjectMetadata{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}},
	}
	nodes := []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "n1"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "n2"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "n3"}},
	}
	tests := []struct {
		name     string
		nodes    bool
		cpu, mem promtest.Response
		wantErr  bool
		// want are the series of each metric.
		wantDurations, wantErrors, wantMissing map[string]float64
	}{
		{
			name:          "pods answered in full",
			cpu:           promtest.Response{Vector: []promtest.Sample{container("a", 1), container("b", 1), container("c", 1)}},
			mem:           promtest.Response{Vector: []promtest.Sample{container("a", 1), container("b", 1), container("c", 1)}},
			wantDurations: map[string]float64{cpuPods: 1, memPods: 1},
		},
		{
			name:          "pods without memory, or without any sample",
			cpu:           promtest.Response{Vector: []promtest.Sample{container("a", 1), container("b", 1)}},
			mem:           promtest.Response{Vector: []promtest.Sample{container("a", 1)}},
			wantDurations: map[string]float64{cpuPods: 1, memPods: 1},
			wantMissing:   map[string]float64{"object=pod,resource=memory": 1, "object=pod,resource=all": 1},
		},
		{
			name:          "nodes without cpu, or without any sample",
			nodes:         true,
			cpu:           promtest.Response{Vector: []promtest.Sample{node("n1", 1)}},
			mem:           promtest.Response{Vector: []promtest.Sample{node("n1", 1), node("n2", 1)}},
			wantDurations: map[string]float64{cpuNodes: 1, memNodes: 1},
			wantMissing:   map[string]float64{"object=node,resource=cpu": 1, "object=node,resource=all": 1},
		},
		{
			name:          "the cpu query refused",
			cpu:           promtest.Response{Status: 400, ErrorType: "bad_data", Error: "parse error"},
			mem:           promtest.Response{Vector: []promtest.Sample{container("a", 1)}},
			wantErr:       true,
			wantDurations: map[string]float64{cpuPods: 1, memPods: 1},
			wantErrors:    map[string]float64{"backend=default,reason=query,rule=resourceRules.cpu.containerQuery": 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := promtest.New(t)
			srv.OnQuery(func(q string) promtest.Response {
				if strings.Contains(q, "cpu") {
					return tt.cpu
				}
				return tt.mem
			})
			set := srv.Rules(t, resourceRules, nil)
			m, reg := registered()
			p := resourcemetrics.New(resourcemetrics.Options{Rules: func() *ruleset.Set { return set }, Metrics: m})
			var err error
			if tt.nodes {
				_, err = p.GetNodeMetrics(nodes...)
			} else {
				_, err = p.GetPodMetrics(pods...)
			}
			if (err != nil) != tt.wantErr {
				t.Errorf("request error = %v, want one: %v", err, tt.wantErr)
			}
			checkSeries(t, reg, "tidal_adapter_query_duration_seconds", tt.wantDurations)
			checkSeries(t, reg, "tidal_adapter_query_errors_total", tt.wantErrors)
			checkSeries(t, reg, "tidal_adapter_resource_metrics_missing_total", tt.wantMissing)
		})
	}
}
