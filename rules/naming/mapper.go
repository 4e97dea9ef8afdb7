// Package naming maps between Prometheus and Kubernetes names: series
// labels <-> group-resources (a rule's overrides and template, in both
// directions) and series names -> API metric names (seriesFilters and
// name.matches/as). Everything here is a pure function of the rule and a
// ResourceMapper.
package naming

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ResourceMapper normalises resource names ("pod", "pods" and "Pod" are the
// same resource) and singularises them. It is the part of
// k8s.io/apimachinery's meta.RESTMapper that naming needs, so a discovery
// based RESTMapper can be passed as is; StaticMapper serves tests and
// offline checks.
type ResourceMapper interface {
	// ResourceFor returns the one resource a partial one (any of group,
	// version, singular or plural name) refers to, in priority order.
	ResourceFor(input schema.GroupVersionResource) (schema.GroupVersionResource, error)
	// ResourcesFor returns every resource a partial one may refer to.
	ResourcesFor(input schema.GroupVersionResource) ([]schema.GroupVersionResource, error)
	// ResourceSingularizer returns the singular name of a plural resource.
	ResourceSingularizer(resource string) (singular string, err error)
}

var _ ResourceMapper = meta.RESTMapper(nil)

// StaticResource is one resource known to a StaticMapper.
type StaticResource struct {
	Group    string
	Version  string
	Resource string // plural, lower case
	Singular string // lower case
}

// StaticMapper is a fixed ResourceMapper. Lookups are case-insensitive and
// accept the singular or plural name. When several resources match (a
// resource name without a group), the earliest in the list wins, the way
// the API server's discovery priority puts the core group first.
type StaticMapper struct {
	resources []StaticResource
}

// NewStaticMapper returns a mapper knowing exactly the given resources.
func NewStaticMapper(resources ...StaticResource) *StaticMapper {
	return &StaticMapper{resources: resources}
}

// BuiltinResources are common built-in Kubernetes resources, core group first.
var BuiltinResources = []StaticResource{
	{"", "v1", "pods", "pod"},
	{"", "v1", "nodes", "node"},
	{"", "v1", "namespaces", "namespace"},
	{"", "v1", "services", "service"},
	{"", "v1", "endpoints", "endpoints"},
	{"", "v1", "persistentvolumes", "persistentvolume"},
	{"", "v1", "persistentvolumeclaims", "persistentvolumeclaim"},
	{"", "v1", "replicationcontrollers", "replicationcontroller"},
	{"", "v1", "configmaps", "configmap"},
	{"", "v1", "secrets", "secret"},
	{"", "v1", "serviceaccounts", "serviceaccount"},
	{"apps", "v1", "deployments", "deployment"},
	{"apps", "v1", "statefulsets", "statefulset"},
	{"apps", "v1", "daemonsets", "daemonset"},
	{"apps", "v1", "replicasets", "replicaset"},
	{"batch", "v1", "jobs", "job"},
	{"batch", "v1", "cronjobs", "cronjob"},
	{"autoscaling", "v2", "horizontalpodautoscalers", "horizontalpodautoscaler"},
	{"networking.k8s.io", "v1", "ingresses", "ingress"},
	{"networking.k8s.io", "v1", "networkpolicies", "networkpolicy"},
	{"discovery.k8s.io", "v1", "endpointslices", "endpointslice"},
	{"policy", "v1", "poddisruptionbudgets", "poddisruptionbudget"},
	{"storage.k8s.io", "v1", "storageclasses", "storageclass"},
}

// Builtin knows BuiltinResources; `tidal rules check` uses it when there is
// no cluster to ask.
var Builtin = NewStaticMapper(BuiltinResources...)

func (m *StaticMapper) ResourcesFor(input schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	name := strings.ToLower(input.Resource)
	var out []schema.GroupVersionResource
	for _, r := range m.resources {
		if (name == r.Resource || name == r.Singular) &&
			(input.Group == "" || input.Group == r.Group) &&
			(input.Version == "" || input.Version == r.Version) {
			out = append(out, schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource})
		}
	}
	if len(out) == 0 {
		return nil, &meta.NoResourceMatchError{PartialResource: input}
	}
	return out, nil
}

func (m *StaticMapper) ResourceFor(input schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	all, err := m.ResourcesFor(input)
	if err != nil {
		return schema.GroupVersionResource{}, err
	}
	return all[0], nil
}

func (m *StaticMapper) ResourceSingularizer(resource string) (string, error) {
	name := strings.ToLower(resource)
	for _, r := range m.resources {
		if name == r.Resource || name == r.Singular {
			return r.Singular, nil
		}
	}
	return "", &meta.NoResourceMatchError{PartialResource: schema.GroupVersionResource{Resource: resource}}
}

// Normalize returns the group-resource group/resource refers to, e.g.
// {"", "Pod"} -> {"", "pods"} and {"", "deployment"} -> {"apps", "deployments"}.
func Normalize(mapper ResourceMapper, group, resource string) (schema.GroupResource, error) {
	gvr, err := mapper.ResourceFor(schema.GroupVersionResource{Group: group, Resource: resource})
	if err != nil {
		return schema.GroupResource{}, err
	}
	return gvr.GroupResource(), nil
}

// Well-known group-resources.
var (
	NamespacesResource        = schema.GroupResource{Resource: "namespaces"}
	NodesResource             = schema.GroupResource{Resource: "nodes"}
	PodsResource              = schema.GroupResource{Resource: "pods"}
	PersistentVolumesResource = schema.GroupResource{Resource: "persistentvolumes"}
)

// IsClusterScoped reports whether a metric about gr is not namespaced: gr
// is namespaces, nodes or persistentvolumes. A series is namespaced when it
// maps to any other resource.
func IsClusterScoped(gr schema.GroupResource) bool {
	return gr == NamespacesResource || gr == NodesResource || gr == PersistentVolumesResource
}
