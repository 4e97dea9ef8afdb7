package clustercache

import (
	"runtime"
	"sync"
	"weak"

	corev1 "k8s.io/api/core/v1"

	"github.com/tidal-autoscaler/tidal/autoscaler/replicas"
)

// PodConversions converts cached pods for the arithmetic
// (replicas.FromV1Pod) once per pod object rather than once per reconcile:
// 5 pods' request maps per reconcile were 4.5% of the controller's
// allocations at 1,000 autoscalers. An informer never changes a cached
// object, it replaces it, so a conversion keyed by the object's address
// stays true for as long as the object lives. The key is a weak pointer
// and the entry is deleted when the object is collected, so the map holds
// only pods the cache (or a reconcile) still holds, and never keeps one
// alive.
//
// The conversions it returns are shared between reconciles: their maps
// and slices are read-only, as everything in package replicas treats them.
type PodConversions struct {
	mu sync.RWMutex
	m  map[weak.Pointer[corev1.Pod]]replicas.Pod
}

// NewPodConversions returns an empty PodConversions.
func NewPodConversions() *PodConversions {
	return &PodConversions{m: map[weak.Pointer[corev1.Pod]]replicas.Pod{}}
}

// Convert returns pods converted for the arithmetic, in order.
func (c *PodConversions) Convert(pods []*corev1.Pod) []replicas.Pod {
	out := make([]replicas.Pod, len(pods))
	var missing []int
	c.mu.RLock()
	for i, p := range pods {
		v, ok := c.m[weak.Make(p)]
		if !ok {
			missing = append(missing, i)
			continue
		}
		out[i] = v
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
		k := weak.Make(pods[i])
		if _, ok := c.m[k]; ok {
			continue // another reconcile converted it meanwhile
		}
		c.m[k] = out[i]
		runtime.AddCleanup(pods[i], c.forget, k)
	}
	return out
}

// forget runs once a converted pod object is collected.
func (c *PodConversions) forget(k weak.Pointer[corev1.Pod]) {
	c.mu.Lock()
	delete(c.m, k)
	c.mu.Unlock()
}

// Len is the number of conversions held.
func (c *PodConversions) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}
