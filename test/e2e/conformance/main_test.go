package conformance

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"

	"github.com/tidal-autoscaler/tidal/test/harness"
	"github.com/tidal-autoscaler/tidal/test/metricsserver"
)

// syncPeriod is both controllers' --horizontal-pod-autoscaler-sync-period
// in every profile (a zero period is refused by tidal: see
// TestRefusedFlagsAsUpstream).
const syncPeriod = 5 * time.Second

// profile is one configuration of both controllers. Each profile has a
// control plane of its own, because kube-controller-manager's HPA
// controller reconciles every HorizontalPodAutoscaler of its cluster.
type profile struct {
	name string
	// downscale is --horizontal-pod-autoscaler-downscale-stabilization.
	downscale time.Duration
	// flags are given to both controllers besides the sync period and the
	// downscale stabilization.
	flags []string
	// only lists the scenarios run in this profile; nil runs them all.
	only []string

	// skip is why the profile does not run (TIDAL_CONFORMANCE_PROFILES).
	skip string
	// modes are the modes of tidal compared (TIDAL_CONFORMANCE_MODES).
	modes map[string]bool

	h       *harness.Harness
	metrics *metricsserver.Server
	dyn     dynamic.Interface
	// setupErr is why the profile's environment could not be built; its
	// tests fail with it.
	setupErr error
}

// controllerFlags are the flags of both controllers in p.
//
// The client rate limit is the same for both, high enough that neither
// reconciles less often than every sync period. At kube-controller-manager's
// default 20 QPS the upstream HPA controller, which reconciles every HPA of
// its cluster (about 130 in base: two twins a scenario), took over 20 s to
// come round to one, and a step could count as settled before it wrote the
// status after a rescale (current=5 against tidal's 8), or it skipped an
// intermediate stage tidal saw.
func (p *profile) controllerFlags() []string {
	return append([]string{
		"--kube-api-qps=200", "--kube-api-burst=400",
		"--horizontal-pod-autoscaler-sync-period=" + syncPeriod.String(),
		"--horizontal-pod-autoscaler-downscale-stabilization=" + p.downscale.String(),
	}, p.flags...)
}

// settleDefault outlasts the legacy downscale stabilization by more than a
// sync period, so a held-back scale-down is not taken as settled.
func (p *profile) settleDefault() time.Duration {
	return max(p.downscale+7*time.Second, 12*time.Second)
}

func (p *profile) runs(name string) bool {
	return p.only == nil || slices.Contains(p.only, name)
}

// The profiles. "base" runs every scenario with the defaults but for a
// short downscale stabilization (legacy scale-downs happen within a
// scenario). "zero" gives every flag kube-controller-manager accepts at
// zero; "tuned" gives them values other than the defaults. Those two run
// the scenarios whose decisions the flags change.
var (
	baseProfile = &profile{name: "base", downscale: 15 * time.Second, flags: []string{
		"--horizontal-pod-autoscaler-tolerance=0.1",
		"--horizontal-pod-autoscaler-cpu-initialization-period=5m",
		"--horizontal-pod-autoscaler-initial-readiness-delay=30s",
		"--concurrent-horizontal-pod-autoscaler-syncs=5",
	}}
	zeroProfile = &profile{name: "zero", downscale: 0, flags: []string{
		"--horizontal-pod-autoscaler-tolerance=0",
		"--horizontal-pod-autoscaler-cpu-initialization-period=0s",
		"--horizontal-pod-autoscaler-initial-readiness-delay=0s",
		"--concurrent-horizontal-pod-autoscaler-syncs=5",
	}, only: zeroScenarios}
	tunedProfile = &profile{name: "tuned", downscale: 25 * time.Second, flags: []string{
		"--horizontal-pod-autoscaler-tolerance=0.3",
		"--horizontal-pod-autoscaler-cpu-initialization-period=1s",
		"--horizontal-pod-autoscaler-initial-readiness-delay=10m",
		"--concurrent-horizontal-pod-autoscaler-syncs=1",
	}, only: flagScenarios}
	profiles = []*profile{baseProfile, zeroProfile, tunedProfile}
)

// zeroScenarios are flagScenarios but for "zero-external": without a
// downscale stabilization, "from zero" goes back to 0 at every reconcile
// that finds none of the new pods ready yet (an External Value counts ready
// pods), then up again. Upstream and tidal both do, and how many times is
// timing (0 3 0 3 4 against 0 3 0 3 4 0 3 0 3 4 in one CI run).
var zeroScenarios = []string{
	"cpu-util-up-down", "cpu-util-tolerance", "cpu-unready-pod", "cpu-unready-then-ready", "cpu-pending-pod",
	"cpu-missing-pod", "pods-missing", "object-value", "external-value", "external-average-selector",
	"behavior-default-down-window", "multi-one-failing-no-down",
}

// flagScenarios are the scenarios whose decisions depend on the tolerance,
// the downscale stabilization, the cpu initialization period or the
// initial readiness delay.
var flagScenarios = append(slices.Clone(zeroScenarios), "zero-external")

func TestMain(m *testing.M) {
	flag.Parse()
	// Scenarios spend their time waiting for sync periods, not computing:
	// run them all at once unless -test.parallel was given.
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		_ = flag.Set("test.parallel", "128")
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "tidal-conformance-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	// Build the binary once, before the profiles start it together.
	if _, err := harness.TidalBinary(ctx); err != nil {
		for _, p := range profiles {
			p.setupErr = err
		}
		return harness.RunTests(m)
	}
	selected, err := selectProfiles(os.Getenv(profilesEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	modes, err := selectModes(os.Getenv(modesEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var wg sync.WaitGroup
	for _, p := range profiles {
		p.modes = modes
		if !selected[p.name] {
			p.skip = fmt.Sprintf("profile %s not in %s", p.name, profilesEnv)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.setupErr = p.start(ctx, filepath.Join(dir, p.name))
		}()
	}
	wg.Wait()
	fmt.Fprintf(os.Stderr, "conformance: environments ready in %s\n", time.Since(start).Round(time.Millisecond))
	code := harness.RunTests(m)
	cancel()
	for _, p := range profiles {
		if p.metrics != nil {
			_ = p.metrics.Wait()
		}
		if p.h != nil {
			if err := p.h.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, "stop harness:", err)
			}
		}
	}
	if code == 0 {
		_ = os.RemoveAll(dir)
	} else {
		fmt.Fprintf(os.Stderr, "conformance: harness files and logs kept in %s\n", dir)
	}
	return code
}

// profilesEnv names the profiles to run, comma-separated (default all);
// `make conformance-random` runs only base.
const profilesEnv = "TIDAL_CONFORMANCE_PROFILES"

func selectProfiles(list string) (map[string]bool, error) {
	selected := map[string]bool{}
	for _, p := range profiles {
		selected[p.name] = list == ""
	}
	if list == "" {
		return selected, nil
	}
	for _, name := range strings.Split(list, ",") {
		if _, ok := selected[name]; !ok {
			return nil, fmt.Errorf("%s=%q: no profile %q", profilesEnv, list, name)
		}
		selected[name] = true
	}
	return selected, nil
}

// start builds p's control plane: the upstream HPA controller with p's
// flags, the test metrics server, the CRD and tidal in each of p's modes
// with the same flags.
func (p *profile) start(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	h, err := harness.Start(ctx, harness.Options{
		Dir: dir, ControllerManager: true, Scheduler: true, Kwok: true,
		HPAController: true, HPAControllerArgs: p.controllerFlags(),
		// The workload controllers (not the HPA controller under test)
		// create the twins' pods without client throttling: all scenarios
		// start together, and at the default 20 QPS new pods lagged a sync
		// period (5 s) behind a scale-up. Then whichever controller
		// reconciled during the lag counted a pending pod and took an extra
		// intermediate step (e.g. 3, 5, 6, 8 against 3, 5, 8), a timing
		// difference and not a decision difference.
		ControllerManagerArgs: []string{"--kube-api-qps=300", "--kube-api-burst=600",
			"--concurrent-replicaset-syncs=20", "--concurrent-deployment-syncs=20", "--concurrent-statefulset-syncs=20"},
		// Beta and on by default in v1.37; explicit, as the scale-to-zero
		// scenarios need it on the apiserver and both controllers.
		FeatureGates: []string{"HPAScaleToZero=true"},
		Logf: func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, "[%s] "+format+"\n", append([]any{p.name}, args...)...)
		},
	})
	p.h = h
	if err != nil {
		return err
	}
	if p.metrics, err = metricsserver.Start(ctx, h, metricsserver.Options{}); err != nil {
		return fmt.Errorf("test metrics server: %w", err)
	}
	if p.dyn, err = dynamic.NewForConfig(h.Admin); err != nil {
		return err
	}
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	if _, err := h.ApplyCRDs(ctx, filepath.Join(root, "manifests", "crd")); err != nil {
		return err
	}
	if err := applyScalableCRD(ctx, h); err != nil {
		return err
	}
	bin, err := harness.TidalBinary(ctx)
	if err != nil {
		return err
	}
	args := p.controllerFlags()
	if p.modes[modeNative] {
		if err := restrictUpstream(ctx, h); err != nil {
			return err
		}
		if err := startNative(ctx, h, bin, args); err != nil {
			return err
		}
	}
	if !p.modes[modeCRD] {
		return nil
	}
	// `tidal autoscaler --mode=crd` under the harness: its own service
	// account with the RBAC of manifests/rbac-autoscaler.yaml, leader
	// election; it returns once tidal holds the lease.
	_, err = h.StartAutoscaler(ctx, harness.AutoscalerOptions{Binary: bin, Args: args})
	return err
}
