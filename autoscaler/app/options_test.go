package app

import (
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

// TestDefaults pins the defaults kube-controller-manager users expect.
func TestDefaults(t *testing.T) {
	o := NewOptions()
	want := HPAControllerOptions{
		SyncPeriod:                   15 * time.Second,
		Tolerance:                    0.1,
		DownscaleStabilizationWindow: 5 * time.Minute,
		InitialReadinessDelay:        30 * time.Second,
		CPUInitializationPeriod:      5 * time.Minute,
		ConcurrentSyncs:              5,
	}
	if o.HPA != want {
		t.Errorf("HPA defaults = %+v, want %+v", o.HPA, want)
	}
	le := o.LeaderElection
	if !le.LeaderElect || le.ResourceLock != "leases" || le.ResourceName != "tidal-autoscaler" || le.ResourceNamespace != "tidal-system" {
		t.Errorf("leader election defaults = %+v", le)
	}
	if o.KubeAPITimeout != 60*time.Second {
		t.Errorf("--kube-api-timeout = %s, want 60s, the API server's own --request-timeout", o.KubeAPITimeout)
	}
	if o.Mode != "crd" || o.HealthProbeBindAddress != "0.0.0.0:8081" {
		t.Errorf("mode = %q, health address = %q", o.Mode, o.HealthProbeBindAddress)
	}
	if errs := o.Validate(); len(errs) > 0 {
		t.Errorf("defaults do not validate: %v", errs)
	}
}

func TestLeaderElectionNamespaceAlias(t *testing.T) {
	for _, flag := range []string{"--leader-election-namespace", "--leader-elect-resource-namespace"} {
		if got := parse(t, flag+"=autoscaling").LeaderElection.ResourceNamespace; got != "autoscaling" {
			t.Errorf("%s: namespace = %q, want autoscaling", flag, got)
		}
	}
}

func TestValidate(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	tests := []struct {
		name string
		args []string
		// want holds one substring per expected error, in any order.
		want []string
	}{{
		name: "defaults",
	}, {
		name: "native mode, free port, no leader election",
		args: []string{"--mode=native", "--health-probe-bind-address=127.0.0.1:0", "--leader-elect=false", "--leader-elect-lease-duration=0"},
	}, {
		name: "bad mode",
		args: []string{"--mode=CRD"},
		want: []string{`--mode must be "crd" or "native", got "CRD"`},
	}, {
		name: "bad HPA tuning",
		args: []string{"--horizontal-pod-autoscaler-sync-period=0", "--horizontal-pod-autoscaler-tolerance=-0.1",
			"--horizontal-pod-autoscaler-downscale-stabilization=-1s", "--horizontal-pod-autoscaler-initial-readiness-delay=-1s",
			"--horizontal-pod-autoscaler-cpu-initialization-period=-1s", "--concurrent-horizontal-pod-autoscaler-syncs=0"},
		want: []string{"--horizontal-pod-autoscaler-sync-period", "--horizontal-pod-autoscaler-tolerance",
			"--horizontal-pod-autoscaler-downscale-stabilization", "--horizontal-pod-autoscaler-initial-readiness-delay",
			"--horizontal-pod-autoscaler-cpu-initialization-period", "concurrent-horizontal-pod-autoscaler-syncs must be greater than 0, but got 0"},
	}, {
		name: "tolerance of one or more, as kube-controller-manager accepts it",
		args: []string{"--horizontal-pod-autoscaler-tolerance=1.5"},
	}, {
		name: "bad client settings",
		args: []string{"--kube-api-qps=0", "--kube-api-burst=0", "--kube-api-timeout=-1s", "--kubeconfig=" + missing},
		want: []string{"--kube-api-qps", "--kube-api-burst", "--kube-api-timeout must be 0 (no limit) or positive, got -1s", "--kubeconfig"},
	}, {
		name: "no request timeout",
		args: []string{"--kube-api-timeout=0"},
	}, {
		name: "bad leader election timings",
		args: []string{"--leader-elect-lease-duration=10s", "--leader-elect-renew-deadline=10s", "--leader-elect-retry-period=9s"},
		want: []string{"must be greater than --leader-elect-renew-deadline", "--leader-elect-retry-period"},
	}, {
		name: "non-positive leader election timings",
		args: []string{"--leader-elect-retry-period=0"},
		want: []string{"must all be positive"},
	}, {
		name: "bad leader election lock",
		args: []string{"--leader-elect-resource-lock=endpoints", "--leader-elect-resource-name=", "--leader-election-namespace="},
		want: []string{`must be "leases"`, "--leader-elect-resource-name", "--leader-election-namespace"},
	}, {
		name: "bad health addresses",
		args: []string{"--health-probe-bind-address=8081"},
		want: []string{"must be host:port"},
	}, {
		name: "bad health port",
		args: []string{"--health-probe-bind-address=:http"},
		want: []string{"port must be a number"},
	}, {
		name: "bad health host",
		args: []string{"--health-probe-bind-address=example.com:8081"},
		want: []string{"host must be an IP address"},
	}, {
		name: "all at once",
		args: []string{"--mode=hpa", "--horizontal-pod-autoscaler-sync-period=-1s", "--leader-elect-resource-lock=configmaps",
			"--health-probe-bind-address=:99999", "--logging-format=xml"},
		want: []string{"--mode", "--horizontal-pod-autoscaler-sync-period", "--leader-elect-resource-lock", "--health-probe-bind-address", "xml"},
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

// TestHPAFlagsReachTheDecision lists each kube-controller-manager HPA flag
// at zero, at its default and at another value, with what the controller
// receives: zero stays zero (kube-controller-manager applies its defaults
// before parsing flags), except where it is refused (wantErr).
func TestHPAFlagsReachTheDecision(t *testing.T) {
	type got struct {
		window, readiness, cpuInit, period time.Duration
		workers                            int32
	}
	// read is what the controller is built with (see Options.Config).
	read := func(o *Options) (float64, got) {
		d := o.HPA.decisionConfig()
		return d.Tolerance, got{
			window: d.DownscaleStabilizationWindow, readiness: d.Calculator.InitialReadinessDelay,
			cpuInit: d.Calculator.CPUInitializationPeriod, period: o.HPA.SyncPeriod, workers: o.HPA.ConcurrentSyncs,
		}
	}
	_, defaults := read(NewOptions())
	with := func(f func(*got)) got { g := defaults; f(&g); return g }
	tests := []struct {
		name          string
		arg           string
		wantTolerance float64
		want          got
		wantErr       string
	}{
		{name: "tolerance zero", arg: "--horizontal-pod-autoscaler-tolerance=0", wantTolerance: 0, want: defaults},
		{name: "tolerance default", arg: "--horizontal-pod-autoscaler-tolerance=0.1", wantTolerance: 0.1, want: defaults},
		{name: "tolerance other", arg: "--horizontal-pod-autoscaler-tolerance=0.25", wantTolerance: 0.25, want: defaults},
		{name: "downscale stabilization zero", arg: "--horizontal-pod-autoscaler-downscale-stabilization=0s", wantTolerance: 0.1,
			want: with(func(g *got) { g.window = 0 })},
		{name: "downscale stabilization default", arg: "--horizontal-pod-autoscaler-downscale-stabilization=5m", wantTolerance: 0.1, want: defaults},
		{name: "downscale stabilization other", arg: "--horizontal-pod-autoscaler-downscale-stabilization=45s", wantTolerance: 0.1,
			want: with(func(g *got) { g.window = 45 * time.Second })},
		{name: "initial readiness delay zero", arg: "--horizontal-pod-autoscaler-initial-readiness-delay=0s", wantTolerance: 0.1,
			want: with(func(g *got) { g.readiness = 0 })},
		{name: "initial readiness delay default", arg: "--horizontal-pod-autoscaler-initial-readiness-delay=30s", wantTolerance: 0.1, want: defaults},
		{name: "initial readiness delay other", arg: "--horizontal-pod-autoscaler-initial-readiness-delay=2m", wantTolerance: 0.1,
			want: with(func(g *got) { g.readiness = 2 * time.Minute })},
		{name: "cpu initialization period zero", arg: "--horizontal-pod-autoscaler-cpu-initialization-period=0s", wantTolerance: 0.1,
			want: with(func(g *got) { g.cpuInit = 0 })},
		{name: "cpu initialization period default", arg: "--horizontal-pod-autoscaler-cpu-initialization-period=5m", wantTolerance: 0.1, want: defaults},
		{name: "cpu initialization period other", arg: "--horizontal-pod-autoscaler-cpu-initialization-period=90s", wantTolerance: 0.1,
			want: with(func(g *got) { g.cpuInit = 90 * time.Second })},
		{name: "sync period zero is refused", arg: "--horizontal-pod-autoscaler-sync-period=0s",
			wantErr: "--horizontal-pod-autoscaler-sync-period must be positive, got 0s"},
		{name: "sync period default", arg: "--horizontal-pod-autoscaler-sync-period=15s", wantTolerance: 0.1, want: defaults},
		{name: "sync period other", arg: "--horizontal-pod-autoscaler-sync-period=5s", wantTolerance: 0.1,
			want: with(func(g *got) { g.period = 5 * time.Second })},
		{name: "concurrent syncs zero is refused as kube-controller-manager does", arg: "--concurrent-horizontal-pod-autoscaler-syncs=0",
			wantErr: "concurrent-horizontal-pod-autoscaler-syncs must be greater than 0, but got 0"},
		{name: "concurrent syncs default", arg: "--concurrent-horizontal-pod-autoscaler-syncs=5", wantTolerance: 0.1, want: defaults},
		{name: "concurrent syncs other", arg: "--concurrent-horizontal-pod-autoscaler-syncs=1", wantTolerance: 0.1,
			want: with(func(g *got) { g.workers = 1 })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := parse(t, tt.arg)
			errs := o.Validate()
			if tt.wantErr != "" {
				if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), tt.wantErr) {
					t.Fatalf("errors %v, want one starting %q", errs, tt.wantErr)
				}
				return
			}
			if len(errs) > 0 {
				t.Fatalf("unexpected errors: %v", errs)
			}
			tol, g := read(o)
			if tol != tt.wantTolerance || g != tt.want {
				t.Errorf("controller gets tolerance %v %+v, want %v %+v", tol, g, tt.wantTolerance, tt.want)
			}
		})
	}
}
