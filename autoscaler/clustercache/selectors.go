package clustercache

import (
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// SelectorTracker knows the pod selector of every autoscaler, to detect
// autoscalers whose pods overlap (upstream's hpaSelectorStore). An
// autoscaler is registered with a selector that matches nothing when it is
// added, and gets its real selector when reconciled.
//
// Selectors are indexed by one label pair they require, so checking a pod
// tests the selectors that could match it, not every selector of the
// namespace (with hundreds of autoscalers in a namespace, the full test
// on every reconcile was a visible cost).
type SelectorTracker struct {
	mu         sync.RWMutex
	namespaces map[string]*namespaceSelectors
	// last is the generation of the latest change (see Generation).
	last uint64
}

type namespaceSelectors struct {
	byKey map[string]labels.Selector
	// parsedFrom holds the string each key's selector was parsed from
	// by Parse; keys registered otherwise have none.
	parsedFrom map[string]string
	// byPair holds the keys whose selector requires the label pair
	// "key=value" (the first such pair of the selector); noPair the keys
	// whose selector requires none.
	byPair map[string]map[string]struct{}
	noPair map[string]struct{}
	// gen is the tracker's generation when a selector of the namespace
	// last changed.
	gen uint64
}

// NewSelectorTracker returns an empty tracker.
func NewSelectorTracker() *SelectorTracker {
	return &SelectorTracker{namespaces: map[string]*namespaceSelectors{}}
}

func indexPair(sel labels.Selector) (string, bool) {
	pairs := EqualityLabels(sel)
	if len(pairs) == 0 {
		return "", false
	}
	return pairKey(pairs[0].Key, pairs[0].Value), true
}

func (n *namespaceSelectors) put(key string, sel labels.Selector) {
	if old, ok := n.byKey[key]; ok {
		n.unindex(key, old)
	}
	n.byKey[key] = sel
	if pair, ok := indexPair(sel); ok {
		if n.byPair[pair] == nil {
			n.byPair[pair] = map[string]struct{}{}
		}
		n.byPair[pair][key] = struct{}{}
	} else {
		n.noPair[key] = struct{}{}
	}
}

func (n *namespaceSelectors) unindex(key string, sel labels.Selector) {
	if pair, ok := indexPair(sel); ok {
		delete(n.byPair[pair], key)
		if len(n.byPair[pair]) == 0 {
			delete(n.byPair, pair)
		}
	} else {
		delete(n.noPair, key)
	}
}

// PutIfAbsent registers key with sel unless it is registered; it reports
// whether key was added.
func (t *SelectorTracker) PutIfAbsent(namespace, key string, sel labels.Selector) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	ns := t.namespaces[namespace]
	if ns == nil {
		ns = &namespaceSelectors{byKey: map[string]labels.Selector{}, parsedFrom: map[string]string{},
			byPair: map[string]map[string]struct{}{}, noPair: map[string]struct{}{}}
		t.namespaces[namespace] = ns
	}
	if _, ok := ns.byKey[key]; ok {
		return false
	}
	ns.put(key, sel)
	t.changed(ns)
	return true
}

// Parse registers the selector raw parses to for a registered key, in
// place of the one it had, and returns it. While key's selector was parsed from
// the same string, it returns that selector and changes nothing: a
// scale's selector rarely changes, and parsing and re-indexing it on
// every reconcile were 2% of the controller's CPU. registered is false
// when key is not registered (the object was deleted meanwhile); err is
// labels.Parse's.
func (t *SelectorTracker) Parse(namespace, key, raw string) (sel labels.Selector, registered bool, err error) {
	t.mu.RLock()
	if ns := t.namespaces[namespace]; ns != nil {
		if from, ok := ns.parsedFrom[key]; ok && from == raw {
			sel := ns.byKey[key]
			t.mu.RUnlock()
			return sel, true, nil
		}
	}
	t.mu.RUnlock()
	if sel, err = labels.Parse(raw); err != nil {
		return nil, false, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	ns := t.namespaces[namespace]
	if ns == nil {
		return sel, false, nil
	}
	if _, ok := ns.byKey[key]; !ok {
		return sel, false, nil
	}
	ns.put(key, sel)
	ns.parsedFrom[key] = raw
	t.changed(ns)
	return sel, true, nil
}

// changed gives ns the tracker's next generation; callers hold t.mu.
func (t *SelectorTracker) changed(ns *namespaceSelectors) {
	t.last++
	ns.gen = t.last
}

// Generation is the namespace's: equal values mean no selector of it was
// registered, changed or deleted in between. Generations come from one
// count for the whole tracker, so a namespace emptied and registered
// again does not return to an earlier one.
func (t *SelectorTracker) Generation(namespace string) uint64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if ns := t.namespaces[namespace]; ns != nil {
		return ns.gen
	}
	return 0
}

// Count returns the number of autoscalers registered in the namespace.
func (t *SelectorTracker) Count(namespace string) int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if ns := t.namespaces[namespace]; ns != nil {
		return len(ns.byKey)
	}
	return 0
}

// Selectors returns the selectors of the namespace's registered keys for
// which keep reports true, and those of all its keys. keep is called with
// the tracker read-locked: it must not call the tracker.
func (t *SelectorTracker) Selectors(namespace string, keep func(key string) bool) (kept, all []labels.Selector) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	ns := t.namespaces[namespace]
	if ns == nil {
		return nil, nil
	}
	all = make([]labels.Selector, 0, len(ns.byKey))
	for key, sel := range ns.byKey {
		all = append(all, sel)
		if keep(key) {
			kept = append(kept, sel)
		}
	}
	return kept, all
}

// Delete unregisters key; it reports whether it was registered.
func (t *SelectorTracker) Delete(namespace, key string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	ns := t.namespaces[namespace]
	if ns == nil {
		return false
	}
	sel, ok := ns.byKey[key]
	if !ok {
		return false
	}
	ns.unindex(key, sel)
	delete(ns.byKey, key)
	delete(ns.parsedFrom, key)
	t.changed(ns)
	if len(ns.byKey) == 0 {
		delete(t.namespaces, namespace)
	}
	return true
}

// Matching returns, sorted, the keys of up to limit autoscalers of the
// namespace whose selector matches at least one of pods.
func (t *SelectorTracker) Matching(namespace string, pods []*corev1.Pod, limit int) []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	ns := t.namespaces[namespace]
	if ns == nil {
		return nil
	}
	found := map[string]bool{}
	test := func(key string, set labels.Set) bool {
		if !found[key] && ns.byKey[key].Matches(set) {
			found[key] = true
		}
		return limit > 0 && len(found) >= limit
	}
	for _, p := range pods {
		set := labels.Set(p.Labels)
		for key := range ns.noPair {
			if test(key, set) {
				return sortedKeys(found)
			}
		}
		for k, v := range p.Labels {
			for key := range ns.byPair[pairKey(k, v)] {
				if test(key, set) {
					return sortedKeys(found)
				}
			}
		}
	}
	return sortedKeys(found)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
