package harness

import (
	"strings"
	"testing"
)

func TestBusySeconds(t *testing.T) {
	for _, tc := range []struct {
		name, stat string
		want       float64 // in clock ticks
		err        string
	}{
		{name: "idle and iowait left out", stat: "cpu  100 5 50 1000 30 2 3 4 7 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n", want: 100 + 5 + 50 + 2 + 3 + 4},
		{name: "old kernel without guest fields", stat: "cpu 1 2 3 4 5 6 7 8\n", want: 1 + 2 + 3 + 6 + 7 + 8},
		{name: "not the aggregate line", stat: "cpu0 1 2 3 4 5 6 7 8\n", err: "unexpected /proc/stat"},
		{name: "too few fields", stat: "cpu 1 2 3\n", err: "unexpected /proc/stat"},
		{name: "not a number", stat: "cpu 1 2 x 4 5 6 7 8\n", err: "unexpected /proc/stat"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := busySeconds(tc.stat)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("busySeconds() error = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := tc.want / clockTicks; got != want {
				t.Errorf("busySeconds() = %v, want %v", got, want)
			}
		})
	}
}

func TestMachineBusySeconds(t *testing.T) {
	a, err := MachineBusySeconds()
	if err != nil {
		t.Fatal(err)
	}
	if a <= 0 {
		t.Fatalf("MachineBusySeconds() = %v, want > 0 on a running machine", a)
	}
}
