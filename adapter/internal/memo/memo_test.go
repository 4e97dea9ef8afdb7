package memo

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

func TestTableGet(t *testing.T) {
	type get struct {
		key, ver string
		want     string // the value returned
		hit      bool
	}
	tests := []struct {
		title string
		size  int
		gets  []get
	}{
		{
			title: "same key and version: remembered",
			size:  4,
			gets:  []get{{"a", "v1", "a@v1", false}, {"a", "v1", "a@v1", true}},
		},
		{
			title: "new version: recomputed and replaces the old one",
			size:  4,
			gets:  []get{{"a", "v1", "a@v1", false}, {"a", "v2", "a@v2", false}, {"a", "v2", "a@v2", true}, {"a", "v1", "a@v1", false}},
		},
		{
			title: "keys are independent",
			size:  4,
			gets:  []get{{"a", "v1", "a@v1", false}, {"b", "v1", "b@v1", false}, {"a", "v1", "a@v1", true}, {"b", "v1", "b@v1", true}},
		},
		{
			title: "full: emptied when a new key comes",
			size:  2,
			gets:  []get{{"a", "v1", "a@v1", false}, {"b", "v1", "b@v1", false}, {"c", "v1", "c@v1", false}, {"a", "v1", "a@v1", false}, {"c", "v1", "c@v1", true}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.title, func(t *testing.T) {
			tab := New[string, string, string](tt.size)
			for i, g := range tt.gets {
				v, hit := tab.Get(g.key, g.ver, func() string { return g.key + "@" + g.ver })
				if v != g.want || hit != g.hit {
					t.Errorf("get %d (%s, %s) = %q, hit %v; want %q, hit %v", i, g.key, g.ver, v, hit, g.want, g.hit)
				}
				if tab.Len() > tt.size {
					t.Errorf("get %d: %d keys held, more than %d", i, tab.Len(), tt.size)
				}
			}
		})
	}
}

// Identical concurrent requests compute once: the others wait and share.
func TestTableGetConcurrent(t *testing.T) {
	tab := New[string, int, int](4)
	var computed atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, _ := tab.Get("k", 1, func() int {
				computed.Add(1)
				time.Sleep(20 * time.Millisecond)
				return 42
			})
			if v != 42 {
				t.Errorf("got %d, want 42", v)
			}
		}()
	}
	wg.Wait()
	if n := computed.Load(); n != 1 {
		t.Errorf("computed %d times, want once", n)
	}
}

func TestVectorOf(t *testing.T) {
	a := model.Vector{{Value: 1}, {Value: 2}}
	b := model.Vector{{Value: 1}, {Value: 2}} // equal content, another result
	tests := []struct {
		title string
		x, y  model.Vector
		same  bool
	}{
		{"the same result", a, a, true},
		{"equal values from another query", a, b, false},
		{"a prefix of the same array", a, a[:1], false},
		{"empty results", model.Vector{}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.title, func(t *testing.T) {
			if got := VectorOf(tt.x) == VectorOf(tt.y); got != tt.same {
				t.Errorf("VectorOf(x) == VectorOf(y) is %v, want %v", got, tt.same)
			}
		})
	}
}
