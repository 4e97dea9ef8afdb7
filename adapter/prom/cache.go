package prom

import (
	"sync"
	"time"

	"github.com/prometheus/common/model"
)

// cache keeps results of "now" queries for a short TTL. It holds at most
// max entries: when full, expired entries are dropped, and if none had
// expired, the entry closest to expiry goes.
type cache struct {
	mu      sync.Mutex
	ttl     time.Duration
	max     int
	now     func() time.Time
	entries map[string]cacheEntry
}

type cacheEntry struct {
	v       model.Vector
	expires time.Time
}

func newCache(ttl time.Duration, max int, now func() time.Time) *cache {
	return &cache{ttl: ttl, max: max, now: now, entries: map[string]cacheEntry{}}
}

// get returns a cached result. Results are shared: callers must not
// modify them.
func (c *cache) get(key string) (model.Vector, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok {
		return nil, false
	}
	if !c.now().Before(e.expires) {
		delete(c.entries, key)
		return nil, false
	}
	return e.v, true
}

func (c *cache) put(key string, v model.Vector) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if _, ok := c.entries[key]; !ok && len(c.entries) >= c.max {
		var oldestKey string
		var oldest time.Time
		for k, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, k)
				continue
			}
			if oldestKey == "" || e.expires.Before(oldest) {
				oldestKey, oldest = k, e.expires
			}
		}
		if len(c.entries) >= c.max {
			delete(c.entries, oldestKey)
		}
	}
	c.entries[key] = cacheEntry{v: v, expires: now.Add(c.ttl)}
}

func (c *cache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
