package prom

import (
	"fmt"
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/prometheus/common/model"
)

func TestCacheExpiresAndStaysBounded(t *testing.T) {
	now := time.Unix(0, 0)
	c := newCache(10*time.Second, 2, DefaultCacheMaxBytes, func() time.Time { return now })
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

// TestCacheBounds: what the cache holds is bounded by age, entries and
// bytes; a result it no longer holds is released to the collector (a weak
// pointer to its sample goes nil), not only no longer served.
func TestCacheBounds(t *testing.T) {
	// put adds key with a one-sample result of a label of n bytes and
	// returns a weak pointer to the sample.
	put := func(c *cache, key string, n int) weak.Pointer[model.Sample] {
		s := &model.Sample{Metric: model.Metric{"pod": model.LabelValue(make([]byte, n))}, Value: 1}
		c.put(key, model.Vector{s})
		return weak.Make(s)
	}
	released := func(p weak.Pointer[model.Sample]) bool {
		runtime.GC()
		runtime.GC()
		return p.Value() == nil
	}
	one := vectorBytes("a", model.Vector{{Metric: model.Metric{"pod": model.LabelValue(make([]byte, 1000))}}})
	tests := []struct {
		name     string
		size     int
		maxBytes int64
		// run puts and moves the clock; it returns the weak pointers
		// that must be released and those that must not.
		run                func(c *cache, advance func(time.Duration)) (gone, kept []weak.Pointer[model.Sample])
		wantLen            int
		wantServed, wantNo []string
	}{{
		name: "expired entries are released without being asked for again",
		size: 100, maxBytes: DefaultCacheMaxBytes,
		run: func(c *cache, advance func(time.Duration)) (gone, kept []weak.Pointer[model.Sample]) {
			a := put(c, "a", 1000)
			b := put(c, "b", 1000)
			advance(10 * time.Second)
			d := put(c, "d", 1000)
			return []weak.Pointer[model.Sample]{a, b}, []weak.Pointer[model.Sample]{d}
		},
		wantLen: 1, wantServed: []string{"d"}, wantNo: []string{"a", "b"},
	}, {
		name: "an entry expires at its TTL, not before",
		size: 100, maxBytes: DefaultCacheMaxBytes,
		run: func(c *cache, advance func(time.Duration)) (gone, kept []weak.Pointer[model.Sample]) {
			a := put(c, "a", 1000)
			advance(9 * time.Second)
			b := put(c, "b", 1000)
			return nil, []weak.Pointer[model.Sample]{a, b}
		},
		wantLen: 2, wantServed: []string{"a", "b"},
	}, {
		name: "entries: the oldest goes",
		size: 2, maxBytes: DefaultCacheMaxBytes,
		run: func(c *cache, advance func(time.Duration)) (gone, kept []weak.Pointer[model.Sample]) {
			a := put(c, "a", 1000)
			b := put(c, "b", 1000)
			d := put(c, "d", 1000)
			return []weak.Pointer[model.Sample]{a}, []weak.Pointer[model.Sample]{b, d}
		},
		wantLen: 2, wantServed: []string{"b", "d"}, wantNo: []string{"a"},
	}, {
		name: "bytes: the oldest go until the new result fits",
		size: 100, maxBytes: 2*one + one/2,
		run: func(c *cache, advance func(time.Duration)) (gone, kept []weak.Pointer[model.Sample]) {
			a := put(c, "a", 1000)
			b := put(c, "b", 1000)
			d := put(c, "d", 1000)
			return []weak.Pointer[model.Sample]{a}, []weak.Pointer[model.Sample]{b, d}
		},
		wantLen: 2, wantServed: []string{"b", "d"}, wantNo: []string{"a"},
	}, {
		name: "bytes: a result larger than the bound is not kept",
		size: 100, maxBytes: one / 2,
		run: func(c *cache, advance func(time.Duration)) (gone, kept []weak.Pointer[model.Sample]) {
			return []weak.Pointer[model.Sample]{put(c, "a", 1000)}, nil
		},
		wantLen: 0, wantNo: []string{"a"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Unix(0, 0)
			c := newCache(10*time.Second, tt.size, tt.maxBytes, func() time.Time { return now })
			gone, kept := tt.run(c, func(d time.Duration) { now = now.Add(d) })
			if got := c.len(); got != tt.wantLen {
				t.Errorf("len = %d, want %d", got, tt.wantLen)
			}
			if got, max := c.size(), tt.maxBytes; got > max {
				t.Errorf("size = %d bytes, above the bound %d", got, max)
			}
			for i, p := range gone {
				if !released(p) {
					t.Errorf("result %d still held", i)
				}
			}
			for i, p := range kept {
				if released(p) {
					t.Errorf("result %d released while it should be served", i)
				}
			}
			for _, k := range tt.wantServed {
				if _, ok := c.get(k); !ok {
					t.Errorf("%s not served", k)
				}
			}
			for _, k := range tt.wantNo {
				if _, ok := c.get(k); ok {
					t.Errorf("%s served", k)
				}
			}
		})
	}
}

// The cache benchmarks: go test -run '^$' -bench Cache -count 6 ./adapter/prom
// before and after a change, compared with benchstat.

// BenchmarkCacheGetHit is the common case: concurrent requests answered
// from a few cached queries.
func BenchmarkCacheGetHit(b *testing.B) {
	c := newCache(time.Hour, 4096, DefaultCacheMaxBytes, time.Now)
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
	c := newCache(time.Hour, size, DefaultCacheMaxBytes, time.Now)
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
	c := newCache(time.Hour, size, DefaultCacheMaxBytes, time.Now)
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
