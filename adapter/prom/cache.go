package prom

import (
	"time"

	"github.com/prometheus/common/model"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
)

// cache keeps results of "now" queries for a short TTL. It holds at most
// max entries: when full, the least recently used entry goes
// (apimachinery's LRUExpireCache).
type cache struct {
	ttl time.Duration
	lru *utilcache.LRUExpireCache
}

// clockFunc is a utilcache.Clock.
type clockFunc func() time.Time

func (f clockFunc) Now() time.Time { return f() }

func newCache(ttl time.Duration, max int, now func() time.Time) *cache {
	return &cache{ttl: ttl, lru: utilcache.NewLRUExpireCacheWithClock(max, clockFunc(now))}
}

// get returns a cached result. Results are shared: callers must not
// modify them.
func (c *cache) get(key string) (model.Vector, bool) {
	v, ok := c.lru.Get(key)
	if !ok {
		return nil, false
	}
	return v.(model.Vector), true
}

// put keeps v for the TTL: a result put at t is served before t+ttl and
// not from then on (LRUExpireCache serves up to and including its expiry
// time, hence the nanosecond less).
func (c *cache) put(key string, v model.Vector) {
	c.lru.Add(key, v, c.ttl-time.Nanosecond)
}

// len is the number of entries that have not expired.
func (c *cache) len() int {
	return len(c.lru.Keys())
}
