package guard

import (
	"context"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

func hpaOn(ns, name, apiVersion, kind, target string) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: apiVersion, Kind: kind, Name: target}},
	}
}

func TestHPAsScaling(t *testing.T) {
	client := fake.NewClientset(
		hpaOn("shop", "web-b", "apps/v1", "Deployment", "web"),
		hpaOn("shop", "web-a", "apps/v1beta2", "Deployment", "web"),
		hpaOn("shop", "api", "apps/v1", "Deployment", "api"),
		hpaOn("other", "web", "apps/v1", "Deployment", "web"),
		hpaOn("shop", "web-rs", "apps/v1", "ReplicaSet", "web"),
	)
	factory := informers.NewSharedInformerFactory(client, 0)
	inf := factory.Autoscaling().V2().HorizontalPodAutoscalers().Informer()
	hpas, err := NewHPAs(inf)
	if err != nil {
		t.Fatal(err)
	}
	ref := autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}
	if _, known := hpas.Scaling("shop", ref); known {
		t.Fatal("known before the informer synced")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	tests := []struct {
		name      string
		namespace string
		ref       autoscalingv2.CrossVersionObjectReference
		want      []string
	}{
		{name: "both versions of one Deployment, by name", namespace: "shop", ref: ref, want: []string{"web-a", "web-b"}},
		{name: "another namespace", namespace: "other", ref: ref, want: []string{"web"}},
		{name: "another kind of the same name", namespace: "shop", ref: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web"}, want: []string{"web-rs"}},
		{name: "none", namespace: "shop", ref: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, known := hpas.Scaling(tt.namespace, tt.ref)
			var names []string
			for _, h := range got {
				names = append(names, h.Name)
			}
			if !known || len(names) != len(tt.want) {
				t.Fatalf("got %v (known %v), want %v", names, known, tt.want)
			}
			for i := range names {
				if names[i] != tt.want[i] {
					t.Fatalf("got %v, want %v", names, tt.want)
				}
			}
		})
	}
	var none *HPAs
	if _, known := none.Scaling("shop", ref); known {
		t.Error("a nil HPAs (guard off) knows something")
	}
}
