package objects

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
)

// namespacesGVR is the Namespace resource: a metric of the namespace
// object itself names it with an empty namespace.
var namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// NewNamespacedInformerLister is NewInformerLister for an adapter that
// reads objects in one namespace only (--namespace), so that a Role there
// is all the RBAC its object reads need: its informers list and watch in
// that namespace, and a request for another namespace, or for objects
// that are not namespaced (nodes, a list across namespaces), gets an
// OutOfScopeError without any read. The namespace object itself is known
// to exist.
func NewNamespacedInformerLister(ctx context.Context, client metadata.Interface, namespace string) Lister {
	l := NewInformerLister(ctx, client).(*informerLister)
	if namespace != "" {
		l.namespace = namespace
		l.factory = metadatainformer.NewFilteredSharedInformerFactory(client, 0, namespace, nil)
		l.transform = true
	}
	return l
}

// OutOfScopeError answers a request the namespaced adapter does not read
// objects for. It is a 403 status (apiserver handlers answer errors with a
// Status method with their status); return it unwrapped.
type OutOfScopeError struct{ status *apierrors.StatusError }

func (e *OutOfScopeError) Error() string         { return e.status.Error() }
func (e *OutOfScopeError) Status() metav1.Status { return e.status.Status() }

// AsOutOfScope returns err's OutOfScopeError, if it has one.
func AsOutOfScope(err error) (*OutOfScopeError, bool) {
	var e *OutOfScopeError
	ok := errors.As(err, &e)
	return e, ok
}

// inScope returns an OutOfScopeError unless the objects of gvr in
// namespace ("" for cluster-scoped resources or every namespace) are read.
func (l *informerLister) inScope(gvr schema.GroupVersionResource, namespace string) error {
	if l.namespace == "" || namespace == l.namespace {
		return nil
	}
	what := fmt.Sprintf("%s in namespace %q are not read", gvr.Resource, namespace)
	if namespace == "" {
		what = fmt.Sprintf("%s outside a namespace (cluster-scoped objects, or lists across namespaces) are not read", gvr.Resource)
	}
	msg := fmt.Errorf("this adapter reads objects in namespace %q only (--namespace=%s): %s; ask for namespace %q, or install an adapter without --namespace to serve the whole cluster",
		l.namespace, l.namespace, what, l.namespace)
	return &OutOfScopeError{status: apierrors.NewForbidden(gvr.GroupResource(), "", msg)}
}
