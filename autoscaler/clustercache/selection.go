package clustercache

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/tidal-autoscaler/tidal/autoscaler/replicas"
)

// Selection is what one autoscaler's selector selected: the pods, their
// conversions for the arithmetic, and the keys (sorted, two at most) of
// the autoscalers whose selectors match at least one of them. It is
// shared between reconciles: read-only.
type Selection struct {
	Pods      []*corev1.Pod
	Converted []replicas.Pod
	Matching  []string

	raw            string
	podGen, selGen uint64
}

// Selections makes each autoscaler's Selection and keeps it while neither
// its selector nor the pods or the selectors of its namespace change: an
// autoscaler's pods and its neighbours' selectors stay the same for most
// of its reconciles, and selecting the pods, testing them against every
// selector that could match them and converting them was 5% of the
// controller's CPU at 1,000 autoscalers.
type Selections struct {
	index     *PodIndex
	pods      cache.Indexer
	selectors *SelectorTracker
	converted *PodConversions

	mu    sync.Mutex
	byKey map[string]*Selection
}

// NewSelections returns an empty set over the pods of an indexer with
// index's Indexers, the selectors' tracker and the pods' conversions.
func NewSelections(index *PodIndex, pods cache.Indexer, selectors *SelectorTracker, converted *PodConversions) *Selections {
	return &Selections{index: index, pods: pods, selectors: selectors, converted: converted, byKey: map[string]*Selection{}}
}

// Select returns the selection of the autoscaler key of namespace, whose
// selector sel the tracker parsed from raw. The generations are read
// before the pods and selectors are, so a change made while the selection
// is made leaves it older than the next reconcile's generations.
func (s *Selections) Select(namespace, key, raw string, sel labels.Selector) (*Selection, error) {
	podGen, selGen := s.index.Generation(namespace), s.selectors.Generation(namespace)
	s.mu.Lock()
	prev := s.byKey[key]
	s.mu.Unlock()
	if prev != nil && prev.raw == raw && prev.podGen == podGen && prev.selGen == selGen {
		return prev, nil
	}
	pods, err := SelectPods(s.pods, namespace, sel)
	if err != nil {
		return nil, err
	}
	next := &Selection{
		Pods: pods, Converted: s.converted.Convert(pods), Matching: s.selectors.Matching(namespace, pods, 2),
		raw: raw, podGen: podGen, selGen: selGen,
	}
	s.mu.Lock()
	s.byKey[key] = next
	s.mu.Unlock()
	return next, nil
}

// Forget drops key's selection (the autoscaler is gone).
func (s *Selections) Forget(key string) {
	s.mu.Lock()
	delete(s.byKey, key)
	s.mu.Unlock()
}

// Len is the number of selections held.
func (s *Selections) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byKey)
}
