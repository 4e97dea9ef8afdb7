package harness

import (
	"errors"
	"net"
	"strings"
	"testing"
)

// TestOnFreePorts: a server that finds a chosen port taken (the kernel's
// own "address already in use") is started again on new ports, up to
// portClashRetries times; any other failure is returned at once.
func TestOnFreePorts(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	takenPort := taken.Addr().(*net.TCPAddr).Port
	boom := errors.New("bad flag")
	for _, tc := range []struct {
		name      string
		taken     int   // how many choices hand out the taken port first
		other     error // start's error when it binds
		wantCalls int
		wantErr   string
	}{
		{name: "free at once", wantCalls: 1},
		{name: "taken once, then free", taken: 1, wantCalls: 2},
		{name: "taken twice, then free", taken: 2, wantCalls: 3},
		{name: "taken every time gives up", taken: portClashRetries, wantCalls: portClashRetries, wantErr: "address already in use"},
		{name: "another failure is not retried", other: boom, wantCalls: 1, wantErr: "bad flag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			choices := 0
			pickPorts = func(n int) ([]int, error) {
				choices++
				ports, err := freePorts(n)
				if err == nil && choices <= tc.taken {
					ports[n-1] = takenPort
				}
				return ports, err
			}
			defer func() { pickPorts = freePorts }()
			calls := 0
			err := onFreePorts(2, func(ports []int) error {
				calls++
				if ports[0] == ports[1] {
					t.Errorf("ports %v not distinct", ports)
				}
				for _, p := range ports {
					l, err := net.Listen("tcp", hostPort(p))
					if err != nil {
						return err
					}
					defer l.Close()
				}
				return tc.other
			})
			if calls != tc.wantCalls {
				t.Errorf("start ran %d times, want %d", calls, tc.wantCalls)
			}
			if tc.wantErr == "" && err != nil {
				t.Fatalf("onFreePorts: %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("onFreePorts error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
