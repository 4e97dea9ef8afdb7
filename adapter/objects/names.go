package objects

import (
	"maps"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// Each table of remembered answers is bounded, as selectors come from
// requests: at most maxEntries answers holding maxItems names or objects
// in all (a few MiB). When full, a table starts over.
const (
	maxEntries = 4096
	maxItems   = 1 << 18
)

// selectMemo remembers which objects of a namespace a selector matches.
// Listing by selector walks every object of the namespace, and the HPA
// asks the same question every sync.
//
//   - Names answers stay until an object of the namespace is added,
//     deleted or relabelled: pods' frequent status updates change neither
//     names nor labels.
//   - Select answers (the objects themselves) stay until any object of
//     the namespace changes.
//
// The informer's handler counts a namespace's changes after its cache has
// changed, and an answer is stored with the count read before listing, so
// an answer is never kept past a change it did not see. An answer may be
// served in the moment between a cache change and the handler's count:
// the same lag a watch-fed cache always has.
type selectMemo struct {
	mu sync.Mutex
	// relabels counts adds, deletes and label changes per namespace;
	// changes counts every event. Key "" counts every namespace's events
	// (for answers across namespaces). epoch counts events of objects
	// whose namespace is unknown, which invalidate every answer.
	relabels, changes map[string]uint64
	epoch             uint64
	names             table[[]string]
	objects           table[[]*metav1.PartialObjectMetadata]
}

// table holds remembered answers and how many items they hold in all.
type table[S any] struct {
	entries map[selectKey]remembered[S]
	items   int
}

type selectKey struct{ namespace, selector string }

type remembered[S any] struct {
	gen uint64
	v   S
}

func newSelectMemo() *selectMemo {
	return &selectMemo{
		relabels: map[string]uint64{}, changes: map[string]uint64{},
		names:   table[[]string]{entries: map[selectKey]remembered[[]string]{}},
		objects: table[[]*metav1.PartialObjectMetadata]{entries: map[selectKey]remembered[[]*metav1.PartialObjectMetadata]{}},
	}
}

// getNames returns the remembered names, or lists and remembers them.
func (m *selectMemo) getNames(namespace, selector string, list func() ([]string, error)) ([]string, error) {
	return lookup(m, &m.names, m.relabels, selectKey{namespace, selector}, list)
}

// getObjects returns the remembered objects, or lists and remembers them.
func (m *selectMemo) getObjects(namespace, selector string, list func() ([]*metav1.PartialObjectMetadata, error)) ([]*metav1.PartialObjectMetadata, error) {
	return lookup(m, &m.objects, m.changes, selectKey{namespace, selector}, list)
}

func lookup[S ~[]E, E any](m *selectMemo, t *table[S], counts map[string]uint64, key selectKey, list func() (S, error)) (S, error) {
	m.mu.Lock()
	gen := m.epoch + counts[key.namespace]
	if e, ok := t.entries[key]; ok && e.gen == gen {
		m.mu.Unlock()
		return e.v, nil
	}
	m.mu.Unlock()
	v, err := list()
	if err != nil {
		return v, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old, ok := t.entries[key]
	if ok && old.gen >= gen {
		return v, nil // a concurrent caller stored one as new
	}
	if ok {
		t.items -= len(old.v)
	}
	if len(t.entries) >= maxEntries || t.items+len(v) > maxItems {
		clear(t.entries)
		t.items = 0
	}
	if len(v) > maxItems {
		return v, nil // too large to keep
	}
	t.entries[key] = remembered[S]{gen: gen, v: v}
	t.items += len(v)
	return v, nil
}

// changed counts an event of obj (an informer's object, or its
// DeletedFinalStateUnknown); relabel says whether it can change which
// objects a selector matches.
func (m *selectMemo) changed(obj any, relabel bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	o, err := meta.Accessor(obj)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.epoch++ // which namespace is unknown: invalidate every answer
		return
	}
	for _, ns := range []string{o.GetNamespace(), ""} {
		m.changes[ns]++
		if relabel {
			m.relabels[ns]++
		}
	}
}

// handler is the informer event handler that keeps the memo current.
func (m *selectMemo) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { m.changed(obj, true) },
		UpdateFunc: func(old, obj any) {
			o, err1 := meta.Accessor(old)
			n, err2 := meta.Accessor(obj)
			// Names never change; labels may.
			m.changed(obj, err1 != nil || err2 != nil || !maps.Equal(o.GetLabels(), n.GetLabels()))
		},
		DeleteFunc: func(obj any) { m.changed(obj, true) },
	}
}
