package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadAudit(t *testing.T) {
	const (
		done    = `{"stage":"ResponseComplete","verb":"update","objectRef":{"resource":"deployments"}}` + "\n"
		started = `{"stage":"RequestReceived","verb":"get"}` + "\n"
	)
	for _, tc := range []struct {
		name, log string
		want      int    // events reported
		err       string // part of the error, if one is expected
	}{
		{name: "complete lines", log: done + started + done, want: 2},
		{name: "empty log", log: "", want: 0},
		{name: "last line still being written", log: done + `{"stage":"ResponseCompl`, want: 1},
		{name: "bad line in the middle", log: done + "{not json\n" + done, err: "audit.log:2:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.log")
			if err := os.WriteFile(path, []byte(tc.log), 0o644); err != nil {
				t.Fatal(err)
			}
			got := 0
			err := ReadAudit(path, func(*AuditEvent) { got++ })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ReadAudit() error = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ReadAudit() error = %v", err)
			}
			if got != tc.want {
				t.Errorf("ReadAudit() reported %d events, want %d", got, tc.want)
			}
		})
	}
}
