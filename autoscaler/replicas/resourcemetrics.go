package replicas

import (
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// PodUsage is one item of a metrics.k8s.io PodMetrics list.
type PodUsage struct {
	Name       string
	Timestamp  time.Time
	Window     time.Duration
	Containers []ContainerUsage
}

// ContainerUsage is the usage of one container, milli-units per resource.
type ContainerUsage struct {
	Name  string
	Usage map[corev1.ResourceName]int64
}

var errNoResourceMetrics = errors.New("no metrics returned from resource metrics API")

// ResourceSamples turns a metrics.k8s.io PodMetrics list (listed with the
// target's selector) into per-pod samples of resource, as upstream's resource
// metrics client does, and returns the first item's timestamp.
//
// container == "": a pod's sample is the sum over its containers; a pod with
// no containers, or with a container lacking the resource, gets no sample.
// container != "": the named container's usage; a pod without that container,
// or whose container lacks the resource, gets no sample. An empty list is the
// error "no metrics returned from resource metrics API".
func ResourceSamples(items []PodUsage, resource corev1.ResourceName, container string) (PodSamples, time.Time, error) {
	if len(items) == 0 {
		return nil, time.Time{}, errNoResourceMetrics
	}
	out := make(PodSamples, len(items))
	for _, m := range items {
		if container != "" {
			for _, c := range m.Containers {
				if c.Name != container {
					continue
				}
				if v, ok := c.Usage[resource]; ok {
					out[m.Name] = Sample{Value: v, Timestamp: m.Timestamp, Window: m.Window}
				}
				break
			}
			continue
		}
		if len(m.Containers) == 0 {
			continue
		}
		var sum int64
		complete := true
		for _, c := range m.Containers {
			v, ok := c.Usage[resource]
			if !ok {
				complete = false
				break
			}
			sum += v
		}
		if complete {
			out[m.Name] = Sample{Value: sum, Timestamp: m.Timestamp, Window: m.Window}
		}
	}
	return out, items[0].Timestamp, nil
}

// FromV1beta1PodMetrics converts a metrics.k8s.io/v1beta1 PodMetrics list.
func FromV1beta1PodMetrics(items []metricsv1beta1.PodMetrics) []PodUsage {
	out := make([]PodUsage, 0, len(items))
	for _, m := range items {
		pu := PodUsage{Name: m.Name, Timestamp: m.Timestamp.Time, Window: m.Window.Duration}
		for _, c := range m.Containers {
			pu.Containers = append(pu.Containers, ContainerUsage{Name: c.Name, Usage: milliRequests(c.Usage)})
		}
		out = append(out, pu)
	}
	return out
}
