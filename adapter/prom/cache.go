package prom

import (
	"container/list"
	"sync"
	"time"

	"github.com/prometheus/common/model"
)

// DefaultCacheMaxBytes bounds the estimated bytes of the results a
// backend's cache holds.
const DefaultCacheMaxBytes int64 = 64 << 20

// cache keeps results of "now" queries for a short TTL. It is bounded
// three ways: an entry is dropped once its TTL has passed, whether or not
// it is asked for again (apimachinery's LRUExpireCache, used before, only
// stopped serving it and held it until the cache was full); it holds at
// most max entries; and the results it holds take at most maxBytes, as
// estimated by vectorBytes. Every entry lives for the same TTL, so the
// entries in the order they were put are also in the order they expire:
// the oldest goes first, whether expired or to make room.
type cache struct {
	ttl      time.Duration
	max      int
	maxBytes int64
	now      func() time.Time

	mu    sync.Mutex
	byKey map[string]*list.Element
	// order holds *cacheEntry, the newest at the front.
	order list.List
	bytes int64
}

type cacheEntry struct {
	key     string
	v       model.Vector
	expires time.Time
	bytes   int64
}

func newCache(ttl time.Duration, max int, maxBytes int64, now func() time.Time) *cache {
	return &cache{ttl: ttl, max: max, maxBytes: maxBytes, now: now, byKey: map[string]*list.Element{}}
}

// get returns a cached result. Results are shared: callers must not
// modify them.
func (c *cache) get(key string) (model.Vector, bool) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expire(now)
	el, ok := c.byKey[key]
	if !ok {
		return nil, false
	}
	return el.Value.(*cacheEntry).v, true
}

// put keeps v for the TTL: a result put at t is served before t+ttl and
// not from then on. A result larger than the byte bound is not kept.
func (c *cache) put(key string, v model.Vector) {
	now := c.now()
	size := vectorBytes(key, v)
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[key]; ok {
		c.remove(el)
	}
	c.expire(now)
	if size > c.maxBytes {
		return
	}
	for c.order.Len() > 0 && (c.order.Len() >= c.max || c.bytes+size > c.maxBytes) {
		c.remove(c.order.Back())
	}
	c.byKey[key] = c.order.PushFront(&cacheEntry{key: key, v: v, expires: now.Add(c.ttl), bytes: size})
	c.bytes += size
}

// expire drops the entries whose TTL has passed, oldest first.
func (c *cache) expire(now time.Time) {
	for el := c.order.Back(); el != nil && !now.Before(el.Value.(*cacheEntry).expires); el = c.order.Back() {
		c.remove(el)
	}
}

func (c *cache) remove(el *list.Element) {
	e := c.order.Remove(el).(*cacheEntry)
	delete(c.byKey, e.key)
	c.bytes -= e.bytes
}

// len is the number of entries held; none has expired, as of the last
// get or put.
func (c *cache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// size is the estimated bytes the entries hold.
func (c *cache) size() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// vectorBytes estimates the heap a cached result holds: the key, and per
// sample its struct and its labels' strings with a map entry each.
func vectorBytes(key string, v model.Vector) int64 {
	const (
		entryOverhead  = 128 // list element, cacheEntry, map entry
		sampleOverhead = 8 + 64 + 48
		labelOverhead  = 2*16 + 16
	)
	n := int64(entryOverhead + len(key))
	for _, s := range v {
		n += sampleOverhead
		for k, val := range s.Metric {
			n += labelOverhead + int64(len(k)+len(val))
		}
	}
	return n
}
