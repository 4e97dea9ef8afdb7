package clustercache

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

// TestSlimPodKeepsDeletionCost: of a pod's annotations only the deletion
// cost is cached (spec.scaleDownPodSelection compares it before writing).
func TestSlimPodKeepsDeletionCost(t *testing.T) {
	p := fullPod("web-1")
	p.Annotations[corev1.PodDeletionCost] = "250"
	got, err := CacheTransform(p)
	if err != nil {
		t.Fatal(err)
	}
	if a := got.(*corev1.Pod).Annotations; len(a) != 1 || a[corev1.PodDeletionCost] != "250" {
		t.Errorf("annotations %v, want only the deletion cost", a)
	}
}

// TestDeploymentRolloutCached: a cached Deployment keeps its rollout state
// (and nothing of its template), and ScaleCache.Deployment answers it once
// synced.
func TestDeploymentRolloutCached(t *testing.T) {
	d := deployment(4, 5, "7")
	d.Generation = 3
	d.Status.ObservedGeneration, d.Status.UpdatedReplicas, d.Status.AvailableReplicas = 3, 2, 4
	d.Status.Conditions = []appsv1.DeploymentCondition{
		{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", Message: "long"},
		{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "ReplicaSetUpdated", Message: "long"},
	}
	obj, err := ScaleTransform(d.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	slim := obj.(*appsv1.Deployment)
	want := appsv1.DeploymentStatus{Replicas: 5, ObservedGeneration: 3, UpdatedReplicas: 2, AvailableReplicas: 4,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "ReplicaSetUpdated"}}}
	if slim.Generation != 3 || len(slim.Status.Conditions) != 1 || slim.Status.Conditions[0] != want.Conditions[0] ||
		slim.Status.Replicas != want.Replicas || slim.Status.ObservedGeneration != 3 || slim.Status.UpdatedReplicas != 2 || slim.Status.AvailableReplicas != 4 {
		t.Errorf("slim deployment %+v, want generation 3 and status %+v", slim, want)
	}

	var c *ScaleCache
	if _, ok := c.Deployment(ns, "web"); ok {
		t.Error("a nil cache answered")
	}
	client := fake.NewClientset(d)
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(ScaleTransform))
	c = NewScaleCache(factory, nil)
	if _, ok := c.Deployment(ns, "web"); ok {
		t.Fatal("answered before Start")
	}
	stop := make(chan struct{})
	defer factory.Shutdown()
	defer close(stop)
	c.Start(stop)
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, ok := c.Deployment(ns, "web")
		if ok {
			if got.Status.UpdatedReplicas != 2 || got.Generation != 3 {
				t.Errorf("cached %+v", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cache never answered")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, ok := c.Deployment(ns, "missing"); ok {
		t.Error("answered for a missing Deployment")
	}
}
