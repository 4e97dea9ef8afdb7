package resourcemetrics_test

import (
	"math"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/metrics/pkg/apis/metrics"

	"github.com/tidal-autoscaler/tidal/adapter/internal/promtest"
	"github.com/tidal-autoscaler/tidal/adapter/resourcemetrics"
	"github.com/tidal-autoscaler/tidal/adapter/ruleset"
)

const rulesTemplate = `
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
WINDOW`

// sampleTime is the evaluation time every fake answer carries.
const sampleTime = 1700000000.5

func c(ns, pod, container string, v float64) promtest.Sample {
	return promtest.Sample{Labels: map[string]string{"namespace": ns, "pod": pod, "container": container}, Value: v, Time: sampleTime}
}

func n(node string, v float64) promtest.Sample {
	return promtest.Sample{Labels: map[string]string{"node": node}, Value: v, Time: sampleTime}
}

func pod(ns, name string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}}}
}

// setup returns a Provider over a fake Prometheus answering cpu queries
// with cpu and memory queries with mem.
func setup(t *testing.T, window string, cpu, mem []promtest.Sample) (*resourcemetrics.Provider, *promtest.Server) {
	t.Helper()
	srv := promtest.New(t)
	srv.OnQuery(func(q string) promtest.Response {
		if strings.Contains(q, "cpu") {
			return promtest.Response{Vector: cpu}
		}
		return promtest.Response{Vector: mem}
	})
	set := srv.Rules(t, strings.Replace(rulesTemplate, "WINDOW", window, 1), nil)
	now := time.Unix(1800000000, 0)
	return resourcemetrics.New(resourcemetrics.Options{
		Rules: func() *ruleset.Set { return set },
		Now:   func() time.Time { return now },
	}), srv
}

// usage renders a container's or node's usage as "cpu=X memory=Y".
func usage(l corev1.ResourceList) string {
	var parts []string
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := l[r]; ok {
			parts = append(parts, string(r)+"="+q.String())
		}
	}
	return strings.Join(parts, " ")
}

func podsSummary(ms []metrics.PodMetrics) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, m := range ms {
		cs := map[string]string{}
		for _, c := range m.Containers {
			cs[c.Name] = usage(c.Usage)
		}
		out[m.Namespace+"/"+m.Name] = cs
	}
	return out
}

func TestPodMetrics(t *testing.T) {
	tests := []struct {
		name     string
		pods     []*metav1.PartialObjectMetadata
		cpu, mem []promtest.Sample
		want     map[string]map[string]string
		// wantQuery are substrings of both queries.
		wantQuery []string
	}{
		{
			name: "per container, with the pause container and the pod cgroup dropped",
			pods: []*metav1.PartialObjectMetadata{pod("ns", "a")},
			cpu:  []promtest.Sample{c("ns", "a", "app", 0.25), c("ns", "a", "sidecar", 0.001), c("ns", "a", "POD", 0.5), c("ns", "a", "", 0.751)},
			mem:  []promtest.Sample{c("ns", "a", "app", 1<<20), c("ns", "a", "sidecar", 1000), c("ns", "a", "POD", 1<<10), c("ns", "a", "", 1<<21)},
			want: map[string]map[string]string{"ns/a": {
				"app":     "cpu=250m memory=1Mi",
				"sidecar": "cpu=1m memory=1k",
			}},
			wantQuery: []string{`namespace="ns"`, `pod="a"`, `by (pod,container,namespace)`},
		},
		{
			name: "a pod with cpu but no memory series keeps its cpu, memory absent (not 0)",
			pods: []*metav1.PartialObjectMetadata{pod("ns", "a"), pod("ns", "b")},
			cpu:  []promtest.Sample{c("ns", "a", "app", 0.5), c("ns", "b", "app", 0.1)},
			mem:  []promtest.Sample{c("ns", "b", "app", 2048)},
			want: map[string]map[string]string{
				"ns/a": {"app": "cpu=500m"},
				"ns/b": {"app": "cpu=100m memory=2Ki"},
			},
			wantQuery: []string{`pod=~"a|b"`},
		},
		{
			name: "a pod without any sample is left out",
			pods: []*metav1.PartialObjectMetadata{pod("ns", "a"), pod("ns", "gone")},
			cpu:  []promtest.Sample{c("ns", "a", "app", 1)},
			mem:  []promtest.Sample{c("ns", "a", "app", 1)},
			want: map[string]map[string]string{"ns/a": {"app": "cpu=1 memory=1"}},
		},
		{
			name: "values rounded to the nanocore and the byte, not truncated",
			pods: []*metav1.PartialObjectMetadata{pod("ns", "a")},
			cpu:  []promtest.Sample{c("ns", "a", "app", 0.3125), c("ns", "a", "tiny", 0.0000000015), c("ns", "a", "frac", 1.0000000004999)},
			mem:  []promtest.Sample{c("ns", "a", "app", 1023.5), c("ns", "a", "tiny", 0.4), c("ns", "a", "frac", 1048575.9)},
			want: map[string]map[string]string{"ns/a": {
				"app":  "cpu=312500u memory=1Ki",
				"tiny": "cpu=2n memory=0",
				"frac": "cpu=1 memory=1Mi",
			}},
		},
		{
			name: "NaN, infinite and negative samples count as missing",
			pods: []*metav1.PartialObjectMetadata{pod("ns", "a"), pod("ns", "b")},
			cpu:  []promtest.Sample{c("ns", "a", "app", math.NaN()), c("ns", "a", "side", math.Inf(1)), c("ns", "b", "app", -1)},
			mem:  []promtest.Sample{c("ns", "a", "app", 10), c("ns", "a", "side", math.NaN()), c("ns", "b", "app", math.Inf(-1))},
			want: map[string]map[string]string{"ns/a": {"app": "memory=10"}},
		},
		{
			name: "pods of several namespaces in one query per resource, told apart by namespace",
			pods: []*metav1.PartialObjectMetadata{pod("ns1", "a"), pod("ns2", "a"), pod("ns2", "b")},
			cpu:  []promtest.Sample{c("ns1", "a", "app", 0.1), c("ns2", "a", "app", 0.2), c("ns3", "b", "app", 9)},
			mem:  []promtest.Sample{c("ns1", "a", "app", 1), c("ns2", "a", "app", 2), c("ns2", "b", "app", 3)},
			want: map[string]map[string]string{
				"ns1/a": {"app": "cpu=100m memory=1"},
				"ns2/a": {"app": "cpu=200m memory=2"},
				"ns2/b": {"app": "memory=3"},
			},
			wantQuery: []string{`{pod=~"a|b"}`, `by (pod,container,namespace)`},
		},
		{
			name: "several samples of one container are summed",
			pods: []*metav1.PartialObjectMetadata{pod("ns", "a")},
			cpu:  []promtest.Sample{c("ns", "a", "app", 0.1), c("ns", "a", "app", 0.2)},
			mem:  []promtest.Sample{c("ns", "a", "app", 1), c("ns", "a", "app", 2)},
			want: map[string]map[string]string{"ns/a": {"app": "cpu=300m memory=3"}},
		},
		{
			name: "pod names are escaped in the matchers",
			pods: []*metav1.PartialObjectMetadata{pod("ns", "a.b"), pod("ns", `c"d`)},
			want: map[string]map[string]string{},
			// The regex escapes the dot; the quote is escaped in the string.
			wantQuery: []string{`pod=~"a\\.b|c\"d"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, srv := setup(t, "  window: 2m", tt.cpu, tt.mem)
			got, err := p.GetPodMetrics(tt.pods...)
			if err != nil {
				t.Fatal(err)
			}
			sum := podsSummary(got)
			if len(sum) != len(tt.want) {
				t.Errorf("got pods %v, want %v", sum, tt.want)
			}
			for k, want := range tt.want {
				g := sum[k]
				if len(g) != len(want) {
					t.Errorf("%s: got containers %v, want %v", k, g, want)
				}
				for cn, u := range want {
					if g[cn] != u {
						t.Errorf("%s container %s: got %q, want %q", k, cn, g[cn], u)
					}
				}
			}
			reqs := srv.Requests("/api/v1/query")
			if len(reqs) != 2 {
				t.Fatalf("sent %d queries, want 2 (cpu and memory)", len(reqs))
			}
			for _, r := range reqs {
				q := r.Form.Get("query")
				for _, w := range tt.wantQuery {
					if !strings.Contains(q, w) {
						t.Errorf("query %s does not contain %s", q, w)
					}
				}
			}
		})
	}
}

func TestPodMetricsObject(t *testing.T) {
	cpu := []promtest.Sample{c("ns", "a", "b-second", 0.1), c("ns", "a", "a-first", 0.2)}
	cpu[1].Time = sampleTime - 10
	mem := []promtest.Sample{c("ns", "a", "b-second", 1), c("ns", "a", "a-first", 2)}
	tests := []struct {
		name       string
		window     string
		wantWindow time.Duration
	}{
		{name: "window from resourceRules.window", window: "  window: 2m", wantWindow: 2 * time.Minute},
		{name: "window from the cpu query's range when unset", window: "", wantWindow: 3 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := setup(t, tt.window, cpu, mem)
			got, err := p.GetPodMetrics(pod("ns", "a"))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 {
				t.Fatalf("got %d pods", len(got))
			}
			m := got[0]
			if m.Window.Duration != tt.wantWindow {
				t.Errorf("window = %v, want %v", m.Window.Duration, tt.wantWindow)
			}
			// The earliest sample's time, not the adapter's clock.
			if want := time.UnixMilli(int64((sampleTime - 10) * 1000)); !m.Timestamp.Time.Equal(want) {
				t.Errorf("timestamp = %v, want %v", m.Timestamp.Time, want)
			}
			if m.Labels["app"] != "a" || m.Namespace != "ns" || m.Name != "a" {
				t.Errorf("metadata = %+v", m.ObjectMeta)
			}
			if len(m.Containers) != 2 || m.Containers[0].Name != "a-first" || m.Containers[1].Name != "b-second" {
				t.Errorf("containers = %+v, want sorted by name", m.Containers)
			}
		})
	}
}

func TestNodeMetrics(t *testing.T) {
	nodes := func(names ...string) []*corev1.Node {
		var out []*corev1.Node
		for _, nm := range names {
			out = append(out, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nm, Labels: map[string]string{"role": "worker"}}})
		}
		return out
	}
	tests := []struct {
		name      string
		nodes     []*corev1.Node
		cpu, mem  []promtest.Sample
		want      map[string]string
		wantQuery string
	}{
		{
			name:      "one node, one equality matcher",
			nodes:     nodes("n1"),
			cpu:       []promtest.Sample{n("n1", 1.5)},
			mem:       []promtest.Sample{n("n1", 4<<30)},
			want:      map[string]string{"n1": "cpu=1500m memory=4Gi"},
			wantQuery: `node="n1"`,
		},
		{
			name:      "a node without memory keeps cpu; a node without samples is left out",
			nodes:     nodes("n1", "n2", "n3"),
			cpu:       []promtest.Sample{n("n1", 0.25), n("n2", 2)},
			mem:       []promtest.Sample{n("n2", 1000)},
			want:      map[string]string{"n1": "cpu=250m", "n2": "cpu=2 memory=1k"},
			wantQuery: `node=~"n1|n2|n3"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, srv := setup(t, "  window: 1m", tt.cpu, tt.mem)
			got, err := p.GetNodeMetrics(tt.nodes...)
			if err != nil {
				t.Fatal(err)
			}
			sum := map[string]string{}
			for _, m := range got {
				sum[m.Name] = usage(m.Usage)
				if m.Labels["role"] != "worker" || m.Window.Duration != time.Minute {
					t.Errorf("%s: labels %v, window %v", m.Name, m.Labels, m.Window)
				}
			}
			if len(sum) != len(tt.want) {
				t.Errorf("got %v, want %v", sum, tt.want)
			}
			for k, w := range tt.want {
				if sum[k] != w {
					t.Errorf("%s: got %q, want %q", k, sum[k], w)
				}
			}
			reqs := srv.Requests("/api/v1/query")
			if len(reqs) != 2 {
				t.Fatalf("sent %d queries, want 2", len(reqs))
			}
			for _, r := range reqs {
				if q := r.Form.Get("query"); !strings.Contains(q, tt.wantQuery) || !strings.Contains(q, "by (node)") {
					t.Errorf("query %s, want %s grouped by node", q, tt.wantQuery)
				}
			}
		})
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name string
		resp promtest.Response
		set  func(*ruleset.Set) *ruleset.Set
		want string
	}{
		{
			name: "Prometheus failing fails the request, naming the query",
			resp: promtest.Response{Status: 503, ErrorType: "unavailable", Error: "down"},
			want: "resourceRules.cpu.containerQuery",
		},
		{
			name: "a query Prometheus rejects",
			resp: promtest.Response{Status: 400, ErrorType: "bad_data", Error: "parse error"},
			want: `resourceRules.cpu.containerQuery: Prometheus backend "default" failed the query`,
		},
		{
			name: "no resourceRules after a reload",
			set:  func(*ruleset.Set) *ruleset.Set { return ruleset.Empty() },
			want: "no resourceRules",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := promtest.New(t)
			srv.OnQuery(func(string) promtest.Response { return tt.resp })
			set := srv.Rules(t, strings.Replace(rulesTemplate, "WINDOW", "", 1), nil)
			if tt.set != nil {
				set = tt.set(set)
			}
			p := resourcemetrics.New(resourcemetrics.Options{Rules: func() *ruleset.Set { return set }})
			_, err := p.GetPodMetrics(pod("ns", "a"))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("pods: err = %v, want it to mention %q", err, tt.want)
			}
			_, err = p.GetNodeMetrics(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}})
			if err == nil {
				t.Error("nodes: no error")
			}
		})
	}
}

func TestQuantities(t *testing.T) {
	tests := []struct {
		name      string
		cpu       float64
		wantCPU   string
		wantMilli int64 // what the HPA reads (MilliValue rounds up)
		mem       float64
		wantMem   string
		wantBad   bool
	}{
		{name: "exact millicores", cpu: 0.25, wantCPU: "250m", wantMilli: 250, mem: 1024, wantMem: "1Ki"},
		{name: "0.3125 is 312.5m, not the truncated 312m", cpu: 0.3125, wantCPU: "312500u", wantMilli: 313, mem: 1.5, wantMem: "2"},
		{name: "1.001 is not read one millicore low", cpu: 1.001, wantCPU: "1001m", wantMilli: 1001, mem: 2.5, wantMem: "3"},
		{name: "half a nanocore rounds away from zero", cpu: 0.0000000005, wantCPU: "1n", wantMilli: 1, mem: 0.5, wantMem: "1"},
		{name: "zero", cpu: 0, wantCPU: "0", wantMilli: 0, mem: 0, wantMem: "0"},
		{name: "NaN is not a usage", cpu: math.NaN(), mem: math.NaN(), wantBad: true},
		{name: "negative is not a usage", cpu: -0.1, mem: -1, wantBad: true},
		{name: "large cpu keeps its digits at a coarser scale", cpu: 1e12, wantCPU: "1T", wantMilli: 1e15, mem: 4096, wantMem: "4Ki"},
		{name: "memory too large for whole bytes", cpu: math.NaN(), mem: 1e300, wantBad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cq, cok := resourcemetrics.CPU(tt.cpu)
			mq, mok := resourcemetrics.Memory(tt.mem)
			if tt.wantBad {
				if cok || mok {
					t.Errorf("got %v %v, want both rejected", cq.String(), mq.String())
				}
				return
			}
			if !cok || !mok {
				t.Fatalf("rejected: cpu %v, memory %v", cok, mok)
			}
			if cq.String() != tt.wantCPU || cq.MilliValue() != tt.wantMilli {
				t.Errorf("cpu = %s (%dm), want %s (%dm)", cq.String(), cq.MilliValue(), tt.wantCPU, tt.wantMilli)
			}
			if mq.String() != tt.wantMem {
				t.Errorf("memory = %s, want %s", mq.String(), tt.wantMem)
			}
			want := resource.MustParse(tt.wantCPU)
			if cq.Cmp(want) != 0 {
				t.Errorf("cpu %s != %s", cq.String(), want.String())
			}
		})
	}
}
