package objects

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
)

// resetEvery limits how often a lookup miss refreshes the discovery cache.
const resetEvery = 30 * time.Second

// Mapper is a discovery-backed RESTMapper that reads the cluster's API
// groups on first use (not at start), and refreshes them when a lookup
// misses, at most every 30 s, so custom resources installed later are
// found.
type Mapper struct {
	*restmapper.DeferredDiscoveryRESTMapper

	mu        sync.Mutex
	lastReset time.Time
}

var _ meta.RESTMapper = (*Mapper)(nil)

// NewMapper returns a Mapper over client's discovery.
func NewMapper(client discovery.DiscoveryInterface) *Mapper {
	return &Mapper{DeferredDiscoveryRESTMapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(client))}
}

func (m *Mapper) retry(err error) bool {
	if !meta.IsNoMatchError(err) {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if time.Since(m.lastReset) < resetEvery {
		return false
	}
	m.lastReset = time.Now()
	m.Reset()
	return true
}

func (m *Mapper) ResourceFor(in schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	out, err := m.DeferredDiscoveryRESTMapper.ResourceFor(in)
	if err != nil && m.retry(err) {
		return m.DeferredDiscoveryRESTMapper.ResourceFor(in)
	}
	return out, err
}

func (m *Mapper) ResourcesFor(in schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	out, err := m.DeferredDiscoveryRESTMapper.ResourcesFor(in)
	if err != nil && m.retry(err) {
		return m.DeferredDiscoveryRESTMapper.ResourcesFor(in)
	}
	return out, err
}

func (m *Mapper) KindFor(in schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	out, err := m.DeferredDiscoveryRESTMapper.KindFor(in)
	if err != nil && m.retry(err) {
		return m.DeferredDiscoveryRESTMapper.KindFor(in)
	}
	return out, err
}
