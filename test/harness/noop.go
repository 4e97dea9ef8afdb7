package harness

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
)

// NoopOptions say how to run the no-op aggregated server
// (test/cmd/noopadapter), the ceiling of the adapter benchmarks.
type NoopOptions struct {
	// Binary is its binary; empty builds ./test/cmd/noopadapter into Dir.
	Binary string
	// Items is the length of every list it answers; Namespace and Metric
	// describe them (defaults: bench, http_requests_per_second).
	Items             int
	Namespace, Metric string
	// APIServices are GROUP/VERSION pairs to register for it; each must
	// become Available.
	APIServices [][2]string
}

// StartNoopAdapter runs the no-op aggregated server as the
// tidal-system/noop-adapter service account, bound like Tidal's adapter,
// serving as the Service of that name, and registers the APIServices.
func (h *Harness) StartNoopAdapter(ctx context.Context, o NoopOptions) (*Adapter, error) {
	bin := o.Binary
	if bin == "" {
		var err error
		if bin, err = BuildNoopAdapter(ctx, filepath.Join(h.Dir, "noopadapter")); err != nil {
			return nil, err
		}
	}
	if o.Namespace == "" {
		o.Namespace = "bench"
	}
	if o.Metric == "" {
		o.Metric = "http_requests_per_second"
	}
	return h.startAggregated(ctx, "noop-adapter", bin, o.APIServices, func(kubeconfig string) []string {
		return []string{"--lister-kubeconfig=" + kubeconfig, fmt.Sprintf("--items=%d", o.Items), "--namespace=" + o.Namespace, "--metric=" + o.Metric}
	})
}

// BuildNoopAdapter builds ./test/cmd/noopadapter into out and returns out.
func BuildNoopAdapter(ctx context.Context, out string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./test/cmd/noopadapter")
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./test/cmd/noopadapter: %w\n%s", err, msg)
	}
	return out, nil
}
