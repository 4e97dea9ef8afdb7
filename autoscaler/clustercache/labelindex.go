package clustercache

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/tools/cache"
)

// podLabelIndex indexes pods by namespace and each label pair, so a
// selector with an equality requirement (every Deployment's has one) scans
// the pods carrying that label instead of the whole namespace: with many
// autoscalers in a namespace, the scan was the largest cost of a
// reconcile.
const podLabelIndex = "tidal.namespace-label"

// pairKey is the key of one label pair in the selectors' index, and, after
// the namespace, in the pods' (podIndexKey).
func pairKey(key, value string) string { return key + "=" + value }

// podIndexKey is podLabelIndex's key of one label pair of namespace's
// pods: "namespace/" and the pairKey, made as one string.
func podIndexKey(namespace, key, value string) string { return namespace + "/" + key + "=" + value }

// PodIndex is the pod informer's label index (Indexers, for SelectPods)
// and a generation for each namespace's pods, which changes whenever one
// of them is added, changed or deleted: Selections reuses a selection
// while it holds.
//
// The indexer calls the index function for the old and the new object of
// every add, update and delete, under its lock, so the generation moves
// with the change, before a reader can see it. A relist replaces the
// whole store and calls it only for the objects it keeps; the informer
// then reports each object it dropped as deleted, and Handler moves their
// namespaces' generations.
type PodIndex struct {
	mu sync.Mutex
	// last is the generation of the latest change, in any namespace: each
	// change takes a new one, so a namespace never returns to a value it
	// had.
	last uint64
	gens map[string]uint64
}

// NewPodIndex returns an index whose namespaces are all at generation 0.
func NewPodIndex() *PodIndex { return &PodIndex{gens: map[string]uint64{}} }

// Indexers are the indexers SelectPods needs on the pod informer.
func (x *PodIndex) Indexers() cache.Indexers {
	return cache.Indexers{podLabelIndex: func(obj any) ([]string, error) {
		if pod, ok := obj.(*corev1.Pod); ok {
			x.changed(pod.Namespace)
		}
		return podLabelIndexFunc(obj)
	}}
}

// Handler is the pod informer's event handler that moves a namespace's
// generation when a relist drops one of its pods.
func (x *PodIndex) Handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if pod, ok := obj.(*corev1.Pod); ok {
			x.changed(pod.Namespace)
		}
	}}
}

func (x *PodIndex) changed(namespace string) {
	x.mu.Lock()
	x.last++
	x.gens[namespace] = x.last
	x.mu.Unlock()
}

// Generation is the namespace's: equal values mean no pod of it was
// added, changed or deleted in between.
func (x *PodIndex) Generation(namespace string) uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.gens[namespace]
}

func podLabelIndexFunc(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	keys := make([]string, 0, len(pod.Labels))
	for k, v := range pod.Labels {
		keys = append(keys, podIndexKey(pod.Namespace, k, v))
	}
	return keys, nil
}

// Pair is one label: its key and value.
type Pair struct{ Key, Value string }

// EqualityLabels returns the labels every object matching sel must carry;
// empty when sel has no single-valued equality requirement.
func EqualityLabels(sel labels.Selector) []Pair {
	reqs, selectable := sel.Requirements()
	if !selectable {
		return nil
	}
	var out []Pair
	for i := range reqs {
		switch reqs[i].Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			if vals := reqs[i].Values(); vals.Len() == 1 {
				out = append(out, Pair{Key: reqs[i].Key(), Value: vals.UnsortedList()[0]})
			}
		}
	}
	return out
}

// SelectPods returns the pods of namespace that sel matches, as the pod
// lister's List(sel) would, through podLabelIndex when sel allows.
func SelectPods(indexer cache.Indexer, namespace string, sel labels.Selector) ([]*corev1.Pod, error) {
	var candidates []any
	pairs := EqualityLabels(sel)
	if len(pairs) == 0 {
		var err error
		if candidates, err = indexer.ByIndex(cache.NamespaceIndex, namespace); err != nil {
			return nil, err
		}
	}
	for i, p := range pairs {
		objs, err := indexer.ByIndex(podLabelIndex, podIndexKey(namespace, p.Key, p.Value))
		if err != nil {
			return nil, err
		}
		if i == 0 || len(objs) < len(candidates) {
			candidates = objs
		}
	}
	out := make([]*corev1.Pod, 0, len(candidates))
	for _, obj := range candidates {
		if pod, ok := obj.(*corev1.Pod); ok && sel.Matches(labels.Set(pod.Labels)) {
			out = append(out, pod)
		}
	}
	return out, nil
}
