package replicas

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcehelpers "k8s.io/component-helpers/resource"
)

// Pod is what the calculator needs to know about one pod matched by the scale
// target's selector.
type Pod struct {
	// Name is the pod name; metric samples are matched to pods by name.
	Name string
	// Phase is status.phase.
	Phase corev1.PodPhase
	// Deleted is true when metadata.deletionTimestamp is set.
	Deleted bool
	// Ready is the pod's first condition of type Ready, nil when it has none.
	Ready *ReadyCondition
	// StartTime is status.startTime, nil when unset.
	StartTime *time.Time
	// Containers are the regular containers (spec.containers), in order.
	Containers []Container
	// InitContainers are spec.initContainers, in order.
	InitContainers []InitContainer
	// PodLevelRequests, when non-nil, means pod-level requests are set
	// (spec.resources.requests names at least one resource supported at pod
	// level: cpu, memory, hugepages-*). It then holds the pod's effective
	// requests in milli-units as k8s.io/component-helpers/resource.PodRequests
	// computes them with default options: pod-level values for the supported
	// resources, aggregated container requests for the others, plus
	// spec.overhead. FromV1Pod fills it.
	PodLevelRequests map[corev1.ResourceName]int64
}

// ReadyCondition is the Ready condition of a pod.
type ReadyCondition struct {
	// Status is True, False or Unknown.
	Status corev1.ConditionStatus
	// LastTransitionTime is the condition's lastTransitionTime.
	LastTransitionTime time.Time
}

// Container is a container and its resource requests.
type Container struct {
	Name string
	// Requests maps a resource to its request in milli-units
	// (Quantity.MilliValue). A resource absent from the map has no request.
	Requests map[corev1.ResourceName]int64
}

// InitContainer is an init container. Sidecars (restartPolicy Always) count
// towards the pod's requests; plain init containers do not.
type InitContainer struct {
	Container
	// Sidecar is true when restartPolicy is Always.
	Sidecar bool
}

// Sample is one metric sample for a pod.
type Sample struct {
	// Value in milli-units.
	Value int64
	// Timestamp is the end of the sample's collection window.
	Timestamp time.Time
	// Window is the sample's collection window.
	Window time.Duration
}

// PodSamples maps a pod name to its sample. It may contain pods that are not
// in the pod list (e.g. pods already gone from the informer cache); like
// upstream, such extra samples are kept in the sums where upstream keeps them.
type PodSamples map[string]Sample

func (s PodSamples) clone() PodSamples {
	c := make(PodSamples, len(s))
	for k, v := range s {
		c[k] = v
	}
	return c
}

// FromV1Pod converts a core/v1 Pod (from a lister) into a Pod.
func FromV1Pod(p *corev1.Pod) Pod {
	out := Pod{
		Name:    p.Name,
		Phase:   p.Status.Phase,
		Deleted: p.DeletionTimestamp != nil,
	}
	for i := range p.Status.Conditions {
		c := p.Status.Conditions[i]
		if c.Type == corev1.PodReady {
			out.Ready = &ReadyCondition{Status: c.Status, LastTransitionTime: c.LastTransitionTime.Time}
			break
		}
	}
	if p.Status.StartTime != nil {
		t := p.Status.StartTime.Time
		out.StartTime = &t
	}
	for _, c := range p.Spec.Containers {
		out.Containers = append(out.Containers, Container{Name: c.Name, Requests: milliRequests(c.Resources.Requests)})
	}
	for _, c := range p.Spec.InitContainers {
		out.InitContainers = append(out.InitContainers, InitContainer{
			Container: Container{Name: c.Name, Requests: milliRequests(c.Resources.Requests)},
			Sidecar:   c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways,
		})
	}
	if resourcehelpers.IsPodLevelRequestsSet(p) {
		out.PodLevelRequests = milliRequests(resourcehelpers.PodRequests(p, resourcehelpers.PodResourcesOptions{}))
	}
	return out
}

func milliRequests(rl corev1.ResourceList) map[corev1.ResourceName]int64 {
	if rl == nil {
		return nil
	}
	m := make(map[corev1.ResourceName]int64, len(rl))
	for name, q := range rl {
		m[name] = q.MilliValue()
	}
	return m
}
