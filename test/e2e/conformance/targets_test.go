package conformance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/test/harness"
)

// targetKind is what the twins' autoscalers scale.
type targetKind string

const (
	deploymentTarget  targetKind = "" // the default
	statefulSetTarget targetKind = "StatefulSet"
	// scalableTarget is a custom resource with a /scale subresource; the
	// test plays its controller (mirrorScalables).
	scalableTarget targetKind = "Scalable"
)

// The custom resource with a /scale subresource.
var scalableGVR = schema.GroupVersionResource{Group: "conformance.tidal.test", Version: "v1", Resource: "scalables"}

const scalableCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: scalables.conformance.tidal.test
spec:
  group: conformance.tidal.test
  names: {plural: scalables, singular: scalable, kind: Scalable, listKind: ScalableList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
        labelSelectorPath: .status.selector
`

// mirrorLabel marks the pods mirrorScalables made, so that the extra pods
// a step adds rank apart from them (metricsserver.Rank groups bare pods by
// labels).
const mirrorLabel = "tidal.test/mirror"

func applyScalableCRD(ctx context.Context, h *harness.Harness) error {
	dir, err := os.MkdirTemp("", "tidal-scalable-crd-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "scalable.yaml"), []byte(scalableCRD), 0o644); err != nil {
		return err
	}
	_, err = h.ApplyCRDs(ctx, dir)
	return err
}

func (k targetKind) ref(name string) autoscalingv2.CrossVersionObjectReference {
	switch k {
	case statefulSetTarget:
		return autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: name}
	case scalableTarget:
		return autoscalingv2.CrossVersionObjectReference{APIVersion: scalableGVR.GroupVersion().String(), Kind: "Scalable", Name: name}
	}
	return autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name}
}

// createTarget creates one twin's target with the given replicas; its pods
// are labelled app=NAME and twinLabel.
func createTarget(ctx context.Context, p *profile, ns, name string, k targetKind, replicas int32, podSpec func(*corev1.PodSpec)) error {
	d := harness.Deployment(ns, name, replicas)
	d.Spec.Template.Labels[twinLabel] = "yes"
	if podSpec != nil {
		podSpec(&d.Spec.Template.Spec)
	}
	var err error
	switch k {
	case deploymentTarget:
		_, err = p.h.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	case statefulSetTarget:
		_, err = p.h.Client.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{
			ObjectMeta: d.ObjectMeta,
			Spec: appsv1.StatefulSetSpec{
				Replicas: d.Spec.Replicas, Selector: d.Spec.Selector, Template: d.Spec.Template, ServiceName: name,
				// Parallel, as a Deployment creates pods: OrderedReady would
				// add a pod per readiness, which is timing, not a decision.
				PodManagementPolicy: appsv1.ParallelPodManagement,
			},
		}, metav1.CreateOptions{})
	case scalableTarget:
		_, err = p.dyn.Resource(scalableGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": scalableGVR.GroupVersion().String(), "kind": "Scalable",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec":     map[string]any{"replicas": int64(replicas)},
		}}, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("create %s %s/%s: %w", k.kind(), ns, name, err)
	}
	return nil
}

// kind is the target's Kind.
func (k targetKind) kind() string {
	if k == deploymentTarget {
		return "Deployment"
	}
	return string(k)
}

// targetReplicas is the target's spec.replicas.
func targetReplicas(ctx context.Context, p *profile, ns, name string, k targetKind) (int32, error) {
	switch k {
	case statefulSetTarget:
		s, err := p.h.Client.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return 0, err
		}
		return ptr.Deref(s.Spec.Replicas, 1), nil
	case scalableTarget:
		u, err := p.dyn.Resource(scalableGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return 0, err
		}
		n, _, err := unstructured.NestedInt64(u.Object, "spec", "replicas")
		return int32(n), err
	}
	d, err := p.h.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	return ptr.Deref(d.Spec.Replicas, 1), nil
}

// readySince is how long the target's pods have been Ready before the
// twins are created. Within the cpu initialization period a cpu sample
// taken less than its window (1 s here) after the pod became Ready does
// not count; a controller reconciling in that second would see no metrics
// while one reconciling a moment later sees them: timing, not a decision.
const readySince = 3 * time.Second

// waitTargetReady waits until the target runs spec.replicas pods, Ready
// for readySince.
func waitTargetReady(ctx context.Context, p *profile, ns, name string, k targetKind) error {
	if k == deploymentTarget {
		if _, err := p.h.WaitDeploymentReady(ctx, ns, name, 90*time.Second); err != nil {
			return err
		}
	}
	return harness.WaitReady(ctx, nil, k.kind()+" "+ns+"/"+name, 90*time.Second, func(ctx context.Context) error {
		want, err := targetReplicas(ctx, p, ns, name, k)
		if err != nil {
			return err
		}
		list, err := p.h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return err
		}
		ready := 0
		for _, pod := range list.Items {
			if pod.DeletionTimestamp != nil || !harness.PodReady(&pod) {
				continue
			}
			for _, c := range pod.Status.Conditions {
				if c.Type == corev1.PodReady && time.Since(c.LastTransitionTime.Time) >= readySince {
					ready++
				}
			}
		}
		if int32(ready) != want {
			return fmt.Errorf("%d pods ready for %s, want %d", ready, readySince, want)
		}
		return nil
	})
}

// mirrorScalables plays the controller of the twins' Scalables until ctx
// ends: pods NAME-0 .. NAME-(n-1) for spec.replicas n (the highest index
// goes first on a scale-down, as a StatefulSet's), status.replicas the pods
// that exist, status.selector app=NAME.
func mirrorScalables(ctx context.Context, p *profile, ns string, names ...string) {
	for {
		for _, name := range names {
			if err := mirrorOnce(ctx, p, ns, name); err != nil && ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "[%s] mirror %s/%s: %v\n", p.name, ns, name, err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func mirrorOnce(ctx context.Context, p *profile, ns, name string) error {
	res := p.dyn.Resource(scalableGVR).Namespace(ns)
	u, err := res.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	want, _, err := unstructured.NestedInt64(u.Object, "spec", "replicas")
	if err != nil {
		return err
	}
	list, err := p.h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name + "," + mirrorLabel})
	if err != nil {
		return err
	}
	have := map[int]bool{}
	for _, pod := range list.Items {
		i, err := strconv.Atoi(strings.TrimPrefix(pod.Name, name+"-"))
		if err != nil || pod.DeletionTimestamp != nil {
			continue
		}
		have[i] = true
		if int64(i) >= want {
			if err := p.h.Client.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			delete(have, i)
		}
	}
	for i := range int(want) {
		if have[i] {
			continue
		}
		d := harness.Deployment(ns, name, 1)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, i), Namespace: ns,
				Labels: map[string]string{"app": name, twinLabel: "yes", mirrorLabel: "yes"}},
			Spec: d.Spec.Template.Spec,
		}
		if _, err := p.h.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		have[i] = true
	}
	replicas := int64(len(have))
	cur, _, _ := unstructured.NestedInt64(u.Object, "status", "replicas")
	sel, _, _ := unstructured.NestedString(u.Object, "status", "selector")
	if cur == replicas && sel == "app="+name {
		return nil
	}
	_ = unstructured.SetNestedField(u.Object, replicas, "status", "replicas")
	_ = unstructured.SetNestedField(u.Object, "app="+name, "status", "selector")
	_, err = res.UpdateStatus(ctx, u, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return nil // the next round reads it again
	}
	return err
}

// waitTargetStatus waits until a Deployment's or StatefulSet's status
// counts its ready pods as they are. An act that changes a pod's
// readiness makes the workload controller write the status; a /scale
// write decided on the scale read before it is refused with a Conflict.
// Tidal reads the scale from its informer, so such a write, racing with
// its first reconcile, is tidal's (a FailedRescale upstream, reading the
// scale afresh, seldom gets): timing, not a decision.
func waitTargetStatus(ctx context.Context, p *profile, ns, name string, k targetKind) error {
	if k == scalableTarget {
		return nil // mirrorScalables writes no readiness
	}
	return harness.WaitReady(ctx, nil, k.kind()+" "+ns+"/"+name+" status", 30*time.Second, func(ctx context.Context) error {
		var counted int32
		switch k {
		case statefulSetTarget:
			s, err := p.h.Client.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			counted = s.Status.ReadyReplicas
		default:
			d, err := p.h.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			counted = d.Status.ReadyReplicas
		}
		list, err := p.h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return err
		}
		var ready int32
		for _, pod := range list.Items {
			if metav1.GetControllerOf(&pod) != nil && pod.DeletionTimestamp == nil && harness.PodReady(&pod) {
				ready++
			}
		}
		if counted != ready {
			return fmt.Errorf("status counts %d ready pods, %d are", counted, ready)
		}
		return nil
	})
}
