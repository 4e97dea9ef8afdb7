package promql

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tidal-autoscaler/tidal/rules/config"
	"github.com/tidal-autoscaler/tidal/rules/naming"
)

// resourceLabeler names each resource's label after the resource, like the
// mock in prometheus-adapter's metrics_query_test.go, so the cases below
// can expect exactly what prometheus-adapter produces.
type resourceLabeler struct{}

func (resourceLabeler) LabelFor(gr schema.GroupResource) (string, error) { return gr.Resource, nil }

func mustSelector(t *testing.T, s string) labels.Selector {
	t.Helper()
	sel, err := labels.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

var groupResource = schema.GroupResource{Group: "group", Resource: "resource"}

// The cases of prometheus-adapter's TestBuildSelector, plus the rules of its
// documentation, with the output prometheus-adapter v0.12 gives.
func TestObjectsCompatible(t *testing.T) {
	tests := []struct {
		name     string
		template string
		req      ObjectRequest
		selector string
		want     string
	}{
		{"series", `series <<.Series>>`, ObjectRequest{Series: "foo", Resource: groupResource, Names: []string{"bar"}}, "", "series foo"},
		{"multiple LabelMatchers values", `<<.LabelMatchers>>`, ObjectRequest{Resource: groupResource, Names: []string{"bar", "baz"}}, "", `resource=~"bar|baz"`},
		{"single LabelMatchers value", `<<.LabelMatchers>>`, ObjectRequest{Resource: groupResource, Names: []string{"bar"}}, "", `resource="bar"`},
		{"LabelMatchers with additional metrics filter", `<<.LabelMatchers>>`, ObjectRequest{Resource: groupResource, Names: []string{"bar"}}, "metric1=value1", `metric1="value1",resource="bar"`},
		{"single LabelValuesByName value", `<<index .LabelValuesByName "resource">>`, ObjectRequest{Resource: groupResource, Names: []string{"bar"}}, "", "bar"},
		{"multiple LabelValuesByName values", `<<index .LabelValuesByName "resource">>`, ObjectRequest{Resource: groupResource, Names: []string{"bar", "baz"}}, "", "bar|baz"},
		{"multiple LabelValuesByName values with namespace", `<<index .LabelValuesByName "namespaces">> <<index .LabelValuesByName "resource">>`,
			ObjectRequest{Resource: groupResource, Namespace: "default", Names: []string{"bar", "baz"}}, "", "default bar|baz"},
		{"single GroupBy value", `<<.GroupBy>>`, ObjectRequest{Resource: groupResource, Names: []string{"bar"}}, "", "resource"},
		{"multiple GroupBy values", `<<.GroupBy>>`, ObjectRequest{Resource: groupResource, Names: []string{"bar"}, ExtraGroupBy: []string{"extra", "groups"}}, "", "resource,extra,groups"},
		{"single GroupBySlice value", `<<.GroupBySlice>>`, ObjectRequest{Resource: groupResource, Names: []string{"bar"}}, "", "[resource]"},
		{"multiple GroupBySlice values", `<<.GroupBySlice>>`, ObjectRequest{Resource: groupResource, Names: []string{"bar"}, ExtraGroupBy: []string{"extra", "groups"}}, "", "[resource extra groups]"},
		{"selector, then namespace, then the resource", `<<.LabelMatchers>>`,
			ObjectRequest{Resource: groupResource, Namespace: "ns", Names: []string{"a", "b"}}, "verb in (GET,POST),code", `code!="",verb=~"GET|POST",namespaces="ns",resource=~"a|b"`},
		{"LabelValuesByName of the selector", `<<.LabelValuesByName>>`,
			ObjectRequest{Resource: groupResource, Names: []string{"a"}}, "verb in (GET,POST),code", "map[code: resource:a verb:GET|POST]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, err := NewQuery(tt.template, resourceLabeler{})
			if err != nil {
				t.Fatal(err)
			}
			tt.req.MetricSelector = mustSelector(t, tt.selector)
			got, err := q.Objects(tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// The cases of prometheus-adapter's TestBuildExternalSelector.
func TestExternalCompatible(t *testing.T) {
	tests := []struct {
		name       string
		template   string
		namespaced bool
		req        ExternalRequest
		selector   string
		want       string
	}{
		{"series", `series <<.Series>>`, true, ExternalRequest{Series: "foo"}, "", "series foo"},
		{"GroupBy is empty", `[<<.GroupBy>>]`, true, ExternalRequest{}, "", "[]"},
		{"GroupBySlice is empty", `<<.GroupBySlice>>`, true, ExternalRequest{}, "", "[]"},
		{"single LabelMatchers value", `<<.LabelMatchers>>`, true, ExternalRequest{}, "foo=bar", `foo="bar"`},
		{"single LabelMatchers value with namespace", `<<.LabelMatchers>>`, true, ExternalRequest{Namespace: "default"}, "foo=bar", `foo="bar",namespaces="default"`},
		{"namespaced: false ignores the HPA's namespace", `<<.LabelMatchers>>`, false, ExternalRequest{Namespace: "default"}, "foo=bar", `foo="bar"`},
		{"multiple LabelMatchers value", `<<.LabelMatchers>>`, true, ExternalRequest{}, "foo=bar,qux in (bar,baz)", `foo="bar",qux=~"bar|baz"`},
		{"single LabelValuesByName value", `<<.LabelValuesByName>>`, true, ExternalRequest{}, "foo=bar", "map[foo:bar]"},
		{"LabelValuesByName with multiple values", `<<.LabelValuesByName>>`, true, ExternalRequest{}, "foo in (bar,baz)", "map[foo:bar|baz]"},
		{"namespace in LabelValuesByName", `<<index .LabelValuesByName "namespaces">>`, true, ExternalRequest{Namespace: "default"}, "", "default"},
		{"docs externalmetrics.md", `sum(<<.Series>>{<<.LabelMatchers>>}) by (name)`, true,
			ExternalRequest{Series: "queue_consumer_lag", Namespace: "default"}, "name=my-queue", `sum(queue_consumer_lag{name="my-queue",namespaces="default"}) by (name)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, err := NewExternalQuery(tt.template, resourceLabeler{}, tt.namespaced)
			if err != nil {
				t.Fatal(err)
			}
			tt.req.MetricSelector = mustSelector(t, tt.selector)
			got, err := q.External(tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func mustResources(t *testing.T, m config.ResourceMapping) *naming.Resources {
	t.Helper()
	r, err := naming.NewResources(m, naming.Builtin)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func overrides(kv ...string) map[string]config.GroupResource {
	m := map[string]config.GroupResource{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = config.GroupResource{Resource: kv[i+1]}
	}
	return m
}

// Whole rules from prometheus-adapter's documentation, with real label
// mappings, against the queries prometheus-adapter sends for the same
// requests.
func TestRulesFromDocs(t *testing.T) {
	walkthrough := config.ResourceMapping{Overrides: overrides("kubernetes_namespace", "namespace", "kubernetes_pod_name", "pod")}
	cadvisor := config.ResourceMapping{Overrides: overrides("namespace", "namespace", "pod", "pod", "node", "node")}
	tests := []struct {
		name      string
		resources config.ResourceMapping
		template  string
		req       ObjectRequest
		want      string
	}{
		{
			name:      "config-walkthrough http_requests_per_second for two pods",
			resources: walkthrough,
			template:  `sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)`,
			req:       ObjectRequest{Series: "http_requests_total", Resource: naming.PodsResource, Namespace: "production", Names: []string{"frontend-server-abcd-0123", "frontend-server-abcd-4567"}},
			want:      `sum(rate(http_requests_total{kubernetes_namespace="production",kubernetes_pod_name=~"frontend-server-abcd-0123|frontend-server-abcd-4567"}[2m])) by (kubernetes_pod_name)`,
		},
		{
			name:      "config-walkthrough for the namespace itself",
			resources: walkthrough,
			template:  `sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)`,
			req:       ObjectRequest{Series: "http_requests_total", Resource: naming.NamespacesResource, Names: []string{"production"}},
			want:      `sum(rate(http_requests_total{kubernetes_namespace="production"}[2m])) by (kubernetes_namespace)`,
		},
		{
			name:      "sample-config cAdvisor seconds rate",
			resources: config.ResourceMapping{Overrides: overrides("namespace", "namespace", "pod", "pod")},
			template:  `sum(rate(<<.Series>>{<<.LabelMatchers>>,container!="POD"}[2m])) by (<<.GroupBy>>)`,
			req:       ObjectRequest{Series: "container_cpu_usage_seconds_total", Resource: naming.PodsResource, Namespace: "somens", Names: []string{"pod1"}},
			want:      `sum(rate(container_cpu_usage_seconds_total{namespace="somens",pod="pod1",container!="POD"}[2m])) by (pod)`,
		},
		{
			name:      "template <<.Resource>> for deployments",
			resources: config.ResourceMapping{Template: "<<.Resource>>"},
			template:  `sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)`,
			req:       ObjectRequest{Series: "app_queue_length", Resource: schema.GroupResource{Group: "apps", Resource: "deployments"}, Namespace: "shop", Names: []string{"cart"}},
			want:      `sum(app_queue_length{namespace="shop",deployment="cart"}) by (deployment)`,
		},
		{
			name:      "resource rule containerQuery (metrics.k8s.io pods)",
			resources: cadvisor,
			template:  "sum by (<<.GroupBy>>) (irate(container_cpu_usage_seconds_total{<<.LabelMatchers>>,container!=\"\",pod!=\"\"}[4m]))",
			req:       ObjectRequest{Resource: naming.PodsResource, Namespace: "kube-system", Names: []string{"coredns-1", "coredns-2"}, ExtraGroupBy: []string{"container"}},
			want:      `sum by (pod,container) (irate(container_cpu_usage_seconds_total{namespace="kube-system",pod=~"coredns-1|coredns-2",container!="",pod!=""}[4m]))`,
		},
		{
			name:      "resource rule nodeQuery (metrics.k8s.io nodes)",
			resources: cadvisor,
			template:  "sum by (<<.GroupBy>>) (node_memory_working_set_bytes{<<.LabelMatchers>>})",
			req:       ObjectRequest{Resource: naming.NodesResource, Names: []string{"node-a"}},
			want:      `sum by (node) (node_memory_working_set_bytes{node="node-a"})`,
		},
		{
			// prometheus-adapter sends pod=~"web.1|web.2", where "." matches any character.
			name:      "deliberate difference: names are regex-escaped",
			resources: cadvisor,
			template:  `<<.LabelMatchers>> <<index .LabelValuesByName "pod">>`,
			req:       ObjectRequest{Resource: naming.PodsResource, Namespace: "ns", Names: []string{"web.1", "web.2"}},
			want:      `namespace="ns",pod=~"web\\.1|web\\.2" web\\.1|web\\.2`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, err := NewQuery(tt.template, mustResources(t, tt.resources))
			if err != nil {
				t.Fatal(err)
			}
			got, err := q.Objects(tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			if _, err := promParser.ParseExpr(got); err != nil && !strings.Contains(tt.template, "LabelValuesByName") {
				t.Errorf("rendered query does not parse: %v", err)
			}
		})
	}
}

func TestObjectsErrors(t *testing.T) {
	pods := config.ResourceMapping{Overrides: overrides("namespace", "namespace", "pod", "pod")}
	tests := []struct {
		name      string
		resources *config.ResourceMapping
		template  string
		req       ObjectRequest
		selector  string
		want      string
		selErr    bool
	}{
		{name: "no names", resources: &pods, req: ObjectRequest{Resource: naming.PodsResource}, want: "no object names"},
		{name: "empty name", resources: &pods, req: ObjectRequest{Resource: naming.PodsResource, Names: []string{"a", ""}}, want: `invalid object name ""`},
		{name: "invalid UTF-8 name", resources: &pods, req: ObjectRequest{Resource: naming.PodsResource, Names: []string{"\xff"}}, want: "invalid object name"},
		{name: "invalid UTF-8 namespace", resources: &pods, req: ObjectRequest{Resource: naming.PodsResource, Namespace: "\xfe", Names: []string{"a"}}, want: "invalid namespace"},
		{name: "unmapped resource", resources: &pods, req: ObjectRequest{Resource: naming.NodesResource, Names: []string{"a"}}, want: "no label maps to nodes"},
		{name: "no resources at all", req: ObjectRequest{Resource: naming.PodsResource, Names: []string{"a"}}, want: "the rule has no resources"},
		{name: "bad extra group-by label", resources: &pods, req: ObjectRequest{Resource: naming.PodsResource, Names: []string{"a"}, ExtraGroupBy: []string{"con-tainer"}}, want: `group-by label "con-tainer"`},
		{name: "UTF-8 series name from discovery", resources: &pods, req: ObjectRequest{Series: `x{a="b"} or vector(1)`, Resource: naming.PodsResource, Names: []string{"a"}}, want: "not a classic Prometheus metric name"},
		{name: "gt selector", resources: &pods, req: ObjectRequest{Resource: naming.PodsResource, Names: []string{"a"}}, selector: "code>499", want: "operator gt", selErr: true},
		{name: "template fails", resources: &pods, template: `<<index .GroupBySlice 5>>`, req: ObjectRequest{Resource: naming.PodsResource, Names: []string{"a"}}, want: "index out of range"},
		{name: "template renders nothing", resources: &pods, template: `<<if false>>x<<end>>`, req: ObjectRequest{Resource: naming.PodsResource, Names: []string{"a"}}, want: "empty query"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var labeler Labeler
			if tt.resources != nil {
				labeler = mustResources(t, *tt.resources)
			}
			text := tt.template
			if text == "" {
				text = `sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)`
			}
			q, err := NewQuery(text, labeler)
			if err != nil {
				t.Fatal(err)
			}
			if tt.req.Series == "" {
				tt.req.Series = "m"
			}
			tt.req.MetricSelector = mustSelector(t, tt.selector)
			_, err = q.Objects(tt.req)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one containing %q", err, tt.want)
			}
			var se *SelectorError
			if errors.As(err, &se) != tt.selErr {
				t.Errorf("SelectorError = %v, want %v (%v)", !tt.selErr, tt.selErr, err)
			}
		})
	}
}

func TestNewQueryBadTemplate(t *testing.T) {
	if _, err := NewQuery(`sum(<<.Series)`, resourceLabeler{}); err == nil {
		t.Error("NewQuery accepted an unclosed action")
	}
}
