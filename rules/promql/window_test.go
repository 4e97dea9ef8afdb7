package promql

import (
	"testing"
	"time"
)

func TestWindow(t *testing.T) {
	tests := []struct {
		name  string
		query string
		want  time.Duration
	}{
		{"rate", `sum(rate(x{a="b"}[2m])) by (pod)`, 2 * time.Minute},
		{"same range twice", `rate(x[30s]) / rate(y[30s])`, 30 * time.Second},
		{"different ranges", `rate(x[1m]) / rate(y[5m])`, 0},
		{"instant", `sum(x) by (pod)`, 0},
		{"subquery", `max_over_time(x[10m:1m])`, 10 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Window(tt.query); got != tt.want {
				t.Errorf("Window(%q) = %s, want %s", tt.query, got, tt.want)
			}
		})
	}
}
