package objects

import (
	"cmp"
	"context"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// CacheLister is implemented by the Lister NewInformerLister returns: it
// hands out a resource's watch cache itself, for code that wants a
// cache.GenericLister (the metrics.k8s.io storage lists pods and nodes
// through one).
type CacheLister interface {
	// GenericLister returns the metadata cache of gvr (objects are
	// *metav1.PartialObjectMetadata), starting its informer if needed and
	// waiting for its first fill as Names does.
	GenericLister(ctx context.Context, gvr schema.GroupVersionResource) (cache.GenericLister, error)
	// Select returns the objects of gvr in namespace ("" for all) whose
	// labels match selector, sorted by namespace and name. The answer is
	// remembered until an object of the namespace changes; the slice and
	// the objects are shared: do not modify them.
	Select(ctx context.Context, gvr schema.GroupVersionResource, namespace string, selector labels.Selector) ([]*metav1.PartialObjectMetadata, error)
	// InScope returns an *OutOfScopeError when the objects of gvr in
	// namespace ("" for cluster-scoped ones, or every namespace) are not
	// read (see NewNamespacedInformerLister), nil when they are.
	InScope(gvr schema.GroupVersionResource, namespace string) error
}

var _ CacheLister = (*informerLister)(nil)

func (l *informerLister) InScope(gvr schema.GroupVersionResource, namespace string) error {
	return l.inScope(gvr, namespace)
}

func (l *informerLister) GenericLister(ctx context.Context, gvr schema.GroupVersionResource) (cache.GenericLister, error) {
	w, err := l.get(ctx, gvr)
	if err != nil {
		return nil, err
	}
	return w.lister, nil
}

func (l *informerLister) Select(ctx context.Context, gvr schema.GroupVersionResource, namespace string, selector labels.Selector) ([]*metav1.PartialObjectMetadata, error) {
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
	return w.memo.getObjects(namespace, selector.String(), func() ([]*metav1.PartialObjectMetadata, error) {
		var objs []*metav1.PartialObjectMetadata
		add := func(o any) {
			if p, ok := o.(*metav1.PartialObjectMetadata); ok {
				objs = append(objs, p)
			}
		}
		var err error
		if namespace == "" {
			err = cache.ListAll(w.informer.GetIndexer(), selector, add)
		} else {
			err = cache.ListAllByNamespace(w.informer.GetIndexer(), namespace, selector, add)
		}
		slices.SortFunc(objs, func(a, b *metav1.PartialObjectMetadata) int {
			return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
		})
		return objs, err
	})
}
