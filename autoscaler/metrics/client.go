// Package metrics reads the three metrics APIs for the autoscaler, as
// upstream's HPA metrics client does: Client is one interface over
// metrics.k8s.io, custom.metrics.k8s.io and external.metrics.k8s.io,
// composed of three per-API clients. Where several autoscalers share a
// namespace, its PodMetrics are listed once for all of them, and their
// identical custom and external metrics requests are made once (see
// ShareNamespaceLists): those are the shared metric reads.
package metrics

import (
	"context"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	customapi "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	externalapi "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	resourceclient "k8s.io/metrics/pkg/client/clientset/versioned/typed/metrics/v1beta1"
	customclient "k8s.io/metrics/pkg/client/custom_metrics"
	externalclient "k8s.io/metrics/pkg/client/external_metrics"
	"k8s.io/utils/clock"

	"github.com/tidal-autoscaler/tidal/autoscaler/replicas"
)

// Client reads the three metrics APIs the way upstream's HPA metrics
// client does. Errors carry upstream's texts (see the
// *APIError helpers of package replicas), because they end up in events
// and conditions.
type Client interface {
	// ResourceMetric returns the usage of resource per pod matched by
	// selector, from metrics.k8s.io: the named container's, or the sum
	// over the pod's containers when container is "". Pods lacking the
	// resource get no sample.
	ResourceMetric(ctx context.Context, resource corev1.ResourceName, namespace string, selector labels.Selector, container string) (replicas.PodSamples, error)
	// PodsMetric returns a custom metric of the pods matched by selector.
	PodsMetric(ctx context.Context, metricName, namespace string, selector, metricSelector labels.Selector) (replicas.PodSamples, error)
	// ObjectMetric returns a custom metric of one object, milli-units.
	ObjectMetric(ctx context.Context, metricName, namespace string, ref *autoscalingv2.CrossVersionObjectReference, metricSelector labels.Selector) (int64, error)
	// ExternalMetric returns every series of an external metric,
	// milli-units.
	ExternalMetric(ctx context.Context, metricName, namespace string, selector labels.Selector) ([]int64, error)
}

// customMetricDefaultWindow is the window assumed for a custom metric
// sample that does not state one (upstream's metricServerDefaultMetricWindow).
const customMetricDefaultWindow = time.Minute

// NewRESTClient composes a Client of the three per-API
// clients: metrics.k8s.io, custom.metrics.k8s.io and
// external.metrics.k8s.io.
func NewRESTClient(resource resourceclient.PodMetricsesGetter, custom customclient.CustomMetricsClient, external externalclient.ExternalMetricsClient) Client {
	return newRESTClient(resource, custom, external, nil)
}

// newRESTClient is NewRESTClient on clk (nil: the real clock).
func newRESTClient(resource resourceclient.PodMetricsesGetter, custom customclient.CustomMetricsClient, external externalclient.ExternalMetricsClient, clk clock.PassiveClock) *restMetricsClient {
	reads := newSharedReads(clk)
	return &restMetricsClient{
		resourceMetrics: resourceMetrics{newPodMetricsLister(resource, clk)},
		customMetrics:   customMetrics{custom, reads},
		externalMetrics: externalMetrics{external, reads},
	}
}

type restMetricsClient struct {
	resourceMetrics
	customMetrics
	externalMetrics
}

var _ Client = (*restMetricsClient)(nil)

// ShareNamespaceLists lets the client list a namespace's PodMetrics once
// for all its autoscalers, and make their identical custom and external
// metrics requests once, when shared reports there are several.
func (c *restMetricsClient) ShareNamespaceLists(shared func(namespace string) bool) {
	c.resourceMetrics.ShareNamespaceLists(shared)
	c.customMetrics.reads.shared = shared
}

type resourceMetrics struct {
	pods *podMetricsLister
}

func (c resourceMetrics) ResourceMetric(ctx context.Context, resource corev1.ResourceName, namespace string, selector labels.Selector, container string) (replicas.PodSamples, error) {
	items, err := c.pods.list(ctx, namespace, selector)
	if err != nil {
		return nil, replicas.ResourceMetricsAPIError(err)
	}
	samples, _, err := replicas.ResourceSamples(items, resource, container)
	return samples, err
}

// ShareNamespaceLists lets the client list a namespace's PodMetrics once
// for all its autoscalers when shared reports there are several.
func (c resourceMetrics) ShareNamespaceLists(shared func(namespace string) bool) {
	c.pods.shared = shared
}

// CoverNamespaceLists makes a shared list of a namespace's PodMetrics
// select, with cover's selector, only the pods of the autoscalers that
// will read it.
func (c resourceMetrics) CoverNamespaceLists(cover CoverFunc) {
	c.pods.cover = cover
}

type customMetrics struct {
	client customclient.CustomMetricsClient
	reads  *sharedReads
}

func (c customMetrics) PodsMetric(ctx context.Context, metricName, namespace string, selector, metricSelector labels.Selector) (replicas.PodSamples, error) {
	pods := schema.GroupKind{Kind: "Pod"}
	key := requestKey("pods", namespace, metricName, selector.String(), metricSelector.String())
	v, err := c.reads.read(ctx, namespace, key, func() (any, error) {
		return c.client.NamespacedMetrics(namespace).GetForObjects(pods, selector, metricName, metricSelector)
	})
	if err != nil {
		return nil, replicas.CustomMetricsAPIError(err)
	}
	list := v.(*customapi.MetricValueList)
	if len(list.Items) == 0 {
		return nil, replicas.ErrNoCustomMetrics()
	}
	out := make(replicas.PodSamples, len(list.Items))
	for _, m := range list.Items {
		window := customMetricDefaultWindow
		if m.WindowSeconds != nil {
			window = time.Duration(*m.WindowSeconds) * time.Second
		}
		out[m.DescribedObject.Name] = replicas.Sample{Value: m.Value.MilliValue(), Timestamp: m.Timestamp.Time, Window: window}
	}
	return out, nil
}

func (c customMetrics) ObjectMetric(ctx context.Context, metricName, namespace string, ref *autoscalingv2.CrossVersionObjectReference, metricSelector labels.Selector) (int64, error) {
	gk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind).GroupKind()
	// A Namespace metric is root-scoped and always about the autoscaler's
	// own namespace, whatever ref names.
	rootScoped := gk.Kind == "Namespace" && gk.Group == ""
	name, scope := ref.Name, "namespaced"
	if rootScoped {
		name, scope = namespace, "root"
	}
	// The version of ref is not part of the request.
	key := requestKey("object", scope, namespace, gk.Group, gk.Kind, name, metricName, metricSelector.String())
	v, err := c.reads.read(ctx, namespace, key, func() (any, error) {
		if rootScoped {
			return c.client.RootScopedMetrics().GetForObject(gk, name, metricName, metricSelector)
		}
		return c.client.NamespacedMetrics(namespace).GetForObject(gk, name, metricName, metricSelector)
	})
	if err != nil {
		return 0, replicas.CustomMetricsAPIError(err)
	}
	return v.(*customapi.MetricValue).Value.MilliValue(), nil
}

type externalMetrics struct {
	client externalclient.ExternalMetricsClient
	reads  *sharedReads
}

func (c externalMetrics) ExternalMetric(ctx context.Context, metricName, namespace string, selector labels.Selector) ([]int64, error) {
	key := requestKey("external", namespace, metricName, selector.String())
	v, err := c.reads.read(ctx, namespace, key, func() (any, error) {
		return c.client.NamespacedMetrics(namespace).List(metricName, selector)
	})
	if err != nil {
		return nil, replicas.ExternalMetricsAPIError(err)
	}
	list := v.(*externalapi.ExternalMetricValueList)
	if len(list.Items) == 0 {
		return nil, replicas.ErrNoExternalMetrics()
	}
	out := make([]int64, 0, len(list.Items))
	for _, m := range list.Items {
		out = append(out, m.Value.MilliValue())
	}
	return out, nil
}
