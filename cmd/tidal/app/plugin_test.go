package app

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"k8s.io/component-base/cli"
)

func TestDisplayName(t *testing.T) {
	tests := []struct{ argv0, want string }{
		{"tidal", ""},
		{"/usr/local/bin/tidal", ""},
		{"kubectl-tidal", "kubectl tidal"},
		{"/home/me/.krew/bin/kubectl-tidal", "kubectl tidal"},
		{`C:\bin\kubectl-tidal.exe`, ""}, // a Windows path is not split on Linux
		{"kubectl-tidal.exe", "kubectl tidal"},
		{"kubectl-tidal-x", ""},
		{"kubectl", ""},
	}
	for _, tt := range tests {
		if got := displayName(tt.argv0); got != tt.want {
			t.Errorf("displayName(%q) = %q, want %q", tt.argv0, got, tt.want)
		}
	}
}

// TestKubectlPlugin runs the root command as kubectl runs the plugin
// (argv[0] kubectl-tidal): the subcommands are tidal's, and help names
// the command `kubectl tidal`.
func TestKubectlPlugin(t *testing.T) {
	run := func(argv0 string, args ...string) string {
		t.Helper()
		cmd := newCommand(context.Background(), argv0)
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(args)
		if err := cli.RunNoErrOutput(cmd); err != nil {
			t.Fatalf("%s %q: %v\n%s", argv0, args, err, out.String())
		}
		return out.String()
	}
	out := run("/usr/local/bin/kubectl-tidal", "autoscale", "deployment/web", "--max=3", "--dry-run=client", "-o", "name")
	if out != "horizontalautoscaler.autoscaling.tidal.dev/web\n" {
		t.Errorf("kubectl tidal autoscale printed %q", out)
	}
	for _, tt := range []struct {
		argv0 string
		args  []string
		want  string
	}{
		{"/usr/local/bin/kubectl-tidal", []string{"--help"}, "Usage:\n  kubectl tidal [command]"},
		{"/usr/local/bin/kubectl-tidal", []string{"autoscale", "--help"}, "kubectl tidal autoscale (TYPE NAME | TYPE/NAME)"},
		{"/usr/local/bin/tidal", []string{"--help"}, "Usage:\n  tidal [command]"},
		{"/usr/local/bin/tidal", []string{"autoscale", "--help"}, "tidal autoscale (TYPE NAME | TYPE/NAME)"},
		{"/usr/local/bin/kubectl-tidal", []string{"explain", "--help"}, "kubectl tidal explain (TYPE/NAME | TYPE NAME)"},
		{"/usr/local/bin/tidal", []string{"explain", "--help"}, "tidal explain (TYPE/NAME | TYPE NAME)"},
		// A subcommand without help of its own lists its own flags, not
		// the root's sections.
		{"/usr/local/bin/tidal", []string{"rules", "explain", "--help"}, "--prometheus-url string"},
		{"/usr/local/bin/tidal", []string{"rules", "explain", "--help"}, "tidal rules explain --config FILE"},
	} {
		if out := run(tt.argv0, tt.args...); !strings.Contains(out, tt.want) {
			t.Errorf("%s %q: output does not contain %q:\n%s", tt.argv0, tt.args, tt.want, out)
		}
	}
}
