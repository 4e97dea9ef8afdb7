package harness

import (
	"context"
	"fmt"
	"os"
)

// StartPrometheusAdapterFrom is StartPrometheusAdapter with the binary bin
// instead of the tools folder's, e.g. one built from test/bench/peer: it
// runs as the tidal-system/prometheus-adapter service account, serving as
// the Service of that name, waits for /healthz and registers the
// APIServices.
func (h *Harness) StartPrometheusAdapterFrom(ctx context.Context, bin string, o PeerOptions) (*Adapter, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("prometheus-adapter binary: %w", err)
	}
	return h.startAggregated(ctx, "prometheus-adapter", bin, o.APIServices, func(kubeconfig string) []string {
		return append([]string{
			"--lister-kubeconfig=" + kubeconfig,
			"--prometheus-url=" + h.PrometheusURL, "--config=" + o.RuleFile,
		}, o.Args...)
	})
}
