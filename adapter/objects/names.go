package objects

import (
	"maps"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"
)

// maxNameEntries bounds the remembered answers: selectors come from
// requests. When full, the memo starts over.
const maxNameEntries = 4096

// nameMemo remembers Names answers per namespace and selector until an
// object of that namespace is added, deleted or relabelled. Listing by
// selector walks every object of the namespace; the HPA asks the same
// question every sync, and pods' frequent status updates change neither
// names nor labels.
//
// The informer's handler bumps a namespace's generation after its cache
// has changed, and an answer is stored with the generation read before
// listing, so an answer is never kept past a change it did not see. An
// answer may be served in the moment between a cache change and the
// handler's bump: the same lag a watch-fed cache always has.
type nameMemo struct {
	mu sync.Mutex
	// gens counts the changes per namespace; all counts every change
	// (for namespace "", every object); epoch counts changes of objects
	// whose namespace is unknown, which invalidate every answer.
	gens       map[string]uint64
	all, epoch uint64
	entries    map[nameKey]nameEntry
}

type nameKey struct{ namespace, selector string }

type nameEntry struct {
	gen   uint64
	names []string
}

func newNameMemo() *nameMemo {
	return &nameMemo{gens: map[string]uint64{}, entries: map[nameKey]nameEntry{}}
}

// generation returns the count whose increase invalidates answers for
// namespace. Call with mu held.
func (m *nameMemo) generation(namespace string) uint64 {
	if namespace == "" {
		return m.epoch + m.all
	}
	return m.epoch + m.gens[namespace]
}

// get returns the remembered answer for namespace and selector, or lists
// it and remembers it.
func (m *nameMemo) get(namespace, selector string, list func() ([]string, error)) ([]string, error) {
	key := nameKey{namespace, selector}
	m.mu.Lock()
	gen := m.generation(namespace)
	if e, ok := m.entries[key]; ok && e.gen == gen {
		m.mu.Unlock()
		return e.names, nil
	}
	m.mu.Unlock()
	names, err := list()
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.entries[key]; ok && e.gen >= gen {
		return names, nil // a concurrent caller stored one as new
	}
	if len(m.entries) >= maxNameEntries {
		clear(m.entries)
	}
	m.entries[key] = nameEntry{gen: gen, names: names}
	return names, nil
}

// changed records a change of obj (an informer's object, or its
// DeletedFinalStateUnknown).
func (m *nameMemo) changed(obj any) {
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
	m.gens[o.GetNamespace()]++
	m.all++
}

// handler is the informer event handler that keeps the memo current.
func (m *nameMemo) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { m.changed(obj) },
		UpdateFunc: func(old, obj any) {
			o, err1 := meta.Accessor(old)
			n, err2 := meta.Accessor(obj)
			if err1 == nil && err2 == nil && maps.Equal(o.GetLabels(), n.GetLabels()) {
				return // names never change, and labels did not
			}
			m.changed(obj)
		},
		DeleteFunc: func(obj any) { m.changed(obj) },
	}
}
