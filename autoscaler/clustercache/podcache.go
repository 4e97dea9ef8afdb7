package clustercache

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CacheTransform is the transform of the controller's shared informers:
// pods are cut down to what the controller reads (slimPod); any other
// object loses its managed fields (StripManagedFields).
func CacheTransform(obj any) (any, error) {
	if p, ok := obj.(*corev1.Pod); ok {
		return slimPod(p), nil
	}
	return StripManagedFields(obj)
}

// slimPod cuts p down, in place, to what the controller reads of a pod:
// its name, namespace, labels (selectors) and deletion timestamp, and of
// its annotations only controller.kubernetes.io/pod-deletion-cost (which
// spec.scaleDownPodSelection writes only when it changes); the
// requests and restart policies of its containers, its pod-level requests
// and its overhead (replicas.FromV1Pod, with upstream's
// resourcehelpers.PodRequests); its phase, start time and Ready
// condition (pod grouping). The controller caches every pod of the
// cluster, and a pod's environment, volumes, annotations and container
// statuses are most of its size.
func slimPod(p *corev1.Pod) *corev1.Pod {
	var annotations map[string]string
	if v, ok := p.Annotations[corev1.PodDeletionCost]; ok {
		annotations = map[string]string{corev1.PodDeletionCost: v}
	}
	p.ObjectMeta = metav1.ObjectMeta{
		Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
		Labels: p.Labels, DeletionTimestamp: p.DeletionTimestamp, Annotations: annotations,
	}
	resources := p.Spec.Resources
	p.Spec = corev1.PodSpec{
		Containers:     slimContainers(p.Spec.Containers),
		InitContainers: slimContainers(p.Spec.InitContainers),
		Overhead:       p.Spec.Overhead,
	}
	if r := resources; r != nil && r.Requests != nil {
		p.Spec.Resources = &corev1.ResourceRequirements{Requests: r.Requests}
	}
	var ready []corev1.PodCondition
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			ready = []corev1.PodCondition{{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime}}
			break
		}
	}
	p.Status = corev1.PodStatus{Phase: p.Status.Phase, StartTime: p.Status.StartTime, Conditions: ready}
	return p
}

func slimContainers(cs []corev1.Container) []corev1.Container {
	if cs == nil {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		out[i] = corev1.Container{Name: c.Name, Resources: corev1.ResourceRequirements{Requests: c.Resources.Requests}, RestartPolicy: c.RestartPolicy}
	}
	return out
}

// lastApplied is kubectl apply's copy of the whole object as last applied.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// CustomResourceTransform is the transform of the HorizontalAutoscaler
// informer: no managed fields (StripManagedFields), and no kubectl
// last-applied annotation, a second copy of the spec that nothing here
// reads (7 MiB at 10,000 autoscalers). Safe only because a custom
// resource's status update ignores everything but the status: the
// apiserver keeps the stored metadata, so the annotation is not removed
// by the write. (An HPA's status update keeps metadata changes, so its
// annotations stay in the cache.)
func CustomResourceTransform(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		if a := m.GetAnnotations(); a != nil {
			if _, ok := a[lastApplied]; ok {
				delete(a, lastApplied)
				if len(a) == 0 {
					m.SetAnnotations(nil)
				}
			}
		}
	}
	return StripManagedFields(obj)
}

// StripManagedFields drops metadata.managedFields from cached objects:
// the controller never reads them, they are often the largest part of an
// object, and a status update without them leaves them as they are.
func StripManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil && m.GetManagedFields() != nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}
