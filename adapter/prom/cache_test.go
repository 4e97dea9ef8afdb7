package prom

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

func TestCacheExpiresAndStaysBounded(t *testing.T) {
	now := time.Unix(0, 0)
	c := newCache(10*time.Second, 2, func() time.Time { return now })
	v := model.Vector{{Value: 1}}
	c.put("a", v)
	now = now.Add(time.Second)
	c.put("b", v)
	c.put("c", v) // full: "a", closest to expiry, goes
	if _, ok := c.get("a"); ok {
		t.Error("a still cached after two newer entries filled the cache")
	}
	if _, ok := c.get("c"); !ok {
		t.Error("c not cached")
	}
	if c.len() != 2 {
		t.Errorf("len = %d, want 2", c.len())
	}
	now = now.Add(10 * time.Second)
	if _, ok := c.get("c"); ok {
		t.Error("c served after its TTL")
	}
}

// The cache benchmarks: go test -run '^$' -bench Cache -count 6 ./adapter/prom
// before and after a change, compared with benchstat.

// BenchmarkCacheGetHit is the common case: concurrent requests answered
// from a few cached queries.
func BenchmarkCacheGetHit(b *testing.B) {
	c := newCache(time.Hour, 4096, time.Now)
	keys := benchKeys(64)
	for _, k := range keys {
		c.put(k, model.Vector{{Value: 1}})
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, ok := c.get(keys[i%len(keys)]); !ok {
				b.Fatal("miss")
			}
			i++
		}
	})
}

// BenchmarkCachePutFull adds distinct queries to a full cache, so that
// every put evicts one.
func BenchmarkCachePutFull(b *testing.B) {
	const size = 4096
	c := newCache(time.Hour, size, time.Now)
	keys := benchKeys(2 * size)
	v := model.Vector{{Value: 1}}
	for _, k := range keys[:size] {
		c.put(k, v)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.put(keys[i%len(keys)], v)
	}
}

// BenchmarkCacheMixed is concurrent gets with one put in eight, over twice
// as many queries as the cache holds.
func BenchmarkCacheMixed(b *testing.B) {
	const size = 4096
	c := newCache(time.Hour, size, time.Now)
	keys := benchKeys(2 * size)
	v := model.Vector{{Value: 1}}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			k := keys[(i*7919)%len(keys)]
			if _, ok := c.get(k); !ok && i%8 == 0 {
				c.put(k, v)
			}
			i++
		}
	})
}

func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf(`sum by (pod) (rate(http_requests_total{namespace="ns",pod=~"web-%d"}[2m]))`, i)
	}
	return keys
}
