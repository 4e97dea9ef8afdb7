package memo

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"weak"

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

// A value is kept for the TTL after it was computed: served until then,
// recomputed from then on, and dropped by any Get once its TTL has passed,
// so the results its version holds are released.
func TestTableTTL(t *testing.T) {
	type get struct {
		after    time.Duration // clock moved before the Get
		key, ver string
		hit      bool
	}
	tests := []struct {
		title   string
		gets    []get
		wantLen int
	}{
		{
			title:   "served before its TTL",
			gets:    []get{{0, "a", "v1", false}, {59 * time.Second, "a", "v1", true}},
			wantLen: 1,
		},
		{
			title:   "recomputed at its TTL",
			gets:    []get{{0, "a", "v1", false}, {time.Minute, "a", "v1", false}, {time.Second, "a", "v1", true}},
			wantLen: 1,
		},
		{
			title:   "the TTL runs from the computation, not from the last hit",
			gets:    []get{{0, "a", "v1", false}, {40 * time.Second, "a", "v1", true}, {20 * time.Second, "a", "v1", false}},
			wantLen: 1,
		},
		{
			title:   "expired keys dropped by a Get of another key",
			gets:    []get{{0, "a", "v1", false}, {0, "b", "v1", false}, {30 * time.Second, "c", "v1", false}, {30 * time.Second, "d", "v1", false}},
			wantLen: 2, // c and d; a and b are gone
		},
	}
	for _, tt := range tests {
		t.Run(tt.title, func(t *testing.T) {
			now := time.Unix(1000, 0)
			tab := NewWithTTL[string, string, string](100, time.Minute)
			tab.now = func() time.Time { return now }
			for i, g := range tt.gets {
				now = now.Add(g.after)
				v, hit := tab.Get(g.key, g.ver, func() string { return g.key + "@" + g.ver })
				if v != g.key+"@"+g.ver || hit != g.hit {
					t.Errorf("get %d (%s, %s) = %q, hit %v; want hit %v", i, g.key, g.ver, v, hit, g.hit)
				}
			}
			if got := tab.Len(); got != tt.wantLen {
				t.Errorf("%d keys held, want %d", got, tt.wantLen)
			}
		})
	}

	t.Run("an expired value and the result its version holds are released", func(t *testing.T) {
		now := time.Unix(1000, 0)
		tab := New[string, Vector, *model.Sample](100)
		tab.now = func() time.Time { return now }
		remember := func(key string) (weak.Pointer[model.Sample], weak.Pointer[model.Sample]) {
			result := model.Vector{{Value: 1}}
			v, _ := tab.Get(key, VectorOf(result), func() *model.Sample { return &model.Sample{Value: 2} })
			return weak.Make(result[0]), weak.Make(v)
		}
		result, value := remember("a")
		now = now.Add(DefaultTTL)
		remember("b")
		runtime.GC()
		runtime.GC()
		if result.Value() != nil || value.Value() != nil {
			t.Errorf("after the TTL: result held %v, value held %v; want both released", result.Value() != nil, value.Value() != nil)
		}
	})
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
