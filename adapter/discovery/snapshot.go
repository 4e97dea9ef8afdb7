package discovery

import (
	"sort"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tidal-autoscaler/tidal/adapter/prom"
	"github.com/tidal-autoscaler/tidal/adapter/ruleset"
	"github.com/tidal-autoscaler/tidal/rules/naming"
)

// Binding says how to answer for a metric: which rule, and which series
// name fills the rule's .Series.
type Binding struct {
	Rule   *ruleset.Rule
	Series string
}

// CustomMetric is one custom metric served for one resource.
type CustomMetric struct {
	Resource schema.GroupResource
	Name     string
	// Namespaced is the resource's scope as naming knows it: false for
	// namespaces, nodes and persistentvolumes (as prometheus-adapter
	// lists them), whatever other labels the series have; the server
	// asks the cluster for other resources' scope.
	Namespaced bool
}

type customKey struct {
	gr   schema.GroupResource
	name string
}

// Snapshot is an immutable map of the served metrics.
type Snapshot struct {
	custom       map[customKey]Binding
	customNames  map[string]bool
	customList   []CustomMetric
	external     map[string]Binding
	externalList []string
}

func emptySnapshot() *Snapshot {
	return &Snapshot{custom: map[customKey]Binding{}, customNames: map[string]bool{}, external: map[string]Binding{}}
}

// Custom returns how to answer metric name for resource gr (normalised).
func (s *Snapshot) Custom(gr schema.GroupResource, name string) (Binding, bool) {
	b, ok := s.custom[customKey{gr, name}]
	return b, ok
}

// HasCustomName reports whether any resource has a custom metric name.
func (s *Snapshot) HasCustomName(name string) bool { return s.customNames[name] }

// CustomMetrics lists the custom metrics, sorted.
func (s *Snapshot) CustomMetrics() []CustomMetric { return s.customList }

// External returns how to answer external metric name.
func (s *Snapshot) External(name string) (Binding, bool) {
	b, ok := s.external[name]
	return b, ok
}

// ExternalMetrics lists the external metric names, sorted.
func (s *Snapshot) ExternalMetrics() []string { return s.externalList }

// metricName is the metric rule r serves for series, if its filters keep
// the series and its name rule gives a non-empty name.
func metricName(r *ruleset.Rule, series string) (string, bool) {
	if !r.Namer.Keep(series) {
		return "", false
	}
	name, ok := r.Namer.MetricName(series)
	return name, ok && name != ""
}

// build maps the discovered shapes through the rules. When several rules
// or series give the same metric, the first rule in the file wins, and
// within a rule the first series name in sorted order.
func build(set *ruleset.Set, results map[queryKey][]prom.Shape) *Snapshot {
	s := emptySnapshot()
	for _, r := range set.Custom {
		for _, sh := range results[queryKey{r.Client, r.SeriesQuery}] {
			name, ok := metricName(r, sh.Name)
			if !ok {
				continue
			}
			resources, _ := r.Resources.ResourcesForSeries(sh.Labels)
			for _, gr := range resources {
				k := customKey{gr, name}
				if _, dup := s.custom[k]; !dup {
					s.custom[k] = Binding{Rule: r, Series: sh.Name}
				}
				s.customNames[name] = true
			}
		}
	}
	for k := range s.custom {
		s.customList = append(s.customList, CustomMetric{Resource: k.gr, Name: k.name, Namespaced: !naming.IsClusterScoped(k.gr)})
	}
	sort.Slice(s.customList, func(i, j int) bool {
		a, b := s.customList[i], s.customList[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Resource.String() < b.Resource.String()
	})
	for _, r := range set.External {
		for _, sh := range results[queryKey{r.Client, r.SeriesQuery}] {
			name, ok := metricName(r, sh.Name)
			if !ok {
				continue
			}
			if _, dup := s.external[name]; !dup {
				s.external[name] = Binding{Rule: r, Series: sh.Name}
				s.externalList = append(s.externalList, name)
			}
		}
	}
	sort.Strings(s.externalList)
	return s
}
