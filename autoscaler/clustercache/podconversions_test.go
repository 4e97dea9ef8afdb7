package clustercache

import (
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/tidal-autoscaler/tidal/autoscaler/replicas"
	"github.com/tidal-autoscaler/tidal/internal/heapbytes"
)

func requestsPod(name, cpu string) *corev1.Pod {
	return slimPod(&corev1.Pod{
		ObjectMeta: fullPod(name).ObjectMeta,
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name:      "app",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
		}}},
		Status: fullPod(name).Status,
	})
}

func TestPodConversions(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, c *PodConversions)
	}{
		{"a conversion equals FromV1Pod's", func(t *testing.T, c *PodConversions) {
			pods := []*corev1.Pod{requestsPod("a", "250m"), requestsPod("b", "500m")}
			want := []replicas.Pod{replicas.FromV1Pod(pods[0]), replicas.FromV1Pod(pods[1])}
			for round := range 2 {
				if got := c.Convert(pods); !reflect.DeepEqual(got, want) {
					t.Fatalf("round %d: got %+v, want %+v", round, got, want)
				}
			}
		}},
		{"a pod object is converted once", func(t *testing.T, c *PodConversions) {
			pods := []*corev1.Pod{requestsPod("a", "250m"), requestsPod("b", "500m")}
			first := c.Convert(pods)
			second := c.Convert(pods)
			if &first[0].Containers[0] != &second[0].Containers[0] {
				t.Error("the second read converted the pod again")
			}
			// The output slice is the only allocation once converted.
			if n := testing.AllocsPerRun(100, func() { c.Convert(pods) }); n != 1 {
				t.Errorf("a converted read allocated %v times, want 1", n)
			}
		}},
		{"a replaced object is converted anew", func(t *testing.T, c *PodConversions) {
			old := requestsPod("a", "250m")
			c.Convert([]*corev1.Pod{old})
			replaced := requestsPod("a", "750m") // the informer's new object for the pod
			got := c.Convert([]*corev1.Pod{replaced})
			if v := got[0].Containers[0].Requests[corev1.ResourceCPU]; v != 750 {
				t.Errorf("replaced pod's cpu request = %d, want 750", v)
			}
			runtime.KeepAlive(old)
		}},
		{"an entry at the address of a collected object is not used", func(t *testing.T, c *PodConversions) {
			p := requestsPod("a", "250m")
			// What a new object at a collected one's address finds: the
			// old conversion, whose weak pointer reads nil.
			c.m[address(p)] = conversion{v: replicas.FromV1Pod(requestsPod("old", "900m"))}
			got := c.Convert([]*corev1.Pod{p})
			if v := got[0].Containers[0].Requests[corev1.ResourceCPU]; v != 250 {
				t.Errorf("cpu request = %d, want 250 (the old object's conversion was used)", v)
			}
			if e := c.m[address(p)]; e.pod.Value() != p {
				t.Error("the entry was not replaced by the new object's")
			}
		}},
		{"a collected object's cleanup leaves a new object's entry", func(t *testing.T, c *PodConversions) {
			p := requestsPod("a", "250m")
			c.Convert([]*corev1.Pod{p})
			c.forget(address(p)) // the old object's cleanup, run late
			if n := c.Len(); n != 1 {
				t.Errorf("%d conversions held, want the live object's", n)
			}
			c.m[address(p)] = conversion{} // an entry whose object was collected
			c.forget(address(p))
			if n := c.Len(); n != 0 {
				t.Errorf("%d conversions held, want none", n)
			}
			runtime.KeepAlive(p)
		}},
		{"a collected object is forgotten", func(t *testing.T, c *PodConversions) {
			kept := requestsPod("kept", "250m")
			c.Convert([]*corev1.Pod{kept, requestsPod("dropped", "250m")})
			// Cleanups run on their own goroutine after a collection.
			for i := 0; c.Len() != 1 && i < 500; i++ {
				runtime.GC()
				time.Sleep(10 * time.Millisecond)
			}
			if n := c.Len(); n != 1 {
				t.Errorf("%d conversions held after the dropped pod's collection, want 1", n)
			}
			runtime.KeepAlive(kept)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, NewPodConversions()) })
	}
}

// BenchmarkPodConversionBytes reports the heap PodConversions holds per
// cached pod once a reconcile has read it (fullPod, slimmed as the
// informer keeps it: two containers and two init containers), beside
// the pod's own (BenchmarkPodCacheBytes).
func BenchmarkPodConversionBytes(b *testing.B) {
	data, err := json.Marshal(fullPod("web"))
	if err != nil {
		b.Fatal(err)
	}
	pods := make([]*corev1.Pod, 1000)
	for i := range pods {
		p := &corev1.Pod{}
		if err := json.Unmarshal(data, p); err != nil {
			b.Fatal(err)
		}
		slim, _ := CacheTransform(p)
		pods[i] = slim.(*corev1.Pod)
	}
	var perPod float64
	for b.Loop() {
		conv := NewPodConversions()
		perPod = heapbytes.PerObject(len(pods), func(i int) any {
			conv.Convert(pods[i : i+1])
			return nil
		})
		if conv.Len() != len(pods) {
			b.Fatalf("%d conversions held, want %d", conv.Len(), len(pods))
		}
	}
	runtime.KeepAlive(pods)
	b.ReportMetric(perPod, "bytes/pod")
}

// BenchmarkConvert is a reconcile's read of its 5 pods once they are
// converted (the steady state), among the 5,000 pods of 1,000 autoscalers,
// each read in turn.
func BenchmarkConvert(b *testing.B) {
	pods := make([]*corev1.Pod, 5000)
	for i := range pods {
		pods[i] = requestsPod(fmt.Sprintf("web-%d", i), "250m")
	}
	c := NewPodConversions()
	c.Convert(pods)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		c.Convert(pods[i : i+5])
		i = (i + 5) % len(pods)
	}
	runtime.KeepAlive(pods)
}
