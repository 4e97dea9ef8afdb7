package controller

import (
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// selectorTracker knows the pod selector of every autoscaler, to detect
// autoscalers whose pods overlap (upstream's hpaSelectorStore). An
// autoscaler is registered with a selector that matches nothing when it is
// added, and gets its real selector when reconciled.
type selectorTracker struct {
	mu         sync.RWMutex
	namespaces map[string]map[string]labels.Selector // namespace -> key -> selector
}

func newSelectorTracker() *selectorTracker {
	return &selectorTracker{namespaces: map[string]map[string]labels.Selector{}}
}

// putIfAbsent registers key with sel unless it is registered; it reports
// whether key was added.
func (t *selectorTracker) putIfAbsent(namespace, key string, sel labels.Selector) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	ns := t.namespaces[namespace]
	if ns == nil {
		ns = map[string]labels.Selector{}
		t.namespaces[namespace] = ns
	}
	if _, ok := ns[key]; ok {
		return false
	}
	ns[key] = sel
	return true
}

// putIfPresent replaces the selector of a registered key; false when the
// key is not registered (the object was deleted meanwhile).
func (t *selectorTracker) putIfPresent(namespace, key string, sel labels.Selector) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	ns := t.namespaces[namespace]
	if _, ok := ns[key]; !ok {
		return false
	}
	ns[key] = sel
	return true
}

// count returns the number of autoscalers registered in the namespace.
func (t *selectorTracker) count(namespace string) int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.namespaces[namespace])
}

// delete unregisters key; it reports whether it was registered.
func (t *selectorTracker) delete(namespace, key string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	ns := t.namespaces[namespace]
	if _, ok := ns[key]; !ok {
		return false
	}
	delete(ns, key)
	if len(ns) == 0 {
		delete(t.namespaces, namespace)
	}
	return true
}

// matching returns, sorted, the keys of up to limit autoscalers of the
// namespace whose selector matches at least one of pods.
func (t *selectorTracker) matching(namespace string, pods []*corev1.Pod, limit int) []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	ns := t.namespaces[namespace]
	seen := map[string]bool{}
	found := map[string]bool{}
	for _, p := range pods {
		set := labels.Set(p.Labels)
		id := set.String()
		if seen[id] {
			continue
		}
		seen[id] = true
		for key, sel := range ns {
			if !found[key] && sel.Matches(set) {
				found[key] = true
				if limit > 0 && len(found) >= limit {
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
