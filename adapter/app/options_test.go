package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// parse applies args to fresh options through the real flag sections.
func parse(t *testing.T, args ...string) *Options {
	t.Helper()
	o := NewOptions()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	nfs := o.Flags()
	for _, name := range nfs.Order {
		fs.AddFlagSet(nfs.FlagSets[name])
	}
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parsing %q: %v", args, err)
	}
	return o
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaults(t *testing.T) {
	o := NewOptions()
	if o.SecureServing.BindPort != 6443 {
		t.Errorf("secure port = %d, want 6443", o.SecureServing.BindPort)
	}
	if o.SecureServing.ServerCert.PairName != "tidal-adapter" {
		t.Errorf("pair name = %q, want tidal-adapter", o.SecureServing.ServerCert.PairName)
	}
	if got := strings.Join(o.Authorization.AlwaysAllowPaths, ","); got != "/healthz,/livez,/readyz" {
		t.Errorf("always allowed paths = %s", got)
	}
	if o.Rules.RelistInterval != time.Minute || o.Rules.effectiveMaxAge() != time.Minute {
		t.Errorf("relist = %s, max age = %s, want 1m and 1m", o.Rules.RelistInterval, o.Rules.effectiveMaxAge())
	}
	if !o.APIs.CustomMetrics || !o.APIs.ExternalMetrics || !o.APIs.ResourceMetrics {
		t.Errorf("APIs = %+v, want all enabled", o.APIs)
	}
	if o.Prometheus.Verb != "GET" {
		t.Errorf("verb = %q, want GET", o.Prometheus.Verb)
	}
}

// TestProfilingFlag: /debug/pprof/ is served only with --profiling.
func TestProfilingFlag(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := writeKubeconfig(t, dir, closedAddress(t))
	tests := []struct {
		name string
		args []string
		want bool
	}{
		{name: "off by default", want: false},
		{name: "--profiling", args: []string{"--profiling"}, want: true},
		{name: "--profiling=false", args: []string{"--profiling=false"}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := parse(t, append([]string{"--prometheus-url=http://prometheus.invalid:9090", "--kubeconfig=" + kubeconfig, "--authentication-skip-lookup"}, tt.args...)...)
			cfg, ln := configOn(t, o)
			defer ln.Close()
			if got := cfg.Apiserver.GenericConfig.EnableProfiling; got != tt.want {
				t.Errorf("profiling = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "f", "x")
	missing := filepath.Join(dir, "missing")
	const url = "--prometheus-url=http://prometheus:9090"

	tests := []struct {
		name string
		args []string
		// want holds one substring per expected error, in any order.
		want []string
	}{{
		name: "minimal valid",
		args: []string{url},
	}, {
		name: "everything valid",
		args: []string{url, "--prometheus-verb=POST", "--prometheus-token-file=" + file, "--prometheus-ca-file=" + file,
			"--prometheus-client-tls-cert-file=" + file, "--prometheus-client-tls-key-file=" + file,
			"--prometheus-header=X-Scope-OrgID=a", "--prometheus-header=X-Scope-OrgID=b", "--prometheus-http-config=" + file,
			"--config=" + file, "--metrics-relist-interval=30s", "--metrics-max-age=5m", "--enable-resource-metrics=false",
			"--kubeconfig=" + file, "--logging-format=json"},
	}, {
		name: "a delegate for external metrics",
		args: []string{url, "--delegate-external-metrics=https://keda-operator-metrics-apiserver.keda.svc:443", "--delegate-ca-file=" + file},
	}, {
		name: "a delegate without the API it shares, a CA without a delegate, a missing CA",
		args: []string{url, "--delegate-external-metrics=https://keda.svc", "--enable-external-metrics=false", "--delegate-ca-file=" + missing},
		want: []string{"--delegate-external-metrics is set but --enable-external-metrics is false", "--delegate-ca-file"},
	}, {
		name: "one namespace",
		args: []string{url, "--namespace=team-a"},
	}, {
		name: "a namespace that cannot be one",
		args: []string{url, "--namespace=Team_A"},
		want: []string{`--namespace "Team_A" is not a namespace name`},
	}, {
		name: "a delegate CA alone",
		args: []string{url, "--delegate-ca-file=" + file},
		want: []string{"--delegate-ca-file is set without --delegate-external-metrics or --delegate-custom-metrics"},
	}, {
		name: "a custom metrics delegate without custom metrics",
		args: []string{url, "--delegate-custom-metrics=https://adapter.monitoring.svc", "--enable-custom-metrics=false"},
		want: []string{"--delegate-custom-metrics is set but --enable-custom-metrics is false"},
	}, {
		name: "url missing",
		want: []string{"--prometheus-url is required"},
	}, {
		name: "bad urls and verb",
		args: []string{"--prometheus-url=prometheus:9090", "--prometheus-verb=PUT"},
		want: []string{"must use http or https", `--prometheus-verb must be GET or POST, got "PUT"`},
	}, {
		name: "url without host",
		args: []string{"--prometheus-url=http://"},
		want: []string{"has no host"},
	}, {
		name: "key without cert, missing files",
		args: []string{url, "--prometheus-client-tls-key-file=" + missing, "--prometheus-ca-file=" + missing,
			"--prometheus-token-file=" + missing, "--prometheus-http-config=" + dir, "--config=" + missing, "--kubeconfig=" + missing},
		want: []string{"must be set together", "--prometheus-client-tls-key-file", "--prometheus-ca-file",
			"--prometheus-token-file", "--prometheus-http-config", "--config", "--kubeconfig"},
	}, {
		name: "bad headers",
		args: []string{url, "--prometheus-header=novalue", "--prometheus-header=Bad Name=x", "--prometheus-header=authorization=Bearer x"},
		want: []string{`"novalue" must be key=value`, "not a valid header name", "Authorization is set by the client itself"},
	}, {
		name: "bad relist and max age",
		args: []string{url, "--metrics-relist-interval=0", "--metrics-max-age=-1s"},
		want: []string{"--metrics-relist-interval must be positive", "--metrics-max-age must not be negative"},
	}, {
		name: "max age below relist",
		args: []string{url, "--metrics-relist-interval=5m", "--metrics-max-age=1m"},
		want: []string{"must not be less than --metrics-relist-interval"},
	}, {
		name: "every API off",
		args: []string{url, "--enable-custom-metrics=false", "--enable-external-metrics=false", "--enable-resource-metrics=false"},
		want: []string{"enable at least one API"},
	}, {
		name: "generic options are validated too",
		args: []string{url, "--secure-port=70000", "--logging-format=xml"},
		want: []string{"--secure-port 70000 must be between", "xml"},
	}, {
		name: "all at once",
		args: []string{"--prometheus-verb=get", "--metrics-relist-interval=-1s", "--prometheus-client-tls-cert-file=" + file,
			"--enable-custom-metrics=false", "--enable-external-metrics=false", "--enable-resource-metrics=false"},
		want: []string{"--prometheus-url is required", "--prometheus-verb", "--metrics-relist-interval", "must be set together", "enable at least one API"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := parse(t, tt.args...).Validate()
			var msgs []string
			for _, err := range errs {
				msgs = append(msgs, err.Error())
			}
			all := strings.Join(msgs, "\n")
			if len(errs) != len(tt.want) {
				t.Errorf("got %d errors, want %d:\n%s", len(errs), len(tt.want), all)
			}
			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Errorf("no error mentions %q; got:\n%s", w, all)
				}
			}
		})
	}
}

// TestRulesOptionsValidate: every problem of the rule flags is reported
// together, as the rule loader reports every problem of a file.
func TestRulesOptionsValidate(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	tests := []struct {
		name string
		opts RulesOptions
		// want holds one substring per expected error, in order.
		want []string
	}{{
		name: "valid",
		opts: RulesOptions{RelistInterval: time.Minute, MaxAge: 5 * time.Minute, CheckInterval: 10 * time.Second},
	}, {
		name: "negative max age and check interval together",
		opts: RulesOptions{RelistInterval: time.Minute, MaxAge: -time.Second, CheckInterval: -time.Second},
		want: []string{"--metrics-max-age must not be negative", "--config-check-interval must not be negative"},
	}, {
		name: "check interval and max age below relist together",
		opts: RulesOptions{RelistInterval: 5 * time.Minute, MaxAge: time.Minute, CheckInterval: -time.Second},
		want: []string{"--config-check-interval must not be negative", "--metrics-max-age (1m0s) must not be less than --metrics-relist-interval (5m0s)"},
	}, {
		name: "every flag wrong",
		opts: RulesOptions{File: missing, RelistInterval: 0, MaxAge: -time.Second, CheckInterval: -time.Second},
		want: []string{"--config", "--metrics-relist-interval must be positive", "--metrics-max-age must not be negative", "--config-check-interval must not be negative"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := tt.opts.Validate()
			if len(errs) != len(tt.want) {
				t.Fatalf("got %d errors, want %d: %v", len(errs), len(tt.want), errs)
			}
			for i, w := range tt.want {
				if !strings.Contains(errs[i].Error(), w) {
					t.Errorf("error %d = %q, want it to mention %q", i, errs[i], w)
				}
			}
		})
	}
}
