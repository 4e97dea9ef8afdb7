package resourcemetrics

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericapiserver "k8s.io/apiserver/pkg/server"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/metrics/pkg/apis/metrics"
	metricsv1 "k8s.io/metrics/pkg/apis/metrics/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	msapi "sigs.k8s.io/metrics-server/pkg/api"

	"github.com/tidal-autoscaler/tidal/adapter/internal/encodecache"
	"github.com/tidal-autoscaler/tidal/adapter/objects"
)

var (
	podsGVR  = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	nodesGVR = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
)

// Scheme holds the metrics.k8s.io types; give it to the OpenAPI
// definition namer.
var Scheme = msapi.Scheme

// Install serves metrics.k8s.io v1 and v1beta1 on server from p, listing
// pods and nodes from l's watch caches (which must be a CacheLister, as
// objects.NewInformerLister's is). ctx bounds the first fill of those
// caches, started here in the background.
func Install(ctx context.Context, server *genericapiserver.GenericAPIServer, p *Provider, l objects.Lister) error {
	cl, ok := l.(objects.CacheLister)
	if !ok {
		return fmt.Errorf("the object lister %T has no watch caches to list pods and nodes from", l)
	}
	pods := &syncedLister{ctx: ctx, l: cl, gvr: podsGVR}
	nodes := &syncedLister{ctx: ctx, l: cl, gvr: nodesGVR}
	// An adapter that reads one namespace (--namespace) cannot see nodes:
	// it serves PodMetrics only, and discovery says so.
	servesNodes := cl.InScope(nodesGVR, "") == nil
	// Fill the caches now, so the first request does not wait for them.
	go func() { _, _ = pods.lister() }()
	if servesNodes {
		go func() { _, _ = nodes.lister() }()
	}
	encodings := encodecache.New[metrics.PodMetricsList]()
	info := msapi.Build(&podStorage{metrics: p, pods: pods, encodings: encodings}, &nodeStorage{metrics: p, nodes: nodeLister{nodes}})
	if !servesNodes {
		for _, storage := range info.VersionedResourcesStorageMap {
			delete(storage, "nodes")
		}
	}
	// v1 (KEP-5207; kubectl top asks for it first) is v1beta1 under another
	// name: the same storage, converted by the scheme.
	if _, ok := info.VersionedResourcesStorageMap[metricsv1.SchemeGroupVersion.Version]; !ok {
		info.VersionedResourcesStorageMap[metricsv1.SchemeGroupVersion.Version] = info.VersionedResourcesStorageMap[metricsv1beta1.SchemeGroupVersion.Version]
	}
	info.NegotiatedSerializer = encodings.NegotiatedSerializer(info.NegotiatedSerializer)
	info.PrioritizedVersions = served(info)
	return server.InstallAPIGroup(&info)
}

// served keeps, in order, the group's versions that have storage.
// Discovery names the first prioritized version as the preferred one, so
// it must be one that is served.
func served(info genericapiserver.APIGroupInfo) []schema.GroupVersion {
	var out []schema.GroupVersion
	for _, gv := range info.PrioritizedVersions {
		if len(info.VersionedResourcesStorageMap[gv.Version]) > 0 {
			out = append(out, gv)
		}
	}
	return out
}

// syncedLister is a cache.GenericLister that waits for its cache's first
// fill (up to objects.SyncTimeout) and reports why it cannot be filled,
// instead of answering from an empty cache.
type syncedLister struct {
	ctx context.Context
	l   objects.CacheLister
	gvr schema.GroupVersionResource
}

func (s *syncedLister) lister() (cache.GenericLister, error) {
	return s.l.GenericLister(s.ctx, s.gvr)
}

// Select lists the matching objects from the remembered answers of
// objects.CacheLister.Select.
func (s *syncedLister) Select(namespace string, selector labels.Selector) ([]*metav1.PartialObjectMetadata, error) {
	return s.l.Select(s.ctx, s.gvr, namespace, selector)
}

func (s *syncedLister) List(selector labels.Selector) ([]runtime.Object, error) {
	l, err := s.lister()
	if err != nil {
		return nil, err
	}
	return l.List(selector)
}

func (s *syncedLister) Get(name string) (runtime.Object, error) {
	l, err := s.lister()
	if err != nil {
		return nil, err
	}
	return l.Get(name)
}

func (s *syncedLister) ByNamespace(namespace string) cache.GenericNamespaceLister {
	return syncedNamespaceLister{s: s, namespace: namespace}
}

type syncedNamespaceLister struct {
	s         *syncedLister
	namespace string
}

func (n syncedNamespaceLister) List(selector labels.Selector) ([]runtime.Object, error) {
	if err := n.s.l.InScope(n.s.gvr, n.namespace); err != nil {
		return nil, err
	}
	l, err := n.s.lister()
	if err != nil {
		return nil, err
	}
	return l.ByNamespace(n.namespace).List(selector)
}

func (n syncedNamespaceLister) Get(name string) (runtime.Object, error) {
	if err := n.s.l.InScope(n.s.gvr, n.namespace); err != nil {
		return nil, err
	}
	l, err := n.s.lister()
	if err != nil {
		return nil, err
	}
	return l.ByNamespace(n.namespace).Get(name)
}

// nodeLister serves the node metadata cache as the NodeLister
// metrics-server's storage wants: Nodes with only their ObjectMeta, which
// is all it reads (names, labels for selectors, field selectors).
type nodeLister struct{ s *syncedLister }

var _ corelisters.NodeLister = nodeLister{}

func (n nodeLister) List(selector labels.Selector) ([]*corev1.Node, error) {
	objs, err := n.s.List(selector)
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Node, 0, len(objs))
	for _, o := range objs {
		if node := asNode(o); node != nil {
			out = append(out, node)
		}
	}
	return out, nil
}

func (n nodeLister) Get(name string) (*corev1.Node, error) {
	o, err := n.s.Get(name)
	if err != nil {
		return nil, err
	}
	node := asNode(o)
	if node == nil {
		return nil, fmt.Errorf("node %s: unexpected cache object %T", name, o)
	}
	return node, nil
}

func asNode(o runtime.Object) *corev1.Node {
	switch m := o.(type) {
	case *metav1.PartialObjectMetadata:
		return &corev1.Node{ObjectMeta: m.ObjectMeta}
	case *corev1.Node:
		return m
	}
	return nil
}
