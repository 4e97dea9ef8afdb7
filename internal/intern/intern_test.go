package intern

import (
	"testing"
	"unsafe"
)

// TestOf: equal bytes give one shared string, a lookup of bytes already
// seen allocates nothing, and the caller's buffer is not kept.
func TestOf(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, s Strings)
	}{
		{"equal bytes share one string", func(t *testing.T, s Strings) {
			a, b := s.Of([]byte("app")), s.Of([]byte("app"))
			if a != "app" || unsafe.StringData(a) != unsafe.StringData(b) {
				t.Errorf("Of(app) twice: %q at %p, %q at %p; want one string", a, unsafe.StringData(a), b, unsafe.StringData(b))
			}
		}},
		{"different bytes stay apart", func(t *testing.T, s Strings) {
			if a, b := s.Of([]byte("app")), s.Of([]byte("tier")); a != "app" || b != "tier" || len(s) != 2 {
				t.Errorf("Of = %q, %q with %d kept; want app, tier, 2", a, b, len(s))
			}
		}},
		{"a repeat allocates nothing", func(t *testing.T, s Strings) {
			b := []byte("web")
			s.Of(b)
			if n := testing.AllocsPerRun(100, func() { s.Of(b) }); n != 0 {
				t.Errorf("a repeated lookup allocated %v times, want 0", n)
			}
		}},
		{"the buffer is not kept", func(t *testing.T, s Strings) {
			b := []byte("web")
			v := s.Of(b)
			b[0] = 'x'
			if v != "web" || s.Of([]byte("web")) != "web" {
				t.Errorf("after the buffer changed: %q", v)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, Strings{}) })
	}
}
