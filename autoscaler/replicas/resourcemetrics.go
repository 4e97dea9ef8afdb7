package replicas

import (
	"errors"
	"slices"
	"strings"
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

// ContainerUsage is the usage of one container.
type ContainerUsage struct {
	Name string
	// Usage holds each resource once, sorted by name (see Set). A
	// container reports two or three resources: a slice is a third of a
	// map's memory, and a map per container was most of what was left of
	// a PodMetrics list's decode.
	Usage []ResourceUsage
}

// ResourceUsage is a container's usage of one resource, in milli-units.
type ResourceUsage struct {
	Resource corev1.ResourceName
	Milli    int64
}

// Of returns the container's usage of r; false when it reports none.
func (c ContainerUsage) Of(r corev1.ResourceName) (int64, bool) {
	for _, u := range c.Usage {
		if u.Resource == r {
			return u.Milli, true
		}
	}
	return 0, false
}

// Set records milli as the usage of r, in place of an earlier one (the
// last value of a resource wins, as in a map).
func (c *ContainerUsage) Set(r corev1.ResourceName, milli int64) {
	i, found := slices.BinarySearchFunc(c.Usage, r, func(u ResourceUsage, r corev1.ResourceName) int {
		return strings.Compare(string(u.Resource), string(r))
	})
	if found {
		c.Usage[i].Milli = milli
		return
	}
	c.Usage = slices.Insert(c.Usage, i, ResourceUsage{Resource: r, Milli: milli})
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
				if v, ok := c.Of(resource); ok {
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
			v, ok := c.Of(resource)
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
			cu := ContainerUsage{Name: c.Name}
			if len(c.Usage) > 0 {
				cu.Usage = make([]ResourceUsage, 0, len(c.Usage))
			}
			for r, q := range c.Usage {
				cu.Set(r, q.MilliValue())
			}
			pu.Containers = append(pu.Containers, cu)
		}
		out = append(out, pu)
	}
	return out
}
