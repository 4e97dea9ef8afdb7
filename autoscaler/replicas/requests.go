package replicas

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Requests returns the request of resource (milli-units) for every pod in
// pods, keyed by pod name, as upstream's calculateRequests does. Every listed
// pod counts, including deleted, failed and pending ones.
//
//   - container != "" (ContainerResource): the request of the first container
//     with that name among the regular containers then the sidecar init
//     containers; plain init containers are not searched. Errors: "container
//     C not found in Pod P", "missing request for R in container C of Pod P".
//   - container == "" and pod-level requests set (and c.PodLevelResources):
//     the pod's effective pod-level request; absent resource is the error
//     "missing pod-level request for R in Pod P".
//   - otherwise the sum over regular containers and sidecar init containers;
//     any of them without a request for resource is an error.
func (c Config) Requests(pods []Pod, container string, resource corev1.ResourceName) (map[string]int64, error) {
	out := make(map[string]int64, len(pods))
	for _, pod := range pods {
		var (
			req int64
			err error
		)
		if c.PodLevelResources && pod.PodLevelRequests != nil && container == "" {
			v, ok := pod.PodLevelRequests[resource]
			if !ok {
				err = fmt.Errorf("missing pod-level request for %s in Pod %s", resource, pod.Name)
			}
			req = v
		} else {
			req, err = containerRequests(pod, container, resource)
		}
		if err != nil {
			return nil, err
		}
		out[pod.Name] = req
	}
	return out, nil
}

func containerRequests(pod Pod, container string, resource corev1.ResourceName) (int64, error) {
	counted := make([]Container, 0, len(pod.Containers)+len(pod.InitContainers))
	counted = append(counted, pod.Containers...)
	for _, ic := range pod.InitContainers {
		if ic.Sidecar {
			counted = append(counted, ic.Container)
		}
	}
	var total int64
	for _, ct := range counted {
		if container != "" && ct.Name != container {
			continue
		}
		v, ok := ct.Requests[resource]
		if !ok {
			return 0, fmt.Errorf("missing request for %s in container %s of Pod %s", resource, ct.Name, pod.Name)
		}
		total += v
		if container != "" {
			return total, nil
		}
	}
	if container != "" {
		return 0, fmt.Errorf("container %s not found in Pod %s", container, pod.Name)
	}
	return total, nil
}
