package metricsserver

import (
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
)

// Q parses a quantity for the Set methods; it panics on a bad literal, as
// resource.MustParse does.
func Q(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

// Missing in a per-pod value list means "no sample for that pod".
var Missing *resource.Quantity

// PodValues gives values to the pods that match Selector in Namespace. The
// pod of rank i (see Rank) gets Values[i]; pods of higher rank get the last
// value. A nil entry (Missing) gives that pod no sample.
type PodValues struct {
	Namespace string
	Selector  labels.Selector
	Values    []*resource.Quantity
}

// valueFor returns the value of the pod of the given rank.
func (v PodValues) valueFor(rank int) *resource.Quantity {
	if len(v.Values) == 0 {
		return nil
	}
	return v.Values[min(rank, len(v.Values)-1)]
}

// ExternalSeries is one series of an external metric.
type ExternalSeries struct {
	Labels map[string]string
	Value  resource.Quantity
}

type podMetricKey struct{ namespace, selector, metric string }

type usageKey struct {
	namespace, selector, container string
	resource                       corev1.ResourceName
}

type objectKey struct {
	namespace, resource, name, metric string
}

type externalKey struct{ namespace, metric string }

// store holds every value the server serves. All methods are safe for
// concurrent use.
type store struct {
	mu       sync.RWMutex
	pods     map[podMetricKey]PodValues
	usage    map[usageKey]PodValues
	objects  map[objectKey]resource.Quantity
	external map[externalKey][]ExternalSeries
}

func newStore() *store {
	return &store{
		pods:     map[podMetricKey]PodValues{},
		usage:    map[usageKey]PodValues{},
		objects:  map[objectKey]resource.Quantity{},
		external: map[externalKey][]ExternalSeries{},
	}
}

func (s *store) setPodMetric(metric string, v PodValues) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := podMetricKey{v.Namespace, v.Selector.String(), metric}
	if v.Values == nil {
		delete(s.pods, k)
		return
	}
	s.pods[k] = v
}

func (s *store) setUsage(container string, res corev1.ResourceName, v PodValues) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := usageKey{v.Namespace, v.Selector.String(), container, res}
	if v.Values == nil {
		delete(s.usage, k)
		return
	}
	s.usage[k] = v
}

func (s *store) setObject(k objectKey, q *resource.Quantity) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q == nil {
		delete(s.objects, k)
		return
	}
	s.objects[k] = q.DeepCopy()
}

func (s *store) setExternal(k externalKey, series []ExternalSeries) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if series == nil {
		delete(s.external, k)
		return
	}
	s.external[k] = slices.Clone(series)
}

// podMetric returns the value of a per-pod custom metric for pod, whose
// rank among its peers is rank; nil when no rule gives it one. Among
// several matching rules the one with the longest selector wins, so a
// narrower rule overrides a broader one deterministically.
func (s *store) podMetric(metric string, pod *corev1.Pod, rank int) *resource.Quantity {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var best *PodValues
	var bestKey string
	for k, v := range s.pods {
		if k.metric != metric || !v.matches(pod) {
			continue
		}
		if best == nil || len(k.selector) > len(bestKey) || (len(k.selector) == len(bestKey) && k.selector < bestKey) {
			v := v
			best, bestKey = &v, k.selector
		}
	}
	if best == nil {
		return nil
	}
	return best.valueFor(rank)
}

// usage returns the usage of each resource of the named container of pod.
func (s *store) containerUsage(pod *corev1.Pod, container string, rank int) corev1.ResourceList {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := corev1.ResourceList{}
	for k, v := range s.usage {
		if k.container != container || !v.matches(pod) {
			continue
		}
		if q := v.valueFor(rank); q != nil {
			out[k.resource] = q.DeepCopy()
		}
	}
	return out
}

func (s *store) object(k objectKey) (resource.Quantity, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	q, ok := s.objects[k]
	return q, ok
}

func (s *store) externalSeries(k externalKey) ([]ExternalSeries, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	series, ok := s.external[k]
	return series, ok
}

func (v PodValues) matches(pod *corev1.Pod) bool {
	return pod.Namespace == v.Namespace && v.Selector.Matches(labels.Set(pod.Labels))
}
