// Package monitor holds the adapter's own metrics, tidal_adapter_*.
//
// They are component-base metrics so that the generic API server serves
// them on its /metrics path, behind the same delegated authorization as
// every other non-probe path: register them with
// Register(legacyregistry.Registerer()) in the binary, or into a throwaway
// metrics.NewKubeRegistry() in tests. Until registered, recording is a
// no-op, so components may be built with New() and never registered.
package monitor

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const namespace, subsystem = "tidal", "adapter"

// Metrics are the adapter's metrics. Label values are bounded: rule is the
// rule's place in the file ("rules[0]", "externalRules[2]"), backend a
// backend name ("default" for --prometheus-url).
type Metrics struct {
	DiscoveryDuration *metrics.HistogramVec
	DiscoveryErrors   *metrics.CounterVec
	DiscoveredMetrics *metrics.GaugeVec
	DiscoveryLastRun  *metrics.Gauge

	QueryDuration *metrics.HistogramVec
	QueryErrors   *metrics.CounterVec
	CacheHits     *metrics.CounterVec
	Coalesced     *metrics.CounterVec

	Reloads          *metrics.CounterVec
	ConfigGeneration *metrics.Gauge

	// ResourceMissing counts metrics.k8s.io objects served without a
	// resource (or left out, resource="all") for lack of samples.
	ResourceMissing *metrics.CounterVec
}

// New returns unregistered metrics.
func New() *Metrics {
	opts := func(name, help string) metrics.CounterOpts {
		return metrics.CounterOpts{Namespace: namespace, Subsystem: subsystem, Name: name, Help: help, StabilityLevel: metrics.ALPHA}
	}
	return &Metrics{
		DiscoveryDuration: metrics.NewHistogramVec(&metrics.HistogramOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "discovery_duration_seconds",
			Help:    "Time taken by one rule's discovery query (/api/v1/series), by rule and result.",
			Buckets: metrics.ExponentialBuckets(0.005, 2, 14), StabilityLevel: metrics.ALPHA,
		}, []string{"rule", "result"}),
		DiscoveryErrors: metrics.NewCounterVec(ptr(opts("discovery_errors_total",
			"Discovery queries that failed, by rule; the rule keeps its last good result.")), []string{"rule"}),
		DiscoveredMetrics: metrics.NewGaugeVec(&metrics.GaugeOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "discovered_metrics",
			Help: "Metrics served after the last discovery, by API (custom, external).", StabilityLevel: metrics.ALPHA,
		}, []string{"api"}),
		DiscoveryLastRun: metrics.NewGauge(&metrics.GaugeOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "discovery_last_run_timestamp_seconds",
			Help: "Unix time at which the last discovery pass ended.", StabilityLevel: metrics.ALPHA,
		}),
		QueryDuration: metrics.NewHistogramVec(&metrics.HistogramOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "query_duration_seconds",
			Help:    "Time to answer a metric request's Prometheus query (cache hits included), by backend and rule.",
			Buckets: metrics.ExponentialBuckets(0.001, 2, 15), StabilityLevel: metrics.ALPHA,
		}, []string{"backend", "rule"}),
		QueryErrors: metrics.NewCounterVec(ptr(opts("query_errors_total",
			"Prometheus queries that failed, by backend, rule and reason (unavailable, timeout, query, bad_value).")), []string{"backend", "rule", "reason"}),
		CacheHits: metrics.NewCounterVec(ptr(opts("query_cache_hits_total",
			"Queries answered from the short result cache, by backend.")), []string{"backend"}),
		Coalesced: metrics.NewCounterVec(ptr(opts("query_coalesced_total",
			"Queries that waited for an identical query in flight instead of sending their own, by backend.")), []string{"backend"}),
		Reloads: metrics.NewCounterVec(ptr(opts("config_reloads_total",
			"Rule file loads, by result (success, failure). A failed load keeps the last good rules.")), []string{"result"}),
		ConfigGeneration: metrics.NewGauge(&metrics.GaugeOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "config_generation",
			Help: "Number of rule files loaded successfully since start (1 after the first load).", StabilityLevel: metrics.ALPHA,
		}),
		ResourceMissing: metrics.NewCounterVec(ptr(opts("resource_metrics_missing_total",
			"metrics.k8s.io objects answered without a resource because its query had no usable sample for them, by object (pod, node) and resource (cpu, memory; all when the object was left out).")), []string{"object", "resource"}),
	}
}

func ptr[T any](v T) *T { return &v }

// Register registers every metric with r.
func (m *Metrics) Register(r Registerer) {
	r.MustRegister(
		m.DiscoveryDuration, m.DiscoveryErrors, m.DiscoveredMetrics, m.DiscoveryLastRun,
		m.QueryDuration, m.QueryErrors, m.CacheHits, m.Coalesced,
		m.Reloads, m.ConfigGeneration,
		m.ResourceMissing,
	)
}

// Registerer is what Register needs; metrics.KubeRegistry is one.
type Registerer interface {
	MustRegister(...metrics.Registerable)
}

var (
	defaultOnce sync.Once
	defaultM    *Metrics
)

// Default returns the process's metrics, registered once into
// component-base's legacyregistry, which the generic API server serves on
// /metrics (behind delegated authorization).
func Default() *Metrics {
	defaultOnce.Do(func() {
		defaultM = New()
		defaultM.Register(legacy{})
	})
	return defaultM
}

type legacy struct{}

func (legacy) MustRegister(cs ...metrics.Registerable) { legacyregistry.MustRegister(cs...) }
