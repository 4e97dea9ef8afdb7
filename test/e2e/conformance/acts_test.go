package conformance

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/tidal-autoscaler/tidal/test/metricsserver"
)

// Acts change a twin's pods the way a kubelet or a user would; each is
// called once per twin with that twin's target name.

// markFirstPodUnready sets Ready=False on the twin's pod of rank 0, as a
// failing readiness probe would; kwok leaves a Running pod's conditions
// alone.
func markFirstPodUnready(ctx context.Context, p *profile, ns, target string) error {
	return setFirstPodReady(ctx, p, ns, target, corev1.ConditionFalse)
}

// markFirstPodReady sets Ready=True again on the twin's pod of rank 0, as
// a readiness probe that passes again would.
func markFirstPodReady(ctx context.Context, p *profile, ns, target string) error {
	return setFirstPodReady(ctx, p, ns, target, corev1.ConditionTrue)
}

func setFirstPodReady(ctx context.Context, p *profile, ns, target string, status corev1.ConditionStatus) error {
	list, err := p.h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + target})
	if err != nil {
		return err
	}
	pods := make([]*corev1.Pod, 0, len(list.Items))
	for i := range list.Items {
		pods = append(pods, &list.Items[i])
	}
	ranks := metricsserver.Rank(pods)
	for _, pod := range pods {
		if ranks[pod.UID] != 0 || pod.Status.Phase != corev1.PodRunning {
			continue
		}
		pod = pod.DeepCopy()
		for i, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
				pod.Status.Conditions[i].Status = status
				pod.Status.Conditions[i].LastTransitionTime = metav1.Now()
			}
		}
		_, err := p.h.Client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	}
	return fmt.Errorf("no running pod of %s/%s", ns, target)
}

// extraPod is a pod matched by the twin's selector that no node can run,
// so it stays Pending. No ReplicaSet adopts it: their selectors also name
// the pod-template-hash.
func extraPod(ns, target, suffix string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: target + "-" + suffix, Namespace: ns,
			Labels: map[string]string{"app": target, twinLabel: "yes"},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "app", Image: "fake-app:latest",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi"),
				}},
			}},
			NodeSelector: map[string]string{"type": "no-such-node"},
		},
	}
}

// addPendingPod adds a Pending pod to the twin's selection: unready to
// both controllers.
func addPendingPod(ctx context.Context, p *profile, ns, target string) error {
	_, err := p.h.Client.CoreV1().Pods(ns).Create(ctx, extraPod(ns, target, "pending"), metav1.CreateOptions{})
	return err
}

// addFailedPod adds a pod in phase Failed to the twin's selection, which
// both controllers ignore (not unready: it gets no fill-in value).
func addFailedPod(ctx context.Context, p *profile, ns, target string) error {
	pods := p.h.Client.CoreV1().Pods(ns)
	pod, err := pods.Create(ctx, extraPod(ns, target, "failed"), metav1.CreateOptions{})
	if err != nil {
		return err
	}
	// The scheduler writes the pod's PodScheduled condition meanwhile.
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pod.Status.Phase = corev1.PodFailed
		pod.Status.Reason = "Evicted"
		_, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	})
}

// deletingFinalizer keeps a deleted pod in the API with its
// deletionTimestamp set, as a pod in graceful termination is.
const deletingFinalizer = "tidal.test/hold"

// addDeletingPod adds a pod of the twin's selection that is being deleted,
// which both controllers ignore. It stays (a finalizer holds it) for the
// rest of the scenario.
func addDeletingPod(ctx context.Context, p *profile, ns, target string) error {
	pod := extraPod(ns, target, "deleting")
	pod.Finalizers = []string{deletingFinalizer}
	if _, err := p.h.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return err
	}
	return p.h.Client.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{})
}

// both runs two acts in order.
func both(a, b func(ctx context.Context, p *profile, ns, target string) error) func(ctx context.Context, p *profile, ns, target string) error {
	return func(ctx context.Context, p *profile, ns, target string) error {
		if err := a(ctx, p, ns, target); err != nil {
			return err
		}
		return b(ctx, p, ns, target)
	}
}
