package app

import (
	"context"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apidiscovery "k8s.io/apiserver/pkg/endpoints/discovery"
	"k8s.io/klog/v2"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/tidal-autoscaler/tidal/adapter/delegate"
	"github.com/tidal-autoscaler/tidal/adapter/discovery"
	"github.com/tidal-autoscaler/tidal/adapter/monitor"
	"github.com/tidal-autoscaler/tidal/adapter/provider"
	"github.com/tidal-autoscaler/tidal/adapter/resourcemetrics"
	"github.com/tidal-autoscaler/tidal/internal/version"
)

// Run serves the enabled metrics APIs until ctx is cancelled, then shuts
// the server down and returns. /healthz and /livez come from the generic
// API server; /readyz also waits for the first metric discovery pass to
// end, successful or not, for --prometheus-timeout at most (see
// discovery.HealthChecker). Run may be called once per Config.
func (c *Config) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m := monitor.Default()

	parts, err := c.build(ctx, m)
	if err != nil {
		return err
	}
	// Until the first load the rules are empty; a rule file that does not
	// load stops the adapter here, with every problem in the error.
	if err := parts.reloader.LoadInitial(); err != nil {
		return fmt.Errorf("--config %s: %w", c.Rules.File, err)
	}

	// Both groups are installed here, not by custom-metrics-apiserver:
	// custom.metrics.k8s.io to keep the encodings of shared lists,
	// external.metrics.k8s.io to list each metric's scope in discovery.
	server, err := c.Apiserver.Complete(c.Informers).New(serverName, nil, nil)
	if err != nil {
		return fmt.Errorf("building the API server: %w", err)
	}
	if c.APIs.CustomMetrics {
		var custom cmprovider.CustomMetricsProvider = parts.provider
		if c.APIs.DelegateCustom != "" {
			d, err := delegate.New(delegate.Options{
				Group: delegate.CustomGroup, URL: c.APIs.DelegateCustom, CAFile: c.APIs.DelegateCAFile, Credentials: c.Kube,
				Timeout: c.Prometheus.Timeout, Refresh: c.Rules.RelistInterval,
			})
			if err != nil {
				return err
			}
			dp := delegate.CustomProvider{Own: parts.provider, Delegate: d}
			go d.Run(ctx, dp.OwnNames)
			custom = dp
			klog.InfoS("Sharing custom.metrics.k8s.io: metrics no rule serves are forwarded", "delegate", d.URL())
		}
		if err := installCustomMetrics(server.GenericAPIServer, custom, parts.encodings); err != nil {
			return fmt.Errorf("installing custom.metrics.k8s.io: %w", err)
		}
	}
	if c.APIs.ExternalMetrics {
		var external externalAPI = ownExternal{parts.provider}
		if c.APIs.DelegateExternal != "" {
			d, err := delegate.New(delegate.Options{
				URL: c.APIs.DelegateExternal, CAFile: c.APIs.DelegateCAFile, Credentials: c.Kube,
				Timeout: c.Prometheus.Timeout, Refresh: c.Rules.RelistInterval,
			})
			if err != nil {
				return err
			}
			dp := delegate.Provider{Own: parts.provider, OwnResources: parts.provider.ExternalResources(), Delegate: d}
			go d.Run(ctx, dp.OwnNames)
			external = dp
			klog.InfoS("Sharing external.metrics.k8s.io: metrics no rule serves are forwarded", "delegate", d.URL())
		}
		if err := installExternalMetrics(server.GenericAPIServer, external, external); err != nil {
			return fmt.Errorf("installing external.metrics.k8s.io: %w", err)
		}
	}
	if err := server.GenericAPIServer.AddReadyzChecks(discovery.HealthChecker{D: parts.discoverer, Grace: c.Prometheus.Timeout}); err != nil {
		return fmt.Errorf("adding the discovery readiness check: %w", err)
	}

	// metrics.k8s.io is installed beside the groups custom-metrics-apiserver
	// serves, when enabled and the rule file has resourceRules at start.
	resourceMetrics := false
	if c.APIs.ResourceMetrics {
		if parts.reloader.Current().Resource == nil {
			klog.InfoS("Not serving metrics.k8s.io: the rule file has no resourceRules (they are read at start only)")
		} else {
			rm := resourcemetrics.New(resourcemetrics.Options{
				Rules:   parts.reloader.Current,
				Timeout: 3 * c.Prometheus.Timeout,
				Metrics: m,
			})
			if err := resourcemetrics.Install(ctx, server.GenericAPIServer, rm, parts.objects); err != nil {
				return fmt.Errorf("installing metrics.k8s.io: %w", err)
			}
			resourceMetrics = true
		}
	}

	klog.InfoS("Starting tidal adapter",
		"version", version.Get().Version,
		"prometheus", c.Prometheus.URL.Redacted(),
		"customMetrics", c.APIs.CustomMetrics,
		"externalMetrics", c.APIs.ExternalMetrics,
		"resourceMetrics", resourceMetrics,
		"ruleFile", c.Rules.File,
	)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); parts.discoverer.Run(ctx) }()
	go func() { defer wg.Done(); parts.reloader.Run(ctx) }()
	defer wg.Wait()
	defer cancel()
	if err := server.GenericAPIServer.PrepareRun().RunWithContext(ctx); err != nil {
		return fmt.Errorf("serving: %w", err)
	}
	klog.InfoS("tidal adapter stopped")
	return nil
}

// externalAPI is what external.metrics.k8s.io is served from: the metrics
// and their discovery.
type externalAPI interface {
	cmprovider.ExternalMetricsProvider
	apidiscovery.APIResourceLister
}

// ownExternal is Tidal's own external metrics with their discovery.
type ownExternal struct{ *provider.Provider }

func (o ownExternal) ListAPIResources() []metav1.APIResource {
	return o.Provider.ExternalResources().ListAPIResources()
}
