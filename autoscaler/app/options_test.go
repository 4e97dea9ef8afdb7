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
			"--horizontal-pod-autoscaler-cpu-initialization-period", "--concurrent-horizontal-pod-autoscaler-syncs"},
	}, {
		name: "tolerance of one or more",
		args: []string{"--horizontal-pod-autoscaler-tolerance=1"},
		want: []string{"must be in [0, 1)"},
	}, {
		name: "bad client settings",
		args: []string{"--kube-api-qps=0", "--kube-api-burst=0", "--kubeconfig=" + missing},
		want: []string{"--kube-api-qps", "--kube-api-burst", "--kubeconfig"},
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
