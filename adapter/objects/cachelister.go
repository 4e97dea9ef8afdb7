package objects

import (
	"context"

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
}

var _ CacheLister = (*informerLister)(nil)

func (l *informerLister) GenericLister(ctx context.Context, gvr schema.GroupVersionResource) (cache.GenericLister, error) {
	w, err := l.get(ctx, gvr)
	if err != nil {
		return nil, err
	}
	return w.lister, nil
}
