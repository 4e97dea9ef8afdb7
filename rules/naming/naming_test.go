package naming

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tidal-autoscaler/tidal/rules/config"
	"github.com/tidal-autoscaler/tidal/rules/internal/wants"
)

func TestStaticMapperNormalize(t *testing.T) {
	tests := []struct {
		name            string
		group, resource string
		want            schema.GroupResource
		wantErr         bool
	}{
		{"singular", "", "pod", PodsResource, false},
		{"plural", "", "pods", PodsResource, false},
		{"kind", "", "Pod", PodsResource, false},
		{"group guessed", "", "deployment", schema.GroupResource{Group: "apps", Resource: "deployments"}, false},
		{"group given", "apps", "Deployment", schema.GroupResource{Group: "apps", Resource: "deployments"}, false},
		{"dotted group", "networking.k8s.io", "ingress", schema.GroupResource{Group: "networking.k8s.io", Resource: "ingresses"}, false},
		{"wrong group", "batch", "deployment", schema.GroupResource{}, true},
		{"unknown", "", "brand", schema.GroupResource{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Normalize(Builtin, tt.group, tt.resource)
			if tt.wantErr {
				if !meta.IsNoMatchError(err) {
					t.Fatalf("error = %v, want a no-match error", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Normalize(%q, %q) = %v, %v; want %v", tt.group, tt.resource, got, err, tt.want)
			}
		})
	}
}

func TestStaticMapperPriority(t *testing.T) {
	m := NewStaticMapper(
		StaticResource{"", "v1", "events", "event"},
		StaticResource{"events.k8s.io", "v1", "events", "event"},
	)
	tests := []struct {
		name  string
		input schema.GroupVersionResource
		want  string
		n     int
	}{
		{"core first", schema.GroupVersionResource{Resource: "event"}, "events", 2},
		{"group picks", schema.GroupVersionResource{Group: "events.k8s.io", Resource: "events"}, "events.events.k8s.io", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := m.ResourceFor(tt.input)
			if err != nil || got.GroupResource().String() != tt.want {
				t.Errorf("ResourceFor = %v, %v; want %s", got, err, tt.want)
			}
			all, _ := m.ResourcesFor(tt.input)
			if len(all) != tt.n {
				t.Errorf("ResourcesFor = %v, want %d", all, tt.n)
			}
		})
	}
	if s, err := m.ResourceSingularizer("Events"); err != nil || s != "event" {
		t.Errorf("ResourceSingularizer = %q, %v", s, err)
	}
	if _, err := m.ResourceSingularizer("nope"); err == nil {
		t.Error("ResourceSingularizer accepted an unknown resource")
	}
}

func mustResources(t *testing.T, m config.ResourceMapping) *Resources {
	t.Helper()
	r, err := NewResources(m, Builtin)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func ov(kv ...string) map[string]config.GroupResource {
	m := map[string]config.GroupResource{}
	for i := 0; i+2 < len(kv)+1; i += 3 {
		m[kv[i]] = config.GroupResource{Group: kv[i+1], Resource: kv[i+2]}
	}
	return m
}

var (
	deployments = schema.GroupResource{Group: "apps", Resource: "deployments"}
	ingresses   = schema.GroupResource{Group: "networking.k8s.io", Resource: "ingresses"}
	jobs        = schema.GroupResource{Group: "batch", Resource: "jobs"}
)

// Labels -> resources and back, for overrides and templates.
func TestResourcesBothWays(t *testing.T) {
	walkthrough := config.ResourceMapping{Overrides: ov("kubernetes_namespace", "", "namespace", "kubernetes_pod_name", "", "Pods")}
	tests := []struct {
		name      string
		mapping   config.ResourceMapping
		label     string
		resource  schema.GroupResource
		roundTrip bool // label <-> resource both ways; else the label maps to nothing
	}{
		{"override", walkthrough, "kubernetes_pod_name", PodsResource, true},
		{"override for namespaces", walkthrough, "kubernetes_namespace", NamespacesResource, true},
		{"override: other labels map to nothing", walkthrough, "pod", schema.GroupResource{}, false},
		{"template <<.Resource>>", config.ResourceMapping{Template: "<<.Resource>>"}, "pod", PodsResource, true},
		{"template guesses the group", config.ResourceMapping{Template: "<<.Resource>>"}, "deployment", deployments, true},
		{"template: the plural is not the label", config.ResourceMapping{Template: "<<.Resource>>"}, "pods", schema.GroupResource{}, false},
		{"template: Prometheus' job label is batch/v1 jobs, as in prometheus-adapter", config.ResourceMapping{Template: "<<.Resource>>"}, "job", jobs, true},
		{"template: instance names no built-in resource", config.ResourceMapping{Template: "<<.Resource>>"}, "instance", schema.GroupResource{}, false},
		{"template: __name__ is not mapped", config.ResourceMapping{Template: "<<.Resource>>"}, "__name__", schema.GroupResource{}, false},
		{"template: unknown resource", config.ResourceMapping{Template: "<<.Resource>>"}, "verb", schema.GroupResource{}, false},
		{"template with group", config.ResourceMapping{Template: "kube_<<.Group>>_<<.Resource>>"}, "kube_apps_deployment", deployments, true},
		{"template with a dotted group", config.ResourceMapping{Template: "kube_<<.Group>>_<<.Resource>>"}, "kube_networking_k8s_io_ingress", ingresses, true},
		{"template with group, core resource", config.ResourceMapping{Template: "kube_<<.Group>>_<<.Resource>>"}, "kube__pod", PodsResource, true},
		{"template with group: wrong group", config.ResourceMapping{Template: "kube_<<.Group>>_<<.Resource>>"}, "kube_batch_deployment", schema.GroupResource{}, false},
		{"template with conditional group, core", config.ResourceMapping{Template: "<<if .Group>><<.Group>>_<<end>><<.Resource>>"}, "pod", PodsResource, true},
		{"template with conditional group, apps", config.ResourceMapping{Template: "<<if .Group>><<.Group>>_<<end>><<.Resource>>"}, "apps_deployment", deployments, true},
		{"template literal text is not a regex", config.ResourceMapping{Template: "k.<<.Resource>>"}, "kxpod", schema.GroupResource{}, false},
		{"job as an explicit override", config.ResourceMapping{Template: "<<.Resource>>", Overrides: ov("job", "batch", "job")}, "job", jobs, true},
		{"override wins over the template for its resource", config.ResourceMapping{Template: "<<.Resource>>", Overrides: ov("pod_name", "", "pod")}, "pod", schema.GroupResource{}, false},
		{"override and template together", config.ResourceMapping{Template: "<<.Resource>>", Overrides: ov("pod_name", "", "pod")}, "pod_name", PodsResource, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustResources(t, tt.mapping)
			gr, ok := r.ResourceFor(tt.label)
			if ok != tt.roundTrip || gr != tt.resource {
				t.Fatalf("ResourceFor(%q) = %v, %v; want %v, %v", tt.label, gr, ok, tt.resource, tt.roundTrip)
			}
			if !tt.roundTrip {
				return
			}
			label, err := r.LabelFor(tt.resource)
			if err != nil || label != tt.label {
				t.Errorf("LabelFor(%v) = %q, %v; want %q", tt.resource, label, err, tt.label)
			}
		})
	}
}

// A template maps every label naming a resource the mapper knows, as
// prometheus-adapter's does: Prometheus' target labels are no exception.
func TestTemplateMapsTargetLabels(t *testing.T) {
	instances := schema.GroupResource{Group: "example.io", Resource: "instances"}
	withInstances := NewStaticMapper(append(append([]StaticResource(nil), BuiltinResources...),
		StaticResource{"example.io", "v1", "instances", "instance"})...)
	tests := []struct {
		name   string
		mapper ResourceMapper
		label  string
		want   schema.GroupResource // zero: maps to nothing
	}{
		{"job is batch/v1 jobs", Builtin, "job", jobs},
		{"instance maps nothing when no resource has that name", Builtin, "instance", schema.GroupResource{}},
		{"instance maps to a resource called instance", withInstances, "instance", instances},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewResources(config.ResourceMapping{Template: "<<.Resource>>"}, tt.mapper)
			if err != nil {
				t.Fatal(err)
			}
			gr, ok := r.ResourceFor(tt.label)
			if gr != tt.want || ok != (tt.want != schema.GroupResource{}) {
				t.Errorf("ResourceFor(%q) = %v, %v; want %v", tt.label, gr, ok, tt.want)
			}
		})
	}
}

func TestLabelForErrors(t *testing.T) {
	tests := []struct {
		name     string
		mapping  config.ResourceMapping
		resource schema.GroupResource
		want     string
	}{
		{"no override, no template", config.ResourceMapping{Overrides: ov("pod", "", "pod")}, NodesResource, "no override for it and no template"},
		{"unknown to the mapper", config.ResourceMapping{Template: "<<.Resource>>"}, schema.GroupResource{Group: "x.io", Resource: "brands"}, "no label maps to brands.x.io"},
		{"template renders a bad label", config.ResourceMapping{Template: "<<.Group>><<.Resource>>-x"}, PodsResource, "not a label name"},
		{"template label taken by an override", config.ResourceMapping{Template: "<<.Resource>>", Overrides: ov("node", "", "pod")}, NodesResource, "which an override maps to pods"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := mustResources(t, tt.mapping).LabelFor(tt.resource)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestNewResourcesErrors(t *testing.T) {
	tests := []struct {
		name    string
		mapping config.ResourceMapping
		want    string
	}{
		{"two labels, one resource", config.ResourceMapping{Overrides: ov("pod", "", "pod", "pod_name", "", "Pods")}, `overrides "pod" and "pod_name" both map to pods`},
		{"unknown resource", config.ResourceMapping{Overrides: ov("brand", "cheese.io", "brand")}, `unknown resource "brand" in group "cheese.io"`},
		{"bad template", config.ResourceMapping{Template: "<<.Resource"}, "resources.template"},
		{"template without resource", config.ResourceMapping{Template: "kube_<<.Group>>"}, "must use <<.Resource>>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewResources(tt.mapping, Builtin)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want %q", err, tt.want)
			}
		})
	}
}

// A series maps to one metric per resource among its labels, and is
// namespaced unless those are all cluster-scoped.
func TestResourcesForSeries(t *testing.T) {
	tests := []struct {
		name       string
		mapping    config.ResourceMapping
		labels     []string
		want       []string
		namespaced bool
	}{
		{"pod, service, job and namespace", config.ResourceMapping{Template: "<<.Resource>>"}, []string{"pod", "service", "namespace", "verb", "job", "instance"}, []string{"jobs.batch", "namespaces", "pods", "services"}, true},
		{"namespace only", config.ResourceMapping{Template: "<<.Resource>>"}, []string{"namespace", "le"}, []string{"namespaces"}, false},
		{"node only", config.ResourceMapping{Overrides: ov("instance", "", "node")}, []string{"instance", "job"}, []string{"nodes"}, false},
		{"persistent volume", config.ResourceMapping{Template: "<<.Resource>>"}, []string{"persistentvolume"}, []string{"persistentvolumes"}, false},
		{"nothing", config.ResourceMapping{Template: "<<.Resource>>"}, []string{"verb", "code"}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, namespaced := mustResources(t, tt.mapping).ResourcesForSeries(tt.labels)
			var names []string
			for _, gr := range got {
				names = append(names, gr.String())
			}
			if strings.Join(names, ",") != strings.Join(tt.want, ",") || namespaced != tt.namespaced {
				t.Errorf("ResourcesForSeries = %v, %v; want %v, %v", names, namespaced, tt.want, tt.namespaced)
			}
		})
	}
}

// Names of prometheus-adapter's documented rules.
func TestNamer(t *testing.T) {
	tests := []struct {
		name    string
		filters []config.SeriesFilter
		mapping config.NameMapping
		series  string
		keep    bool
		metric  string
	}{
		{"walkthrough", nil, config.NameMapping{Matches: "^(.*)_total", As: "${1}_per_second"}, "http_requests_total", true, "http_requests_per_second"},
		{"one group defaults to $1", nil, config.NameMapping{Matches: "^container_(.*)_seconds_total$"}, "container_cpu_usage_seconds_total", true, "cpu_usage"},
		{"no group defaults to $0", nil, config.NameMapping{}, "queue_depth", true, "queue_depth"},
		{"fixed name", nil, config.NameMapping{As: "cheesy_goodness"}, "cheddar", true, "cheesy_goodness"},
		{"named group", nil, config.NameMapping{Matches: "^(?P<base>.*)_total$", As: "${base}_rate"}, "x_total", true, "x_rate"},
		{"name.matches filters", nil, config.NameMapping{Matches: "^container_(.*)_total$"}, "container_memory_usage_bytes", false, ""},
		{"isNot filter", []config.SeriesFilter{{IsNot: "^container_.*_seconds_total$"}}, config.NameMapping{Matches: "^container_(.*)_total$"}, "container_cpu_usage_seconds_total", false, "cpu_usage_seconds"},
		{"is filter", []config.SeriesFilter{{Is: "^container_"}}, config.NameMapping{}, "node_load1", false, "node_load1"},
		{"$1_total is a named group, expanded as empty (as in Go and prometheus-adapter)", nil, config.NameMapping{Matches: "^(.*)_total$", As: "$1_per_second"}, "x_total", true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := NewNamer(tt.filters, tt.mapping)
			if err != nil {
				t.Fatal(err)
			}
			if got := n.Keep(tt.series); got != tt.keep {
				t.Errorf("Keep(%q) = %v, want %v", tt.series, got, tt.keep)
			}
			got, ok := n.MetricName(tt.series)
			if ok && got != tt.metric {
				t.Errorf("MetricName(%q) = %q, want %q", tt.series, got, tt.metric)
			}
			if !ok && tt.metric != "" {
				t.Errorf("MetricName(%q) did not match, want %q", tt.series, tt.metric)
			}
		})
	}
}

func TestNewNamerErrors(t *testing.T) {
	tests := []struct {
		name    string
		filters []config.SeriesFilter
		mapping config.NameMapping
		want    string
	}{
		{"two groups without as", nil, config.NameMapping{Matches: "^(a)_(b)$"}, "set name.as"},
		{"bad matches", nil, config.NameMapping{Matches: "("}, "name.matches"},
		{"bad filter", []config.SeriesFilter{{Is: "["}}, config.NameMapping{}, "seriesFilters[0]"},
		{"filter with both", []config.SeriesFilter{{Is: "a", IsNot: "b"}}, config.NameMapping{}, "exactly one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewNamer(tt.filters, tt.mapping)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want %q", err, tt.want)
			}
		})
	}
}

// testdata/good loads with no problem from Check either.
func TestCheckGoodFiles(t *testing.T) {
	files, _ := filepath.Glob("../testdata/good/*.yaml")
	if len(files) == 0 {
		t.Fatal("no good files")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			cfg, err := config.Load(f)
			if err != nil {
				t.Fatal(err)
			}
			if probs := Check(cfg, nil); len(probs) > 0 {
				t.Errorf("problems:\n%v", probs)
			}
		})
	}
}

// testdata/bad/naming-*.yaml: problems that need resource names, checked
// offline (nil mapper).
func TestCheckBadFiles(t *testing.T) {
	files, _ := filepath.Glob("../testdata/bad/naming-*.yaml")
	if len(files) == 0 {
		t.Fatal("no bad files")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Parse(f, data)
			if err != nil {
				t.Fatalf("config problems:\n%v", err)
			}
			wants.Check(t, f, data, Check(cfg, nil))
		})
	}
}

// With a mapper (the cluster's), unknown resources are problems.
func TestCheckWithMapper(t *testing.T) {
	const file = `rules:
- seriesQuery: 'cheddar{sharp="true"}'
  resources:
    overrides:
      namespace: {resource: namespace}
      brand: {group: "cheese.io", resource: "brand"}
  metricsQuery: count(cheddar{<<.LabelMatchers>>})
`
	cfg, err := config.Parse("cheese.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		mapper ResourceMapper
		want   string
	}{
		{"offline accepts custom resources", nil, ""},
		{"cluster without the CRD", Builtin, `cheese.yaml:6:45: rules[0].resources.overrides.brand: unknown resource "brand" in group "cheese.io"`},
		{"cluster with the CRD", NewStaticMapper(append([]StaticResource{{"cheese.io", "v1", "brands", "brand"}}, BuiltinResources...)...), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			probs := Check(cfg, tt.mapper)
			if tt.want == "" {
				if len(probs) > 0 {
					t.Errorf("problems:\n%v", probs)
				}
				return
			}
			if len(probs) != 1 || !strings.HasPrefix(probs[0].String(), tt.want) {
				t.Errorf("problems:\n%v\nwant one starting with %s", probs, tt.want)
			}
		})
	}
}
