package app

import (
	"context"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/record"
	"k8s.io/metrics/pkg/apis/custom_metrics"

	"github.com/tidal-autoscaler/tidal/adapter/discovery"
	"github.com/tidal-autoscaler/tidal/adapter/internal/encodecache"
	"github.com/tidal-autoscaler/tidal/adapter/monitor"
	"github.com/tidal-autoscaler/tidal/adapter/objects"
	"github.com/tidal-autoscaler/tidal/adapter/prom"
	"github.com/tidal-autoscaler/tidal/adapter/provider"
	"github.com/tidal-autoscaler/tidal/adapter/ruleset"
	"github.com/tidal-autoscaler/tidal/rules/config"
)

// parts are the adapter's components, wired one way: prom <- ruleset <-
// discovery <- provider.
type parts struct {
	reloader   *ruleset.Reloader
	discoverer *discovery.Discoverer
	provider   *provider.Provider
	objects    objects.Lister
	// encodings keeps the encodings of the lists provider shares.
	encodings *encodecache.Cache[custom_metrics.MetricValueList]
}

// build wires the components. Nothing contacts the cluster or Prometheus
// until used: the RESTMapper reads API discovery on first lookup and the
// object caches start on the first request for their resource.
func (c *Config) build(ctx context.Context, m *monitor.Metrics) (*parts, error) {
	kube, err := kubernetes.NewForConfig(c.Kube)
	if err != nil {
		return nil, fmt.Errorf("building the Kubernetes client: %w", err)
	}
	meta, err := metadata.NewForConfig(c.Kube)
	if err != nil {
		return nil, fmt.Errorf("building the Kubernetes metadata client: %w", err)
	}
	mapper := objects.NewMapper(kube.Discovery())

	defOpts := prom.Options{
		Name:       prom.DefaultBackend,
		URL:        c.Prometheus.URL,
		HTTPClient: c.Prometheus.Client,
		Verb:       c.Prometheus.Verb,
		Timeout:    c.Prometheus.Timeout,
		CacheTTL:   c.Prometheus.CacheTTL,
		Metrics:    m,

		MaxResponseBytes:       c.Prometheus.MaxResponseBytes,
		MaxSeriesResponseBytes: c.Prometheus.MaxSeriesResponseBytes,
	}
	def, err := prom.New(defOpts)
	if err != nil {
		return nil, err
	}
	backends := func(named []config.Backend) (*prom.Backends, error) {
		return prom.NewBackends(def, defOpts, named)
	}

	d := discovery.New(discovery.Options{
		Interval: c.Rules.RelistInterval,
		MaxAge:   c.Rules.MaxAge,
		Metrics:  m,
	})
	p := &parts{discoverer: d}
	p.reloader = ruleset.NewReloader(ruleset.ReloaderOptions{
		Path:     c.Rules.File,
		Interval: c.Rules.CheckInterval,
		Load: func(path string, data []byte) (*ruleset.Set, error) {
			return ruleset.Load(path, data, mapper, backends)
		},
		OnChange:  d.SetRules,
		OnFailure: rejectionRecorder(ctx, kube),
		Metrics:   m,
	})
	p.objects = objects.NewNamespacedInformerLister(ctx, meta, c.Namespace)
	p.encodings = encodecache.New[custom_metrics.MetricValueList]()
	p.provider = provider.New(provider.Options{
		Discovery: d,
		Mapper:    mapper,
		Objects:   p.objects,
		Metrics:   m,
		Shared:    p.encodings.Remember,
	})
	return p, nil
}

// rejectionRecorder records a rejected rule file as a Warning Event on
// the adapter's own pod, named by the POD_NAME and POD_NAMESPACE
// environment variables (set them with the downward API). Without them
// the log line and tidal_adapter_config_reloads_total{result="failure"}
// are the signal.
func rejectionRecorder(ctx context.Context, kube kubernetes.Interface) func(error) {
	name, namespace := os.Getenv("POD_NAME"), os.Getenv("POD_NAMESPACE")
	if name == "" || namespace == "" {
		return nil
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events(namespace)})
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: serverName})
	pod := &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: namespace, Name: name}
	return func(err error) {
		msg := err.Error()
		if len(msg) > 1000 {
			msg = msg[:1000] + "..."
		}
		recorder.Eventf(pod, corev1.EventTypeWarning, "RuleFileRejected", "The changed rule file was rejected; the last good rules keep serving: %s", msg)
	}
}
