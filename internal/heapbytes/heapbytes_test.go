package heapbytes

import "testing"

// A kept 4 KiB buffer holds 4 KiB; a value dropped at once holds nothing.
func TestPerObject(t *testing.T) {
	tests := []struct {
		title    string
		build    func(int) any
		min, max float64
	}{
		{title: "kept buffer", build: func(int) any { return make([]byte, 4096) }, min: 4096, max: 4096 * 1.1},
		{title: "nothing kept", build: func(int) any { _ = make([]byte, 4096); return nil }, min: -64, max: 64},
	}
	for _, tt := range tests {
		t.Run(tt.title, func(t *testing.T) {
			if got := PerObject(1000, tt.build); got < tt.min || got > tt.max {
				t.Errorf("PerObject = %.0f bytes, want between %.0f and %.0f", got, tt.min, tt.max)
			}
		})
	}
}
