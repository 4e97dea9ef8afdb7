package provider

import (
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apidiscovery "k8s.io/apiserver/pkg/endpoints/discovery"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/tidal-autoscaler/tidal/adapter/discovery"
)

// What API discovery lists: the metrics of the latest discovery, each
// with its scope.

// ListAllMetrics lists the custom metrics of the latest discovery, each
// with its resource's scope (the Namespaced that API discovery shows):
// the cluster's, or where the cluster cannot say, naming's (namespaces,
// nodes and persistentvolumes are cluster-scoped). So namespaces/<metric>
// is never namespaced, whatever other labels its series have.
func (p *Provider) ListAllMetrics() []cmprovider.CustomMetricInfo {
	snap := p.o.Discovery.Snapshot()
	ms := snap.CustomMetrics()
	out := make([]cmprovider.CustomMetricInfo, len(ms))
	for i, m := range ms {
		out[i] = cmprovider.CustomMetricInfo{GroupResource: m.Resource, Namespaced: p.scopes.namespaced(p.o.Mapper, snap, m.Resource, m.Namespaced), Metric: m.Name}
	}
	return out
}

// scopes remembers, per discovery snapshot, whether each resource is
// namespaced according to the cluster.
type scopes struct {
	mu   sync.Mutex
	snap *discovery.Snapshot
	m    map[schema.GroupResource]bool
}

// namespaced is gr's scope from mapper, or fallback when the mapper
// cannot say (not remembered: the next listing asks again).
func (s *scopes) namespaced(mapper meta.RESTMapper, snap *discovery.Snapshot, gr schema.GroupResource, fallback bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.snap != snap {
		s.snap, s.m = snap, map[schema.GroupResource]bool{}
	}
	if v, ok := s.m[gr]; ok {
		return v
	}
	gvr, err := mapper.ResourceFor(gr.WithVersion(""))
	if err != nil {
		return fallback
	}
	_, clustered, err := kindAndScope(mapper, gvr)
	if err != nil {
		return fallback
	}
	s.m[gr] = !clustered
	return !clustered
}

// ListAllExternalMetrics lists the external metrics of the latest discovery.
func (p *Provider) ListAllExternalMetrics() []cmprovider.ExternalMetricInfo {
	names := p.o.Discovery.Snapshot().ExternalMetrics()
	out := make([]cmprovider.ExternalMetricInfo, len(names))
	for i, n := range names {
		out[i] = cmprovider.ExternalMetricInfo{Metric: n}
	}
	return out
}

// ExternalResources lists the external metrics for API discovery, each
// namespaced unless its rule has `resources.namespaced: false` (its query
// then ignores the request's namespace). custom-metrics-apiserver's own
// lister lists every external metric as namespaced.
func (p *Provider) ExternalResources() apidiscovery.APIResourceLister {
	return externalResources{p}
}

type externalResources struct{ p *Provider }

func (e externalResources) ListAPIResources() []metav1.APIResource {
	snap := e.p.o.Discovery.Snapshot()
	names := snap.ExternalMetrics()
	out := make([]metav1.APIResource, len(names))
	for i, n := range names {
		b, _ := snap.External(n)
		out[i] = metav1.APIResource{
			Name:       n,
			Namespaced: b.Rule.Query.Namespaced(),
			Kind:       "ExternalMetricValueList",
			Verbs:      metav1.Verbs{"get"},
		}
	}
	return out
}
