package adapter

import (
	"context"
	"fmt"
	"testing"

	"github.com/tidal-autoscaler/tidal/test/exporter"
	"github.com/tidal-autoscaler/tidal/test/harness"
)

// BenchmarkPodMetrics measures metrics.k8s.io PodMetrics lists through
// the aggregator as the HPA makes them for a Resource metric: the bench
// pods by label selector, each with an app container's cpu and memory.
func BenchmarkPodMetrics(b *testing.B) {
	runScenario(b, scenario{
		name:    "podmetrics",
		rules:   exporter.ResourceRules,
		apis:    [][2]string{{"metrics.k8s.io", "v1beta1"}},
		path:    fmt.Sprintf("/apis/metrics.k8s.io/v1beta1/namespaces/%s/pods?labelSelector=app%%3D%s", benchNamespace, benchApp),
		prepare: ensureResourceSeries,
	})
}

// ensureResourceSeries gives every bench pod an app container using
// 0.1-1.0 cores and 64-640 MiB, and a pause container (never served).
func ensureResourceSeries(_ context.Context, h *harness.Harness) error {
	for i, pod := range podsWorkload.names {
		h.Exporter.SetPodCPU(benchNamespace, pod, "app", float64(i%10+1)/10)
		h.Exporter.SetPodMemory(benchNamespace, pod, "app", float64((i%10+1)*64<<20))
		h.Exporter.SetPodCPU(benchNamespace, pod, "POD", 0.001)
	}
	return nil
}
