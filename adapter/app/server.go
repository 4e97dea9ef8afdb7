package app

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/tidal-autoscaler/tidal/adapter/provider"
	"github.com/tidal-autoscaler/tidal/internal/version"
)

// Run serves the enabled metrics APIs until ctx is cancelled, then shuts
// the server down and returns. /healthz, /livez and /readyz come from the
// generic API server. Run may be called once per Config.
func (c *Config) Run(ctx context.Context) error {
	// The empty provider stands in until the Prometheus-backed provider
	// (c.Prometheus, c.Rules) replaces it; a nil provider leaves the API
	// group out.
	var (
		custom   cmprovider.CustomMetricsProvider
		external cmprovider.ExternalMetricsProvider
	)
	if c.APIs.CustomMetrics {
		custom = provider.Empty{}
	}
	if c.APIs.ExternalMetrics {
		external = provider.Empty{}
	}

	server, err := c.Apiserver.Complete(c.Informers).New(serverName, custom, external)
	if err != nil {
		return fmt.Errorf("building the API server: %w", err)
	}

	// TODO(resource-metrics): metrics.k8s.io v1beta1 (PodMetrics,
	// NodeMetrics) is installed here, on server.GenericAPIServer, when
	// c.APIs.ResourceMetrics is set. custom-metrics-apiserver does not
	// serve that group, so it needs its own API group installation.
	if c.APIs.ResourceMetrics {
		klog.InfoS("metrics.k8s.io is not served by this build; --enable-resource-metrics has no effect yet")
	}

	klog.InfoS("Starting tidal adapter",
		"version", version.Get().Version,
		"prometheus", c.Prometheus.URL.Redacted(),
		"customMetrics", c.APIs.CustomMetrics,
		"externalMetrics", c.APIs.ExternalMetrics,
		"ruleFile", c.Rules.File,
	)
	if err := server.GenericAPIServer.PrepareRun().RunWithContext(ctx); err != nil {
		return fmt.Errorf("serving: %w", err)
	}
	klog.InfoS("tidal adapter stopped")
	return nil
}
