// Package delegate shares external.metrics.k8s.io and custom.metrics.k8s.io
// with the server that owned them before Tidal (KEDA's metrics server,
// another adapter): a request for a metric no Tidal rule serves is
// forwarded to that server unchanged (namespace, object or selector, metric
// name, metric selector), and API discovery lists both sides' metrics.
//
// The delegate is asked with the adapter's own identity (its Kubernetes
// credentials), not the caller's: Tidal has already authorized the caller
// for the same verb, resource and namespace, and passing the caller on
// would need the aggregator's proxy certificate or the right to
// impersonate anyone, neither of which an adapter should hold. The
// delegate sees Tidal's service account, which needs `get` on
// external.metrics.k8s.io there.
//
// Collisions (a metric both serve): Tidal's rule answers. Each collision
// is logged when first seen and listed by Collisions.
package delegate

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	apidiscovery "k8s.io/apiserver/pkg/endpoints/discovery"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/metrics/pkg/apis/external_metrics"
	externalclient "k8s.io/metrics/pkg/client/external_metrics"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"
)

// Options say where the delegate is and how to reach it.
type Options struct {
	// Group is the API group shared: ExternalGroup (the default) or
	// CustomGroup.
	Group string
	// URL is the delegate's base URL, https://SERVICE.NAMESPACE.svc:PORT
	// for the Service its APIService named.
	URL string
	// CAFile verifies the delegate's serving certificate (the caBundle of
	// its APIService). Empty: the system's roots.
	CAFile string
	// Credentials is the adapter's own Kubernetes client configuration;
	// only its credentials (token, client certificate) are used.
	Credentials *rest.Config
	// Timeout bounds each request to the delegate.
	Timeout time.Duration
	// Refresh is how often the delegate's metric list is read again.
	Refresh time.Duration
}

// The groups a delegate can share.
const (
	ExternalGroup = "external.metrics.k8s.io"
	CustomGroup   = "custom.metrics.k8s.io"
)

// Delegate is the previous owner of a metrics API group.
type Delegate struct {
	o         Options
	client    externalclient.ExternalMetricsClient
	http      *http.Client
	base      string // scheme://host
	discovery discovery.DiscoveryInterface

	mu         sync.Mutex
	resources  []metav1.APIResource
	listErr    error
	collisions []string
}

// New checks o and builds the clients; nothing is asked until Refresh.
func New(o Options) (*Delegate, error) {
	if o.Group == "" {
		o.Group = ExternalGroup
	}
	flag := "--delegate-external-metrics"
	if o.Group == CustomGroup {
		flag = "--delegate-custom-metrics"
	}
	u, err := url.Parse(o.URL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("%s %q: want the https URL of the server that owned %s, e.g. https://keda-operator-metrics-apiserver.keda.svc:443", flag, o.URL, o.Group)
	}
	if o.Credentials == nil {
		return nil, errors.New("delegate: no credentials")
	}
	cfg := rest.CopyConfig(o.Credentials)
	cfg.Host = u.Scheme + "://" + u.Host
	cfg.APIPath = ""
	cfg.TLSClientConfig.Insecure = false
	cfg.TLSClientConfig.ServerName = ""
	cfg.TLSClientConfig.CAFile = o.CAFile
	cfg.TLSClientConfig.CAData = nil
	cfg.Timeout = o.Timeout
	cfg.UserAgent = "tidal-adapter (delegating " + o.Group + ")"
	client, err := externalclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("delegate %s: %w", o.URL, err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("delegate %s: %w", o.URL, err)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("delegate %s: %w", o.URL, err)
	}
	return &Delegate{o: o, client: client, http: hc, base: cfg.Host, discovery: disc}, nil
}

// Run refreshes the delegate's metric list every Options.Refresh until ctx
// ends. own lists Tidal's external metrics: collisions with them are
// looked for every second, since Tidal's list changes with its discovery.
func (d *Delegate) Run(ctx context.Context, own func() []string) {
	refresh := time.NewTicker(d.o.Refresh)
	defer refresh.Stop()
	check := time.NewTicker(time.Second)
	defer check.Stop()
	_ = d.Refresh(own()) // logged
	for {
		select {
		case <-ctx.Done():
			return
		case <-refresh.C:
			_ = d.Refresh(own()) // logged
		case <-check.C:
			d.mu.Lock()
			d.report(own())
			d.mu.Unlock()
		}
	}
}

// Refresh reads the delegate's metrics. On failure the last list is kept
// (its metrics are still forwarded), the error logged once and returned.
func (d *Delegate) Refresh(own []string) error {
	l, err := d.discovery.ServerResourcesForGroupVersion(d.o.Group + "/v1beta1")
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		if d.listErr == nil {
			klog.ErrorS(err, "Cannot list the delegate's metrics; its last list stays in discovery", "group", d.o.Group, "delegate", d.o.URL)
		}
		d.listErr = err
		return err
	}
	if d.listErr != nil {
		klog.InfoS("The delegate's metrics are listed again", "group", d.o.Group, "delegate", d.o.URL)
	}
	d.listErr = nil
	d.resources = l.APIResources
	klog.V(4).InfoS("Listed the delegate's metrics", "group", d.o.Group, "delegate", d.o.URL, "metrics", names(l.APIResources))
	d.report(own)
	return nil
}

// report logs each collision when first seen. d.mu is held.
func (d *Delegate) report(own []string) {
	collisions := Collisions(own, names(d.resources))
	for _, c := range collisions {
		if !slices.Contains(d.collisions, c) {
			klog.InfoS("A metric is served by a Tidal rule and by the delegate; Tidal's rule answers", "group", d.o.Group, "metric", c, "delegate", d.o.URL)
		}
	}
	d.collisions = collisions
}

// Collisions are the metrics both Tidal's rules and the delegate serve, as
// last seen.
func (d *Delegate) Collisions() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.collisions)
}

func names(rs []metav1.APIResource) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Name
	}
	return out
}

// Collisions returns the metrics in both lists, sorted: the collision rule
// is that Tidal's rule answers them.
func Collisions(own, delegate []string) []string {
	var out []string
	for _, n := range delegate {
		if slices.Contains(own, n) && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// Get forwards one request. A delegate that does not answer is a 503
// naming it, for this metric only; an answer with a status (404, 403, ...)
// is passed on as it is.
func (d *Delegate) Get(namespace, metric string, selector labels.Selector) (*external_metrics.ExternalMetricValueList, error) {
	l, err := d.client.NamespacedMetrics(namespace).List(metric, selector)
	if err != nil {
		var st apierrors.APIStatus
		if errors.As(err, &st) && st.Status().Code != 0 {
			return nil, err
		}
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("external metric %q is served by the delegate %s, which did not answer: %v", metric, d.o.URL, err))
	}
	out := &external_metrics.ExternalMetricValueList{Items: make([]external_metrics.ExternalMetricValue, len(l.Items))}
	for i, it := range l.Items {
		out.Items[i] = external_metrics.ExternalMetricValue{
			MetricName:    it.MetricName,
			MetricLabels:  it.MetricLabels,
			Timestamp:     it.Timestamp,
			WindowSeconds: it.WindowSeconds,
			Value:         it.Value,
		}
	}
	return out, nil
}

// Resources are the delegate's metrics as it listed them last.
func (d *Delegate) Resources() []metav1.APIResource {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.resources)
}

// URL is the delegate's base URL.
func (d *Delegate) URL() string { return d.o.URL }

// Provider serves Tidal's external metrics and forwards the others.
type Provider struct {
	// Own are Tidal's external metrics and OwnResources their discovery.
	Own          cmprovider.ExternalMetricsProvider
	OwnResources apidiscovery.APIResourceLister
	Delegate     *Delegate
}

var (
	_ cmprovider.ExternalMetricsProvider = Provider{}
	_ apidiscovery.APIResourceLister     = Provider{}
)

// OwnNames lists Tidal's external metrics.
func (p Provider) OwnNames() []string {
	infos := p.Own.ListAllExternalMetrics()
	out := make([]string, len(infos))
	for i, in := range infos {
		out[i] = in.Metric
	}
	return out
}

// GetExternalMetric answers from Tidal's rules when one serves the metric,
// and from the delegate otherwise.
func (p Provider) GetExternalMetric(ctx context.Context, namespace string, metricSelector labels.Selector, info cmprovider.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
	if slices.Contains(p.OwnNames(), info.Metric) {
		return p.Own.GetExternalMetric(ctx, namespace, metricSelector, info)
	}
	return p.Delegate.Get(namespace, info.Metric, metricSelector)
}

// ListAllExternalMetrics lists both sides' metrics, each once.
func (p Provider) ListAllExternalMetrics() []cmprovider.ExternalMetricInfo {
	out := p.Own.ListAllExternalMetrics()
	own := p.OwnNames()
	for _, r := range p.Delegate.Resources() {
		if !slices.Contains(own, r.Name) {
			out = append(out, cmprovider.ExternalMetricInfo{Metric: r.Name})
		}
	}
	return out
}

// ListAPIResources is API discovery: Tidal's metrics with their scopes,
// then the delegate's others as it lists them.
func (p Provider) ListAPIResources() []metav1.APIResource {
	out := p.OwnResources.ListAPIResources()
	own := p.OwnNames()
	for _, r := range p.Delegate.Resources() {
		if !slices.Contains(own, r.Name) {
			out = append(out, r)
		}
	}
	return out
}
