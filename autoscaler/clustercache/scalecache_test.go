package clustercache

import (
	"maps"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

var deployments = schema.GroupResource{Group: "apps", Resource: "deployments"}

const ns = "default"

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func deployment(replicas, statusReplicas int32, rv string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, ResourceVersion: rv, Annotations: map[string]string{"a": "b"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{
				MatchLabels:      map[string]string{"app": "web"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"b", "a"}}},
			},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}},
		},
		Status: appsv1.DeploymentStatus{Replicas: statusReplicas, ReadyReplicas: statusReplicas},
	}
}

// TestScaleOf: the scale computed from a cached object is what the
// apiserver's /scale answers (spec.replicas, status.replicas, the selector
// in its canonical string form), before and after ScaleTransform.
func TestScaleOf(t *testing.T) {
	sel := map[string]string{"app": "web"}
	ls := &metav1.LabelSelector{MatchLabels: sel}
	tests := []struct {
		name string
		obj  any
		want autoscalingv1.Scale
		ok   bool
	}{
		{
			name: "Deployment with expressions",
			obj:  deployment(4, 3, "7"),
			want: autoscalingv1.Scale{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, ResourceVersion: "7"},
				Spec:       autoscalingv1.ScaleSpec{Replicas: 4},
				Status:     autoscalingv1.ScaleStatus{Replicas: 3, Selector: "app=web,tier in (a,b)"},
			},
			ok: true,
		},
		{
			name: "ReplicaSet",
			obj: &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, ResourceVersion: "8"},
				Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](2), Selector: ls}, Status: appsv1.ReplicaSetStatus{Replicas: 2}},
			want: autoscalingv1.Scale{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, ResourceVersion: "8"},
				Spec:       autoscalingv1.ScaleSpec{Replicas: 2},
				Status:     autoscalingv1.ScaleStatus{Replicas: 2, Selector: "app=web"},
			},
			ok: true,
		},
		{
			name: "StatefulSet",
			obj: &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns, ResourceVersion: "9"},
				Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3), Selector: ls}, Status: appsv1.StatefulSetStatus{Replicas: 1}},
			want: autoscalingv1.Scale{
				ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns, ResourceVersion: "9"},
				Spec:       autoscalingv1.ScaleSpec{Replicas: 3},
				Status:     autoscalingv1.ScaleStatus{Replicas: 1, Selector: "app=web"},
			},
			ok: true,
		},
		{
			name: "ReplicationController: a map selector",
			obj: &corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: "old", Namespace: ns, ResourceVersion: "10"},
				Spec:   corev1.ReplicationControllerSpec{Replicas: ptr.To[int32](5), Selector: map[string]string{"app": "old", "tier": "x"}},
				Status: corev1.ReplicationControllerStatus{Replicas: 5}},
			want: autoscalingv1.Scale{
				ObjectMeta: metav1.ObjectMeta{Name: "old", Namespace: ns, ResourceVersion: "10"},
				Spec:       autoscalingv1.ScaleSpec{Replicas: 5},
				Status:     autoscalingv1.ScaleStatus{Replicas: 5, Selector: "app=old,tier=x"},
			},
			ok: true,
		},
		{
			name: "an invalid selector: ask the API",
			obj: &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
				Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{
					MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bogus"}}}}},
		},
		{name: "another kind", obj: &corev1.Pod{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, transformed := range []bool{false, true} {
				obj := tt.obj
				if transformed {
					var err error
					if obj, err = ScaleTransform(obj); err != nil {
						t.Fatal(err)
					}
				}
				got, ok := scaleOf(obj)
				if ok != tt.ok {
					t.Fatalf("transformed=%v: ok = %v, want %v", transformed, ok, tt.ok)
				}
				if ok && (got.Name != tt.want.Name || got.Namespace != tt.want.Namespace || got.ResourceVersion != tt.want.ResourceVersion ||
					got.Spec != tt.want.Spec || got.Status != tt.want.Status) {
					t.Errorf("transformed=%v: scale = %+v, want %+v", transformed, *got, tt.want)
				}
			}
		})
	}
}

// TestScaleTransformSlims: cached Deployments keep no template, managed
// fields or annotations but the selector's string form; a scale computed
// from one allocates only the Scale.
func TestScaleTransformSlims(t *testing.T) {
	obj, err := ScaleTransform(deployment(4, 3, "7"))
	if err != nil {
		t.Fatal(err)
	}
	d := obj.(*appsv1.Deployment)
	if len(d.Spec.Template.Spec.Containers) != 0 || d.ManagedFields != nil || d.Status.ReadyReplicas != 0 {
		t.Errorf("transform kept %+v", d)
	}
	if want := map[string]string{selectorAnnotation: "app=web,tier in (a,b)"}; !maps.Equal(d.Annotations, want) {
		t.Errorf("annotations %v, want %v", d.Annotations, want)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = scaleOf(d) }); n > 1 {
		t.Errorf("scaleOf allocated %v times, want only the Scale", n)
	}
}

// TestScaleCache: answers from a synced informer; after this controller's
// own write, only once the cache shows that write's resourceVersion (or
// writtenTTL passed); kinds it does not cache are left to GET.
func TestScaleCache(t *testing.T) {
	client := fake.NewClientset(deployment(4, 4, "7"))
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(ScaleTransform))
	clk := testingclock.NewFakeClock(now)
	c := NewScaleCache(factory, clk)
	if _, ok := c.Get(deployments, ns, "web"); ok {
		t.Fatal("answered before Start")
	}
	stop := make(chan struct{})
	defer factory.Shutdown() // after close(stop): it waits for the informers
	defer close(stop)
	c.Start(stop)
	deadline := time.Now().Add(10 * time.Second)
	var sc *autoscalingv1.Scale
	for ok := false; !ok; {
		if time.Now().After(deadline) {
			t.Fatal("the cache never answered")
		}
		sc, ok = c.Get(deployments, ns, "web")
		time.Sleep(10 * time.Millisecond)
	}
	if sc.Spec.Replicas != 4 || sc.Status.Selector != "app=web,tier in (a,b)" {
		t.Errorf("scale = %+v", sc)
	}
	if _, ok := c.Get(schema.GroupResource{Group: "example.com", Resource: "widgets"}, ns, "web"); ok {
		t.Error("answered for a kind it does not cache")
	}
	if _, ok := c.Get(deployments, ns, "missing"); ok {
		t.Error("answered for a missing object (the GET must report NotFound)")
	}

	// This controller wrote version 8; the cache still has 7.
	c.Wrote(deployments, ns, "web", "8")
	if _, ok := c.Get(deployments, ns, "web"); ok {
		t.Error("answered from a cache that has not seen the controller's write")
	}
	clk.Step(writtenTTL)
	if _, ok := c.Get(deployments, ns, "web"); !ok {
		t.Error("still not answering writtenTTL after the write")
	}
	c.Wrote(deployments, ns, "web", "7")
	if _, ok := c.Get(deployments, ns, "web"); !ok {
		t.Error("not answering once the cache shows the written version")
	}
}
