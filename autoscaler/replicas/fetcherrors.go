package replicas

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The helpers below format errors of the I/O side (metrics APIs and the pod
// lister) the way upstream's replica calculator reports them, so that
// conditions, events and errors match. Pass their result as calcErr to
// decision.Failed.

// FetchResourceMetricsError wraps a failure to get resource metrics
// (Resource and ContainerResource). err is, as upstream's metrics client
// produces it, "unable to fetch metrics from resource metrics API: <cause>"
// or the error of ResourceSamples.
func FetchResourceMetricsError(resource corev1.ResourceName, err error) error {
	return fmt.Errorf("unable to get metrics for resource %s: %w", resource, err)
}

// ResourceMetricsAPIError is the metrics client's error for a failed
// metrics.k8s.io list call.
func ResourceMetricsAPIError(err error) error {
	return fmt.Errorf("unable to fetch metrics from resource metrics API: %w", err)
}

// ListPodsError wraps a pod lister failure (any per-pod metric).
func ListPodsError(err error) error {
	return fmt.Errorf("unable to get pods while calculating replica count: %w", err)
}

// FetchPodsMetricError wraps a failure to get a Pods metric. err is
// CustomMetricsAPIError(cause) or ErrNoCustomMetrics().
func FetchPodsMetricError(metricName string, err error) error {
	return fmt.Errorf("unable to get metric %s: %w", metricName, err)
}

// CustomMetricsAPIError is the metrics client's error for a failed
// custom.metrics.k8s.io call.
func CustomMetricsAPIError(err error) error {
	return fmt.Errorf("unable to fetch metrics from custom metrics API: %w", err)
}

// ErrNoCustomMetrics is the metrics client's error for an empty pods metric
// list.
func ErrNoCustomMetrics() error {
	return fmt.Errorf("no metrics returned from custom metrics API")
}

// FetchObjectMetricError wraps a failure to get an Object metric (both
// targets). err is CustomMetricsAPIError(cause).
func FetchObjectMetricError(metricName, kind, namespace, name string, err error) error {
	return fmt.Errorf("unable to get metric %s on %s %s/%s: %w", metricName, kind, namespace, name, err)
}

// FetchExternalMetricError wraps a failure to get an External metric (both
// targets). err is ExternalMetricsAPIError(cause) or ErrNoExternalMetrics().
// An unparsable metric selector is passed to decision.Failed unwrapped.
func FetchExternalMetricError(namespace, metricName string, selector *metav1.LabelSelector, err error) error {
	return fmt.Errorf("unable to get external metric %s/%s/%+v: %s", namespace, metricName, selector, err)
}

// ExternalMetricsAPIError is the metrics client's error for a failed
// external.metrics.k8s.io call.
func ExternalMetricsAPIError(err error) error {
	return fmt.Errorf("unable to fetch metrics from external metrics API: %w", err)
}

// ErrNoExternalMetrics is the metrics client's error for an empty external
// metric list.
func ErrNoExternalMetrics() error {
	return fmt.Errorf("no metrics returned from external metrics API")
}
