package clustercache

import (
	"runtime"
	"sync"
	"unsafe"
	"weak"

	corev1 "k8s.io/api/core/v1"

	"github.com/tidal-autoscaler/tidal/autoscaler/replicas"
)

// PodConversions converts cached pods for the arithmetic
// (replicas.FromV1Pod) once per pod object rather than once per reconcile:
// 5 pods' request maps per reconcile were 4.5% of the controller's
// allocations at 1,000 autoscalers. An informer never changes a cached
// object, it replaces it, so a conversion of one object stays true for as
// long as the object lives. The entry holds a weak pointer to its object
// and is deleted when the object is collected, so the map holds only pods
// the cache (or a reconcile) still holds, and never keeps one alive.
//
// Entries are found by the object's address and checked by their weak
// pointer, which is cheap to read (a converted pod is read every
// reconcile) where making one is not: weak.Make looks the object up in
// its span's specials under a lock, 2% of the controller's CPU at 1,000
// autoscalers. An address reused by a new object after the old one was
// collected fails the check (the old weak pointer reads nil), so it is a
// miss, never the old conversion.
//
// The conversions it returns are shared between reconciles: their maps
// and slices are read-only, as everything in package replicas treats them.
type PodConversions struct {
	mu sync.RWMutex
	m  map[uintptr]conversion
}

// conversion is one pod object's conversion.
type conversion struct {
	pod weak.Pointer[corev1.Pod]
	v   replicas.Pod
}

// NewPodConversions returns an empty PodConversions.
func NewPodConversions() *PodConversions {
	return &PodConversions{m: map[uintptr]conversion{}}
}

// address is the map key of pod: its address, which the weak pointer of
// the entry found there confirms.
func address(pod *corev1.Pod) uintptr { return uintptr(unsafe.Pointer(pod)) }

// Convert returns pods converted for the arithmetic, in order.
func (c *PodConversions) Convert(pods []*corev1.Pod) []replicas.Pod {
	out := make([]replicas.Pod, len(pods))
	var missing []int
	c.mu.RLock()
	for i, p := range pods {
		e, ok := c.m[address(p)]
		if !ok || e.pod.Value() != p {
			missing = append(missing, i)
			continue
		}
		out[i] = e.v
	}
	c.mu.RUnlock()
	if len(missing) == 0 {
		return out
	}
	for _, i := range missing {
		out[i] = replicas.FromV1Pod(pods[i])
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, i := range missing {
		p := pods[i]
		k := address(p)
		if e, ok := c.m[k]; ok && e.pod.Value() == p {
			continue // another reconcile converted it meanwhile
		}
		c.m[k] = conversion{pod: weak.Make(p), v: out[i]}
		runtime.AddCleanup(p, c.forget, k)
	}
	return out
}

// forget runs once a converted pod object is collected. A new object at
// the same address may have its entry there already: that one stays.
func (c *PodConversions) forget(k uintptr) {
	c.mu.Lock()
	if e, ok := c.m[k]; ok && e.pod.Value() == nil {
		delete(c.m, k)
	}
	c.mu.Unlock()
}

// Len is the number of conversions held.
func (c *PodConversions) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}
