// Package metrics reads the three metrics APIs for the autoscaler, as
// upstream's HPA metrics client does: Client is one interface over
// metrics.k8s.io, custom.metrics.k8s.io and external.metrics.k8s.io,
// composed of three per-API clients. Where several autoscalers share a
// namespace, its PodMetrics are listed once for all of them (see
// ShareNamespaceLists): that is the shared metric read.
package metrics

import (
	"context"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	customapi "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	resourceclient "k8s.io/metrics/pkg/client/clientset/versioned/typed/metrics/v1beta1"
	customclient "k8s.io/metrics/pkg/client/custom_metrics"
	externalclient "k8s.io/metrics/pkg/client/external_metrics"

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
	return &restMetricsClient{
		resourceMetrics: resourceMetrics{newPodMetricsLister(resource, nil)},
		customMetrics:   customMetrics{custom},
		externalMetrics: externalMetrics{external},
	}
}

type restMetricsClient struct {
	resourceMetrics
	customMetrics
	externalMetrics
}

var _ Client = (*restMetricsClient)(nil)

type resourceMetrics struct {
	pods *podMetricsLister
}

func (c resourceMetrics) ResourceMetric(ctx context.Context, resource corev1.ResourceName, namespace string, selector labels.Selector, container string) (replicas.PodSamples, error) {
	items, err := c.pods.list(ctx, namespace, selector)
	if err != nil {
		return nil, replicas.ResourceMetricsAPIError(err)
	}
	samples, _, err := replicas.ResourceSamples(replicas.FromV1beta1PodMetrics(items), resource, container)
	return samples, err
}

// ShareNamespaceLists lets the client list a namespace's PodMetrics once
// for all its autoscalers when shared reports there are several.
func (c resourceMetrics) ShareNamespaceLists(shared func(namespace string) bool) {
	c.pods.shared = shared
}

type customMetrics struct {
	client customclient.CustomMetricsClient
}

func (c customMetrics) PodsMetric(_ context.Context, metricName, namespace string, selector, metricSelector labels.Selector) (replicas.PodSamples, error) {
	list, err := c.client.NamespacedMetrics(namespace).GetForObjects(schema.GroupKind{Kind: "Pod"}, selector, metricName, metricSelector)
	if err != nil {
		return nil, replicas.CustomMetricsAPIError(err)
	}
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

func (c customMetrics) ObjectMetric(_ context.Context, metricName, namespace string, ref *autoscalingv2.CrossVersionObjectReference, metricSelector labels.Selector) (int64, error) {
	gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
	var (
		value *customapi.MetricValue
		err   error
	)
	if gvk.Kind == "Namespace" && gvk.Group == "" {
		// A Namespace metric is root-scoped and always about the
		// autoscaler's own namespace, whatever ref names.
		value, err = c.client.RootScopedMetrics().GetForObject(gvk.GroupKind(), namespace, metricName, metricSelector)
	} else {
		value, err = c.client.NamespacedMetrics(namespace).GetForObject(gvk.GroupKind(), ref.Name, metricName, metricSelector)
	}
	if err != nil {
		return 0, replicas.CustomMetricsAPIError(err)
	}
	return value.Value.MilliValue(), nil
}

type externalMetrics struct {
	client externalclient.ExternalMetricsClient
}

func (c externalMetrics) ExternalMetric(_ context.Context, metricName, namespace string, selector labels.Selector) ([]int64, error) {
	list, err := c.client.NamespacedMetrics(namespace).List(metricName, selector)
	if err != nil {
		return nil, replicas.ExternalMetricsAPIError(err)
	}
	if len(list.Items) == 0 {
		return nil, replicas.ErrNoExternalMetrics()
	}
	out := make([]int64, 0, len(list.Items))
	for _, m := range list.Items {
		out = append(out, m.Value.MilliValue())
	}
	return out, nil
}
