package prom

import (
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
