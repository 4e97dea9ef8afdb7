// Package objects answers "which objects exist" for metric requests from
// watch-fed caches, never with a LIST per request: a metadata informer per
// resource (names, namespaces and labels only), started on the first
// request for that resource and kept for the adapter's life.
package objects

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
)

// Lister finds objects. Implementations are safe for concurrent use.
type Lister interface {
	// Names returns the sorted names of the objects of gvr in namespace
	// ("" for cluster-scoped resources) whose labels match selector. The
	// slice may be shared with other callers: do not modify it.
	Names(ctx context.Context, gvr schema.GroupVersionResource, namespace string, selector labels.Selector) ([]string, error)
	// Exists reports whether the object exists.
	Exists(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (bool, error)
}

// SyncTimeout bounds how long a request waits for a resource's cache to
// fill the first time that resource is asked for.
const SyncTimeout = 20 * time.Second

type informerLister struct {
	factory metadatainformer.SharedInformerFactory
	stop    <-chan struct{}
	// namespace, when set, is the only namespace read (see
	// NewNamespacedInformerLister); transform: the factory has no
	// transform option of its own, so each informer gets SlimMetadata.
	namespace string
	transform bool

	mu        sync.Mutex
	informers map[schema.GroupVersionResource]*watched
}

type watched struct {
	lister   cache.GenericLister
	informer cache.SharedIndexInformer
	memo     *selectMemo

	mu      sync.Mutex
	lastErr error
}

var _ Lister = (*informerLister)(nil)

// NewInformerLister returns a Lister backed by metadata informers that run
// until ctx ends.
func NewInformerLister(ctx context.Context, client metadata.Interface) Lister {
	return &informerLister{
		factory:   metadatainformer.NewSharedInformerFactoryWithOptions(client, 0, metadatainformer.WithTransform(SlimMetadata)),
		stop:      ctx.Done(),
		informers: map[schema.GroupVersionResource]*watched{},
	}
}

// SlimMetadata keeps, of a cached object's metadata, what the adapter
// reads: name, namespace, uid, resourceVersion (PodMetrics are remembered
// by it) and labels (selectors, and PodMetrics serve them). Every pod of
// the cluster is cached, and managed fields, annotations and owner
// references are most of a pod's metadata.
func SlimMetadata(obj any) (any, error) {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		m.ObjectMeta = metav1.ObjectMeta{
			Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion, Labels: m.Labels,
		}
	}
	return obj, nil
}

func (l *informerLister) get(ctx context.Context, gvr schema.GroupVersionResource) (*watched, error) {
	l.mu.Lock()
	w, ok := l.informers[gvr]
	if !ok {
		gi := l.factory.ForResource(gvr)
		w = &watched{lister: gi.Lister(), informer: gi.Informer(), memo: newSelectMemo()}
		if l.transform {
			_ = w.informer.SetTransform(SlimMetadata)
		}
		_, _ = w.informer.AddEventHandler(w.memo.handler())
		_ = w.informer.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
			w.mu.Lock()
			w.lastErr = err
			w.mu.Unlock()
		})
		l.informers[gvr] = w
		l.factory.Start(l.stop)
	}
	l.mu.Unlock()
	if w.informer.HasSynced() {
		return w, nil
	}
	ctx, cancel := context.WithTimeout(ctx, SyncTimeout)
	defer cancel()
	for !w.informer.HasSynced() {
		w.mu.Lock()
		err := w.lastErr
		w.mu.Unlock()
		if err != nil && (apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsNotFound(err)) {
			return nil, fmt.Errorf("cannot watch %s to know which objects exist: %w", gvr.GroupResource(), err)
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return nil, fmt.Errorf("the cache of %s is not filled yet: %w", gvr.GroupResource(), err)
			}
			return nil, fmt.Errorf("the cache of %s is not filled yet: %w", gvr.GroupResource(), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return w, nil
}

func (l *informerLister) Names(ctx context.Context, gvr schema.GroupVersionResource, namespace string, selector labels.Selector) ([]string, error) {
	if err := l.inScope(gvr, namespace); err != nil {
		return nil, err
	}
	w, err := l.get(ctx, gvr)
	if err != nil {
		return nil, err
	}
	if selector == nil {
		selector = labels.Everything()
	}
	return w.memo.getNames(namespace, selector.String(), func() ([]string, error) {
		return listNames(w.informer.GetIndexer(), namespace, selector)
	})
}

// listNames lists the sorted names of the matching objects straight from
// the index, as the lister would, without its copy of the objects.
func listNames(indexer cache.Indexer, namespace string, selector labels.Selector) ([]string, error) {
	var names []string
	add := func(o any) {
		if n, ok := o.(interface{ GetName() string }); ok {
			names = append(names, n.GetName())
		}
	}
	var err error
	if namespace == "" {
		err = cache.ListAll(indexer, selector, add)
	} else {
		err = cache.ListAllByNamespace(indexer, namespace, selector, add)
	}
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	return names, nil
}

func (l *informerLister) Exists(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (bool, error) {
	if l.namespace != "" && namespace == "" && gvr == namespacesGVR && name == l.namespace {
		return true, nil // the namespace this adapter is installed for
	}
	if err := l.inScope(gvr, namespace); err != nil {
		return false, err
	}
	w, err := l.get(ctx, gvr)
	if err != nil {
		return false, err
	}
	if namespace == "" {
		_, err = w.lister.Get(name)
	} else {
		_, err = w.lister.ByNamespace(namespace).Get(name)
	}
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}
