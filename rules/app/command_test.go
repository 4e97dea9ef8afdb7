package app

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"

	"github.com/tidal-autoscaler/tidal/rules/internal/wants"
)

func run(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := NewCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestCheckGoodFiles(t *testing.T) {
	tests := []struct {
		name  string
		files []string
		want  []string
	}{
		{"one file", []string{"walkthrough.yaml"}, []string{"walkthrough.yaml: ok: 2 rules, 0 external rules"}},
		{"all kinds of rules", []string{"helm-style.yaml"}, []string{"helm-style.yaml: ok: 3 rules, 1 external rule, resource rules"}},
		{"several files", []string{"default-config.yaml", "tidal-extensions.yaml", "resource-rules.yaml"}, []string{
			"default-config.yaml: ok: 6 rules, 0 external rules",
			"tidal-extensions.yaml: ok: 1 rule, 1 external rule, 2 backends",
			"resource-rules.yaml: ok: 0 rules, 0 external rules, resource rules",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"check"}
			for _, f := range tt.files {
				args = append(args, filepath.Join("..", "testdata", "good", f))
			}
			out, err := run(t, "", args...)
			if err != nil {
				t.Fatalf("check failed: %v\n%s", err, out)
			}
			got := strings.Split(strings.TrimSpace(out), "\n")
			if len(got) != len(tt.want) {
				t.Fatalf("output:\n%s\nwant %d lines", out, len(tt.want))
			}
			for i := range got {
				if !strings.HasSuffix(got[i], tt.want[i]) {
					t.Errorf("line %d = %q, want it to end with %q", i, got[i], tt.want[i])
				}
			}
		})
	}
}

// Each bad file prints exactly its wanted problems, one per line as
// file:line:col, and check returns a *ProblemsError.
func TestCheckBadFiles(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "bad", "*.yaml"))
	if len(files) == 0 {
		t.Fatal("no bad files")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			out, err := run(t, "", "check", f)
			var pe *ProblemsError
			if !errors.As(err, &pe) {
				t.Fatalf("error = %v, want *ProblemsError\n%s", err, out)
			}
			data, _ := os.ReadFile(f)
			wants.Check(t, f, data, pe.Problems)
			if strings.TrimSpace(out) != pe.Problems.Error() {
				t.Errorf("printed:\n%s\nwant the problems one per line:\n%s", out, pe.Problems.Error())
			}
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				if !strings.HasPrefix(line, f+":") {
					t.Errorf("line %q does not start with %s:", line, f)
				}
			}
		})
	}
}

func TestCheckMixed(t *testing.T) {
	good := "../testdata/good/walkthrough.yaml"
	bad := "../testdata/bad/config-backends.yaml"
	out, err := run(t, "", "check", good, bad, "../testdata/missing.yaml")
	var pe *ProblemsError
	if !errors.As(err, &pe) {
		t.Fatalf("error = %v", err)
	}
	tests := []struct {
		name, got, want string
	}{
		{"summary", pe.Error(), "8 problems in 2 of 3 files checked"},
		{"good file still summarised", strings.Split(out, "\n")[0], good + ": ok: 2 rules, 0 external rules"},
		{"missing file", strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n"):]), "../testdata/missing.yaml: cannot read the rule file: open ../testdata/missing.yaml: no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}

func TestCheckStdin(t *testing.T) {
	tests := []struct {
		name    string
		stdin   string
		want    string
		wantErr bool
	}{
		{"clean", "rules: []\n", "-: ok: 0 rules, 0 external rules", false},
		{"problem", "rules:\n- seriesQuery: ''\n", "<stdin>:2:16: rules[0].seriesQuery is empty", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := run(t, tt.stdin, "check", "-")
			if (err != nil) != tt.wantErr || !strings.Contains(out, tt.want) {
				t.Errorf("check - = %q, %v; want output with %q", out, err, tt.want)
			}
		})
	}
}

func TestCheckArgs(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no file", []string{"check"}, "requires at least 1 arg"},
		{"unknown subcommand", []string{"explain", "x"}, "unknown command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := run(t, "", tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want %q", err, tt.want)
			}
		})
	}
}

// Under the tidal root run by component-base's cli.Run (as the main does),
// problems make the process exit with status 1 and a clean file with 0.
func TestExitStatus(t *testing.T) {
	tests := []struct {
		name string
		file string
		want int
	}{
		{"clean", "../testdata/good/sample-config.yaml", 0},
		{"problems", "../testdata/bad/config-regexes.yaml", 1},
		// prometheus-adapter's legacy default rules with its sample
		// externalRules, one of which cannot name a namespace: a warning.
		{"warnings only", "../../test/e2e/peerdiff/testdata/legacy-config.yaml", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := &cobra.Command{Use: "tidal"}
			root.AddCommand(NewCommand())
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetArgs([]string{"rules", "check", tt.file})
			if code := cli.Run(root); code != tt.want {
				t.Errorf("exit status %d, want %d; output:\n%s", code, tt.want, out.String())
			}
		})
	}
}
