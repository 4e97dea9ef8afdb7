package decision

import (
	"fmt"
	"testing"
)

// TestMessage: message writes what fmt.Sprintf writes, and the shapes a
// reconcile makes (a plain message, "%s" of a string) cost nothing.
func TestMessage(t *testing.T) {
	tests := []struct {
		name   string
		format string
		args   []any
		free   bool
	}{
		{name: "plain", format: "the HPA controller was able to get the target's current scale", free: true},
		{name: "one string", format: "%s", args: []any{"recommended size matches current size"}, free: true},
		{name: "a percent sign without arguments", format: "above 50% of the window"},
		{name: "a verb without its argument", format: "scaled to %d"},
		{name: "one integer", format: "%s", args: []any{7}},
		{name: "a stringer", format: "%s", args: []any{fmt.Stringer(nil)}},
		{name: "two arguments", format: "%s: %d", args: []any{"cpu", 3}},
		{name: "a literal percent", format: "%%s", args: []any{"x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := message(tt.format, tt.args...), fmt.Sprintf(tt.format, tt.args...); got != want {
				t.Errorf("message = %q, want %q", got, want)
			}
			if tt.free {
				if n := testing.AllocsPerRun(100, func() { message(tt.format, tt.args...) }); n != 0 {
					t.Errorf("allocated %v times, want 0", n)
				}
			}
		})
	}
}
