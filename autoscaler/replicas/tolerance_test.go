package replicas

import "testing"

func TestTolerancesWithin(t *testing.T) {
	tests := []struct {
		name  string
		tol   Tolerances
		ratio float64
		want  bool
	}{
		{name: "exactly one", tol: tol(0.1), ratio: 1.0, want: true},
		// 1.0+0.1 and 1.1 are the same float64, so the upper bound is inclusive.
		{name: "upper bound 1.1 is within", tol: tol(0.1), ratio: 1.1, want: true},
		{name: "just above upper bound", tol: tol(0.1), ratio: 1.1000000001, want: false},
		// 1.0-0.1 rounds to the float64 0.9.
		{name: "lower bound 0.9 is within", tol: tol(0.1), ratio: 0.9, want: true},
		{name: "just below lower bound", tol: tol(0.1), ratio: 0.8999999999, want: false},
		{name: "zero tolerance accepts only 1", tol: tol(0), ratio: 1.0000000001, want: false},
		{name: "asymmetric: down 0.36 accepts 0.65", tol: Tolerances{Down: 0.36, Up: 0.1}, ratio: 0.65, want: true},
		{name: "asymmetric: down 0.34 rejects 0.65", tol: Tolerances{Down: 0.34, Up: 0.1}, ratio: 0.65, want: false},
		{name: "asymmetric: up 0.5 accepts 1.5", tol: Tolerances{Down: 0.1, Up: 0.5}, ratio: 1.5, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.tol.Within(tt.ratio); got != tt.want {
				t.Errorf("Within(%v) with %v = %v, want %v", tt.ratio, tt.tol, got, tt.want)
			}
		})
	}
}

func TestNewTolerances(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	tests := []struct {
		name     string
		global   float64
		down, up *float64
		want     Tolerances
	}{
		{name: "global applies to both", global: 0.2, want: Tolerances{Down: 0.2, Up: 0.2}},
		{name: "global zero is kept, as kube-controller-manager keeps an explicit 0", global: 0, want: Tolerances{Down: 0, Up: 0}},
		{name: "per-direction overrides", global: 0.1, down: f(0.3), up: f(0.05), want: Tolerances{Down: 0.3, Up: 0.05}},
		{name: "per-direction zero is kept", global: 0.1, up: f(0), want: Tolerances{Down: 0.1, Up: 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NewTolerances(tt.global, tt.down, tt.up); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
