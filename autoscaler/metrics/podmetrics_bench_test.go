package metrics

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	metricsapi "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsscheme "k8s.io/metrics/pkg/client/clientset/versioned/scheme"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/tidal-autoscaler/tidal/autoscaler/clustercache"
	"github.com/tidal-autoscaler/tidal/autoscaler/replicas"
)

// BenchmarkNamespaceList is what one LIST of a namespace's PodMetrics
// costs the controller once the bytes are in: decoding the protobuf list
// (the resource metrics client's content type) and indexing it by label.
// 5,000 pods is a namespace of the fleet benchmarks at 10,000 autoscalers
// (1,000 Deployments of 5 pods).
func BenchmarkNamespaceList(b *testing.B) {
	for _, pods := range []int{500, 5000} {
		b.Run(fmt.Sprintf("pods=%d", pods), func(b *testing.B) {
			list := &metricsapi.PodMetricsList{}
			for i := range pods {
				list.Items = append(list.Items, metricsapi.PodMetrics{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d-7d4b9c8f6d-%05d", i/5, i), Namespace: "bench-0",
						Labels: map[string]string{"app": fmt.Sprintf("web-%d", i/5), "pod-template-hash": "7d4b9c8f6d"}},
					Timestamp: metav1.Now(), Window: metav1.Duration{Duration: 15e9},
					Containers: []metricsapi.ContainerMetrics{{Name: "app", Usage: corev1.ResourceList{
						"cpu": resource.MustParse("51m"), "memory": resource.MustParse("20Mi")}}},
				})
			}
			s := protobuf.NewSerializer(metricsscheme.Scheme, metricsscheme.Scheme)
			data, err := runtime.Encode(metricsscheme.Codecs.EncoderForVersion(s, metricsapi.SchemeGroupVersion), list)
			if err != nil {
				b.Fatal(err)
			}
			dec := metricsscheme.Codecs.WithoutConversion().DecoderToVersion(s, metricsapi.SchemeGroupVersion)
			b.Run("decoder=generated", func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				b.ReportAllocs()
				for b.Loop() {
					var out metricsapi.PodMetricsList
					if _, _, err := dec.Decode(data, nil, &out); err != nil {
						b.Fatal(err)
					}
					if l := newNamespaceList(fromPodMetrics(out.Items), now, nil); len(l.items) != pods {
						b.Fatalf("%d items, want %d", len(l.items), pods)
					}
				}
			})
			b.Run("decoder=protowire", func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				b.ReportAllocs()
				for b.Loop() {
					out, err := decodePodMetricsProto(data)
					if err != nil {
						b.Fatal(err)
					}
					if l := newNamespaceList(out, now, nil); len(l.items) != pods {
						b.Fatalf("%d items, want %d", len(l.items), pods)
					}
				}
			})
		})
	}
}

// TestSelectingAllocatesOnce: the matching items are copied into one
// slice sized for them; growing it by appends (4 allocations for 5 items
// of some 400 bytes) was 6% of a reconcile's allocations.
func TestSelectingAllocatesOnce(t *testing.T) {
	var items []metricsapi.PodMetrics
	for i := range 50 {
		items = append(items, metricsapi.PodMetrics{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d-%d", i/5, i),
			Labels: map[string]string{"app": fmt.Sprintf("web-%d", i/5), "pod-template-hash": "7d4b9c8f6d"}}})
	}
	l := newNamespaceList(fromPodMetrics(items), now, nil)
	sel := labels.SelectorFromSet(labels.Set{"app": "web-3"})
	if got := l.selecting(sel); len(got) != 5 {
		t.Fatalf("%d items selected, want 5", len(got))
	}
	pairs := testing.AllocsPerRun(100, func() { clustercache.EqualityLabels(sel) })
	if got := testing.AllocsPerRun(100, func() { l.selecting(sel) }); got > pairs+1 {
		t.Errorf("selecting made %.0f allocations, want at most %.0f (the selector's pairs, then one slice)", got, pairs+1)
	}
}

// TestSharedListIsConvertedOnce: the autoscalers reading a namespace's
// shared list get its usage converted when it was listed, not again per
// read (a container's usage map per pod per reconcile, and a copy of each
// 400-byte PodMetrics, were 8% of a reconcile's allocations): two reads
// share the converted maps, and a read allocates only its selection and
// its samples.
func TestSharedListIsConvertedOnce(t *testing.T) {
	usage := corev1.ResourceList{"cpu": resource.MustParse("51m")}
	var extra []metricsapi.PodMetrics
	for i := range 5 {
		extra = append(extra, metricsapi.PodMetrics{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c-%d", i), Namespace: ns, Labels: map[string]string{"app": "c"}},
			Containers: []metricsapi.ContainerMetrics{{Name: "app", Usage: usage}, {Name: "sidecar", Usage: usage}},
		})
	}
	client, _ := fakePodMetrics(extra...)
	c := newRESTClient(client.MetricsV1beta1(), nil, nil, testingclock.NewFakePassiveClock(now))
	c.ShareNamespaceLists(func(string) bool { return true })
	ctx := context.Background()
	sel := labels.SelectorFromSet(labels.Set{"app": "c"})
	read := func() []replicas.PodUsage {
		got, err := c.resourceMetrics.pods.list(ctx, ns, sel)
		if err != nil || len(got) != 5 {
			t.Fatalf("read %d items, %v; want 5", len(got), err)
		}
		return got
	}
	first, second := read(), read()
	if reflect.ValueOf(first[0].Containers[0].Usage).UnsafePointer() != reflect.ValueOf(second[0].Containers[0].Usage).UnsafePointer() {
		t.Error("each read converted the list's usage again")
	}
	samples, err := c.ResourceMetric(ctx, corev1.ResourceCPU, ns, sel, "")
	if err != nil || len(samples) != 5 || samples["c-0"].Value != 102 {
		t.Fatalf("samples %v, %v; want 5 of 102m", samples, err)
	}
	pairs := testing.AllocsPerRun(100, func() { clustercache.EqualityLabels(sel) })
	fresh := testing.AllocsPerRun(100, func() {
		samplesSink = make(replicas.PodSamples, 5)
		samplesSink["c-0"] = replicas.Sample{}
	})
	if got := testing.AllocsPerRun(100, func() { _, _ = c.ResourceMetric(ctx, corev1.ResourceCPU, ns, sel, "") }); got > pairs+1+fresh {
		t.Errorf("a read made %.0f allocations, want at most %.0f (the selector's pairs, the selection, the samples)", got, pairs+1+fresh)
	}
}

var samplesSink replicas.PodSamples
