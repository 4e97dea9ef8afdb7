package shard

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/tidal-autoscaler/tidal/autoscaler/source"
)

func hpa(name string) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
}

// TestSourceFiltersByOwnership: the controller's handlers see only owned
// objects, Get hides the others, and Offer delivers what was gained.
func TestSourceFiltersByOwnership(t *testing.T) {
	client := fake.NewClientset([]runtime.Object{hpa("a"), hpa("b"), hpa("c")}...)
	factory := informers.NewSharedInformerFactory(client, 0)
	var mine atomic.Value
	mine.Store([]string{"ns/a"})
	owns := func(key string) bool { return slices.Contains(mine.Load().([]string), key) }
	s := NewSource(source.NativeSource(factory, client.AutoscalingV2()), owns)

	var mu sync.Mutex
	var added []string
	_, err := s.Informer().AddEventHandlerWithResyncPeriod(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		key, _ := cache.MetaNamespaceKeyFunc(obj)
		mu.Lock()
		added = append(added, key)
		mu.Unlock()
	}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	if !cache.WaitForCacheSync(stop, s.Informer().HasSynced) {
		t.Fatal("no sync")
	}
	got := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := slices.Clone(added)
		slices.Sort(out)
		return out
	}
	waitFor := func(want []string) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !slices.Equal(got(), want); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("handlers got %q, want %q", got(), want)
			}
		}
	}
	waitFor([]string{"ns/a"})

	if _, err := s.Get("ns", "a"); err != nil {
		t.Errorf("Get(owned) = %v", err)
	}
	if _, err := s.Get("ns", "b"); !apierrors.IsNotFound(err) {
		t.Errorf("Get(not owned) = %v, want NotFound so the controller forgets the key", err)
	}

	// b and c become this member's; a goes elsewhere.
	mine.Store([]string{"ns/b", "ns/c"})
	s.Offer()
	waitFor([]string{"ns/a", "ns/b", "ns/c"})
	if _, err := s.Get("ns", "a"); !apierrors.IsNotFound(err) {
		t.Errorf("Get(lost) = %v, want NotFound", err)
	}
	// Offering again delivers nothing new.
	s.Offer()
	time.Sleep(50 * time.Millisecond)
	waitFor([]string{"ns/a", "ns/b", "ns/c"})
}
