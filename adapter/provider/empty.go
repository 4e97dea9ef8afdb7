// Package provider holds the metric providers the adapter serves from.
//
// For now it only has an empty provider: it lists no metrics and answers
// every lookup with NotFound. It lets the adapter serve and register the
// custom.metrics.k8s.io and external.metrics.k8s.io APIs before metrics come
// from anywhere. The Prometheus-backed provider, driven by the rule file,
// replaces it; nothing here pretends to query Prometheus.
package provider

import (
	"context"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	"k8s.io/metrics/pkg/apis/external_metrics"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"
)

// Empty serves no custom and no external metrics.
type Empty struct{}

var (
	_ cmprovider.CustomMetricsProvider   = Empty{}
	_ cmprovider.ExternalMetricsProvider = Empty{}
)

// ListAllMetrics lists no custom metrics.
func (Empty) ListAllMetrics() []cmprovider.CustomMetricInfo { return nil }

// GetMetricByName reports that the metric does not exist for the object.
func (Empty) GetMetricByName(_ context.Context, name types.NamespacedName, info cmprovider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValue, error) {
	if metricSelector == nil || metricSelector.Empty() {
		return nil, cmprovider.NewMetricNotFoundForError(info.GroupResource, info.Metric, name.Name)
	}
	return nil, cmprovider.NewMetricNotFoundForSelectorError(info.GroupResource, info.Metric, name.Name, metricSelector)
}

// GetMetricBySelector reports that the metric does not exist for the resource.
func (Empty) GetMetricBySelector(_ context.Context, _ string, _ labels.Selector, info cmprovider.CustomMetricInfo, _ labels.Selector) (*custom_metrics.MetricValueList, error) {
	return nil, cmprovider.NewMetricNotFoundError(info.GroupResource, info.Metric)
}

// ListAllExternalMetrics lists no external metrics.
func (Empty) ListAllExternalMetrics() []cmprovider.ExternalMetricInfo { return nil }

// namespaces names the resource external metrics are looked up under: the
// API path is /apis/external.metrics.k8s.io/v1beta1/namespaces/NS/METRIC.
var namespaces = schema.GroupResource{Resource: "namespaces"}

// GetExternalMetric reports that the metric does not exist in the namespace.
func (Empty) GetExternalMetric(_ context.Context, namespace string, metricSelector labels.Selector, info cmprovider.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
	if metricSelector == nil || metricSelector.Empty() {
		return nil, cmprovider.NewMetricNotFoundForError(namespaces, info.Metric, namespace)
	}
	return nil, cmprovider.NewMetricNotFoundForSelectorError(namespaces, info.Metric, namespace, metricSelector)
}
