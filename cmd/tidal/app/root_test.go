package app

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/component-base/cli"

	"github.com/tidal-autoscaler/tidal/internal/version"
)

// run executes tidal with args the way main does (through cli.Run's
// wiring) and returns what it printed.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := NewCommand(context.Background())
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cli.RunNoErrOutput(cmd)
	return out.String(), err
}

func TestHelpSections(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{{
		name: "root",
		args: []string{"--help"},
		want: []string{"Usage:\n  tidal [command]", "Available Commands:", "adapter", "autoscaler", "rules", "version",
			"Global flags:", "Logs flags:", `Use "tidal [command] --help"`},
	}, {
		name: "root without arguments",
		args: nil,
		want: []string{"Available Commands:", "Global flags:"},
	}, {
		name: "adapter",
		args: []string{"adapter", "--help"},
		want: []string{"Usage:\n  tidal adapter [flags]",
			"Generic flags:", "--kubeconfig",
			"Secure serving flags:", "--secure-port int", "(default 6443)", "--cert-dir",
			"Authentication flags:", "--authentication-kubeconfig",
			"Authorization flags:", "--authorization-always-allow-paths",
			"Audit flags:",
			"Prometheus flags:", "--prometheus-url", "--prometheus-verb", "--prometheus-token-file", "--prometheus-ca-file",
			"--prometheus-client-tls-cert-file", "--prometheus-client-tls-key-file", "--prometheus-header", "--prometheus-auth-config",
			"--prometheus-auth-incluster", "--prometheus-http-config", "--lister-kubeconfig", "--disable-http2",
			"Rules flags:", "--config", "--metrics-relist-interval", "--metrics-max-age",
			"Apis flags:", "--enable-custom-metrics", "--enable-external-metrics", "--enable-resource-metrics",
			"Logs flags:", "--logging-format", "-v, --v",
			"Global flags:", "-h, --help"},
	}, {
		name: "autoscaler",
		args: []string{"autoscaler", "--help"},
		want: []string{"Usage:\n  tidal autoscaler [flags]",
			"Generic flags:", "--kubeconfig", "--kube-api-qps", "--kube-api-burst", "--mode",
			"Horizontal pod autoscaler flags:", "--horizontal-pod-autoscaler-sync-period duration", "(default 15s)",
			"--horizontal-pod-autoscaler-tolerance", "(default 0.1)", "--horizontal-pod-autoscaler-downscale-stabilization",
			"--horizontal-pod-autoscaler-initial-readiness-delay", "--horizontal-pod-autoscaler-cpu-initialization-period",
			"--concurrent-horizontal-pod-autoscaler-syncs",
			"Leader election flags:", "--leader-elect ", "--leader-election-namespace", `(default "tidal-system")`,
			"Health flags:", "--health-probe-bind-address", `(default "0.0.0.0:8081")`,
			"Logs flags:", "--logging-format",
			"Global flags:"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := run(t, tt.args...)
			if err != nil {
				t.Fatalf("tidal %q: %v\n%s", tt.args, err, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("tidal %q output lacks %q:\n%s", tt.args, w, out)
				}
			}
		})
	}
}

func TestVersion(t *testing.T) {
	old := version.Version
	version.Version = "v1.2.3-test"
	t.Cleanup(func() { version.Version = old })

	tests := []struct {
		name    string
		args    []string
		check   func(t *testing.T, out string)
		wantErr string
	}{{
		name: "one line",
		args: []string{"version"},
		check: func(t *testing.T, out string) {
			if !strings.HasPrefix(out, "tidal v1.2.3-test ") || strings.Count(out, "\n") != 1 {
				t.Errorf("output = %q, want one line starting with the version", out)
			}
		},
	}, {
		name: "json",
		args: []string{"version", "-o", "json"},
		check: func(t *testing.T, out string) {
			var info version.Info
			if err := json.Unmarshal([]byte(out), &info); err != nil {
				t.Fatalf("output is not JSON: %v\n%s", err, out)
			}
			if info.Version != "v1.2.3-test" || info.GoVersion == "" || info.Platform == "" {
				t.Errorf("info = %+v", info)
			}
		},
	}, {
		name: "yaml",
		args: []string{"version", "--output=yaml"},
		check: func(t *testing.T, out string) {
			if !strings.Contains(out, "version: v1.2.3-test\n") {
				t.Errorf("output = %q, want a version: line", out)
			}
		},
	}, {
		name:    "unknown format",
		args:    []string{"version", "-o", "xml"},
		wantErr: "--output must be json or yaml",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := run(t, tt.args...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want it to mention %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("tidal %q: %v\n%s", tt.args, err, out)
			}
			tt.check(t, out)
		})
	}
}

func TestUnknownArguments(t *testing.T) {
	for _, args := range [][]string{{"bogus"}, {"adapter", "extra"}, {"autoscaler", "extra"}} {
		if _, err := run(t, args...); err == nil {
			t.Errorf("tidal %q succeeded, want an error", args)
		}
	}
}

// TestValidationErrorsReachTheUser checks that a bad flag set fails before
// anything starts, with every problem in the error.
func TestValidationErrorsReachTheUser(t *testing.T) {
	_, err := run(t, "adapter", "--prometheus-verb=PUT", "--metrics-relist-interval=0")
	if err == nil {
		t.Fatal("tidal adapter with bad flags succeeded")
	}
	for _, w := range []string{"--prometheus-url is required", "--prometheus-verb", "--metrics-relist-interval"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
}
