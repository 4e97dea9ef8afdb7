package conformance

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"

	"github.com/tidal-autoscaler/tidal/test/harness"
	"github.com/tidal-autoscaler/tidal/test/metricsserver"
)

// syncPeriod is both controllers' --horizontal-pod-autoscaler-sync-period.
const syncPeriod = 5 * time.Second

// controllerFlags are given to both controllers, so they are tuned alike.
// The downscale stabilization is short so that legacy (behavior-less)
// scale-downs happen within a scenario.
var controllerFlags = []string{
	"--horizontal-pod-autoscaler-sync-period=" + syncPeriod.String(),
	"--horizontal-pod-autoscaler-downscale-stabilization=15s",
	"--horizontal-pod-autoscaler-tolerance=0.1",
	"--horizontal-pod-autoscaler-cpu-initialization-period=5m",
	"--horizontal-pod-autoscaler-initial-readiness-delay=30s",
	"--concurrent-horizontal-pod-autoscaler-syncs=5",
}

// env is the control plane every test of the package shares.
var env struct {
	h       *harness.Harness
	metrics *metricsserver.Server
	dyn     dynamic.Interface
	// setupErr is why the environment could not be built; tests fail
	// with it.
	setupErr error
}

func TestMain(m *testing.M) {
	flag.Parse()
	// Scenarios spend their time waiting for sync periods, not computing:
	// run them all at once unless -test.parallel was given.
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		_ = flag.Set("test.parallel", "64")
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
	h, err := harness.Start(ctx, harness.Options{
		Dir: dir, ControllerManager: true, Scheduler: true, Kwok: true,
		HPAController: true, HPAControllerArgs: controllerFlags,
		// The workload controllers (not the HPA controller under test)
		// create the twins' pods without client throttling: all scenarios
		// start together, and at the default 20 QPS new pods lagged a sync
		// period (5 s) behind a scale-up. Then whichever controller
		// reconciled during the lag counted a pending pod and took an extra
		// intermediate step (e.g. 3, 5, 6, 8 against 3, 5, 8), a timing
		// difference and not a decision difference.
		ControllerManagerArgs: []string{"--kube-api-qps=300", "--kube-api-burst=600",
			"--concurrent-replicaset-syncs=20", "--concurrent-deployment-syncs=20"},
		// Beta and on by default in v1.37; explicit, as the scale-to-zero
		// scenarios need it on the apiserver and both controllers.
		FeatureGates: []string{"HPAScaleToZero=true"},
		Logf: func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, format+"\n", args...)
		},
	})
	if err != nil {
		env.setupErr = err
		return harness.RunTests(m)
	}
	env.h = h
	env.setupErr = setup(ctx, h)
	fmt.Fprintf(os.Stderr, "conformance: environment ready in %s\n", time.Since(start).Round(time.Millisecond))
	code := harness.RunTests(m)
	cancel()
	if env.metrics != nil {
		_ = env.metrics.Wait()
	}
	if err := h.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop harness:", err)
	}
	if code == 0 {
		_ = os.RemoveAll(dir)
	} else {
		fmt.Fprintf(os.Stderr, "conformance: harness files and logs kept in %s\n", dir)
	}
	return code
}

// setup starts the test metrics server, applies the CRD and runs tidal.
func setup(ctx context.Context, h *harness.Harness) error {
	var err error
	if env.metrics, err = metricsserver.Start(ctx, h, metricsserver.Options{}); err != nil {
		return fmt.Errorf("test metrics server: %w", err)
	}
	if env.dyn, err = dynamic.NewForConfig(h.Admin); err != nil {
		return err
	}
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	if _, err := h.ApplyCRDs(ctx, filepath.Join(root, "manifests", "crd")); err != nil {
		return err
	}
	return startTidal(ctx, h)
}

// startTidal runs `tidal autoscaler --mode=crd` under the harness (its own
// service account with the RBAC of manifests/rbac-autoscaler.yaml, leader
// election) with controllerFlags, and waits until it holds the lease.
func startTidal(ctx context.Context, h *harness.Harness) error {
	bin, err := harness.TidalBinary(ctx)
	if err != nil {
		return err
	}
	_, err = h.StartAutoscaler(ctx, harness.AutoscalerOptions{
		Binary: bin,
		Args:   append([]string{"--kube-api-qps=100", "--kube-api-burst=200"}, controllerFlags...),
	})
	return err
}
