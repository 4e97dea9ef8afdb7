package conformance

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/tidal-autoscaler/tidal/test/harness"
)

// failure is the error a kube component's command reports when it refuses
// to start (component-base's run.go: `"command failed" err="..."`).
var failure = regexp.MustCompile(`"command failed" err="([^"]*)"`)

// TestRefusedFlagsAsUpstream: where kube-controller-manager refuses an HPA
// flag's value, tidal refuses it with the same message. (Where
// kube-controller-manager accepts one, tidal means the same by it, which
// the profiles compare; the exceptions, a sync period of zero or less and
// negative values, are listed in docs/autoscaling.md.)
func TestRefusedFlagsAsUpstream(t *testing.T) {
	p := baseProfile
	if p.skip != "" {
		t.Skip(p.skip)
	}
	if p.setupErr != nil {
		t.Fatalf("environment: %v", p.setupErr)
	}
	kcm := filepath.Join(p.h.ToolsDir(), "kube-controller-manager")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tidal, err := harness.TidalBinary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	refusal := func(bin string, args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
		if err == nil {
			t.Fatalf("%s %q started; want a refusal:\n%s", filepath.Base(bin), args, out)
		}
		m := failure.FindSubmatch(out)
		if m == nil {
			t.Fatalf("%s %q: no refusal message in:\n%s", filepath.Base(bin), args, out)
		}
		return string(m[1])
	}
	for _, flag := range []string{"--concurrent-horizontal-pod-autoscaler-syncs=0", "--concurrent-horizontal-pod-autoscaler-syncs=-3"} {
		t.Run(flag, func(t *testing.T) {
			up := refusal(kcm, "--controllers=horizontal-pod-autoscaler-controller", flag)
			ti := refusal(tidal, "autoscaler", flag)
			if up != ti {
				t.Errorf("kube-controller-manager says %q, tidal %q", up, ti)
			}
		})
	}
}
