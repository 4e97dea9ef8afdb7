package extensions

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

// syncPeriod is the autoscaler's --horizontal-pod-autoscaler-sync-period.
const syncPeriod = 2 * time.Second

// env is shared by the package's tests: one control plane, one test
// metrics server, one tidal autoscaler. Each test works in a namespace of
// its own and deletes its autoscalers when it ends, so that the others
// count only their own syncs.
var env struct {
	h          *harness.Harness
	dyn        dynamic.Interface
	metrics    *metricsserver.Server
	autoscaler *harness.Autoscaler
	tidal      string // the binary
	setupErr   error
}

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	ctx, cancel := context.WithCancel(context.Background())
	setupCtx, setupCancel := context.WithTimeout(ctx, 5*time.Minute)
	env.setupErr = setup(setupCtx, ctx)
	setupCancel()
	code := harness.RunTests(m)
	cancel()
	if env.metrics != nil {
		_ = env.metrics.Wait()
	}
	if env.h != nil {
		env.h.StopShared(code != 0 || env.setupErr != nil)
	}
	os.Exit(code)
}

// setup starts the shared environment; the metrics server runs until
// runCtx ends.
func setup(ctx, runCtx context.Context) error {
	waitBin := harness.TidalBinaryAsync(ctx)
	dir, err := os.MkdirTemp("", "tidal-e2e-extensions-")
	if err != nil {
		return err
	}
	// No Prometheus: every metric comes from the test metrics server.
	env.h, err = harness.Start(ctx, harness.Options{
		Dir: dir, ControllerManager: true, Scheduler: true, Kwok: true,
		Logf: func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) },
	})
	bin, binErr := waitBin()
	if err != nil {
		return err
	}
	if binErr != nil {
		return binErr
	}
	env.tidal = bin
	h := env.h
	if env.dyn, err = dynamic.NewForConfig(h.Admin); err != nil {
		return err
	}
	if env.metrics, err = metricsserver.Start(runCtx, h, metricsserver.Options{}); err != nil {
		return fmt.Errorf("test metrics server: %w", err)
	}
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	if _, err := h.ApplyCRDs(ctx, filepath.Join(root, "manifests", "crd")); err != nil {
		return err
	}
	env.autoscaler, err = h.StartAutoscaler(ctx, harness.AutoscalerOptions{
		Binary: env.tidal,
		Args:   []string{"--horizontal-pod-autoscaler-sync-period=" + syncPeriod.String()},
	})
	return err
}

// start fails t when the shared environment could not be built; it skips
// in -short runs, which start no servers.
func start(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts the harness")
	}
	if env.setupErr != nil {
		t.Fatalf("environment: %v", env.setupErr)
	}
}
