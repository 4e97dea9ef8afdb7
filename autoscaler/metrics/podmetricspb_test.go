package metrics

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	metricsapi "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsscheme "k8s.io/metrics/pkg/client/clientset/versioned/scheme"

	"github.com/tidal-autoscaler/tidal/autoscaler/internal/pbwire"
)

// encodeProto encodes obj as metrics.k8s.io serves it to a protobuf client.
func encodeProto(t testing.TB, obj k8sruntime.Object) []byte {
	t.Helper()
	pb := protobuf.NewSerializer(metricsscheme.Scheme, metricsscheme.Scheme)
	data, err := k8sruntime.Encode(metricsscheme.Codecs.EncoderForVersion(pb, metricsapi.SchemeGroupVersion), obj)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// generatedDecode is the scheme's decoder (the typed client's), converted.
func generatedDecode(data []byte) (usageList, error) {
	var list metricsapi.PodMetricsList
	if err := k8sruntime.DecodeInto(podMetricsDecoder, data, &list); err != nil {
		return usageList{}, err
	}
	return fromPodMetrics(list.Items), nil
}

func podMetricsItem(name string, labels map[string]string, containers ...metricsapi.ContainerMetrics) metricsapi.PodMetrics {
	return metricsapi.PodMetrics{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels, UID: "3f1c", ResourceVersion: "12",
			Annotations: map[string]string{"note": "skipped"}, CreationTimestamp: metav1.NewTime(now)},
		Timestamp: metav1.NewTime(now.Add(-time.Second)), Window: metav1.Duration{Duration: 15 * time.Second},
		Containers: containers,
	}
}

func usage(kv ...string) corev1.ResourceList {
	rl := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		rl[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return rl
}

// TestProtoDecodeMatchesGenerated: a protobuf PodMetricsList decodes to
// what the generated decoder's list converts to, field for field.
func TestProtoDecodeMatchesGenerated(t *testing.T) {
	web := map[string]string{"app": "web", "pod-template-hash": "7d4b9c8f6d"}
	tests := []struct {
		name  string
		items []metricsapi.PodMetrics
	}{
		{"no items", nil},
		{"one pod, one container", []metricsapi.PodMetrics{
			podMetricsItem("web-0", web, metricsapi.ContainerMetrics{Name: "app", Usage: usage("cpu", "51m", "memory", "20Mi")}),
		}},
		{"pods sharing a label set, and one with the same keys but another value", []metricsapi.PodMetrics{
			podMetricsItem("web-0", web, metricsapi.ContainerMetrics{Name: "app", Usage: usage("cpu", "51m")}),
			podMetricsItem("web-1", map[string]string{"app": "web", "pod-template-hash": "7d4b9c8f6d"}, metricsapi.ContainerMetrics{Name: "app", Usage: usage("cpu", "52m")}),
			podMetricsItem("web-2", map[string]string{"app": "web", "pod-template-hash": "5c6b7d8e9f"}, metricsapi.ContainerMetrics{Name: "app", Usage: usage("cpu", "53m")}),
		}},
		{"no labels, no containers, a container without usage", []metricsapi.PodMetrics{
			podMetricsItem("bare", nil),
			podMetricsItem("empty", nil, metricsapi.ContainerMetrics{Name: "app"}),
		}},
		{"quantities in every form, sidecars", []metricsapi.PodMetrics{
			podMetricsItem("odd", map[string]string{"a": ""},
				metricsapi.ContainerMetrics{Name: "app", Usage: usage("cpu", "1.5", "memory", "100Mi", "ephemeral-storage", "1e3")},
				metricsapi.ContainerMetrics{Name: "proxy", Usage: usage("cpu", "0", "memory", "12345678901234", "example.com/gpu", "2")},
				metricsapi.ContainerMetrics{Name: "tiny", Usage: usage("cpu", "1n", "memory", "1Ki")}),
		}},
		{"zero timestamp and window", []metricsapi.PodMetrics{{
			ObjectMeta: metav1.ObjectMeta{Name: "zero", Namespace: ns},
			Containers: []metricsapi.ContainerMetrics{{Name: "app", Usage: usage("cpu", "5m")}},
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := encodeProto(t, &metricsapi.PodMetricsList{ListMeta: metav1.ListMeta{ResourceVersion: "7"}, Items: tt.items})
			want, err := generatedDecode(data)
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodePodMetricsProto(data)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("decoded\n%+v\nwant the generated decoder's\n%+v", got, want)
			}
		})
	}
}

// TestProtoDecodeSharesLabelSets: pods with the same labels share one
// map; the set of a pod with other values is its own.
func TestProtoDecodeSharesLabelSets(t *testing.T) {
	data := encodeProto(t, &metricsapi.PodMetricsList{Items: []metricsapi.PodMetrics{
		podMetricsItem("web-0", map[string]string{"app": "web"}),
		podMetricsItem("web-1", map[string]string{"app": "web"}),
		podMetricsItem("api-0", map[string]string{"app": "api"}),
	}})
	got, err := decodePodMetricsProto(data)
	if err != nil {
		t.Fatal(err)
	}
	same := func(a, b map[string]string) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	if !same(got.labels[0], got.labels[1]) {
		t.Error("two pods with the same labels got a map each")
	}
	if same(got.labels[0], got.labels[2]) || got.labels[2]["app"] != "api" {
		t.Errorf("a pod with other labels got %v", got.labels[2])
	}
}

// TestProtoDecodeErrors: what is not a PodMetricsList, or is cut short,
// is an error that says where, never a panic or a partial list.
func TestProtoDecodeErrors(t *testing.T) {
	list := encodeProto(t, &metricsapi.PodMetricsList{Items: []metricsapi.PodMetrics{
		podMetricsItem("web-0", map[string]string{"app": "web"}, metricsapi.ContainerMetrics{Name: "app", Usage: usage("cpu", "51m")}),
	}})
	node := encodeProto(t, &metricsapi.NodeMetricsList{Items: []metricsapi.NodeMetrics{{ObjectMeta: metav1.ObjectMeta{Name: "n"}}}})
	tests := []struct {
		name, want string
		data       []byte
	}{
		{"no prefix", "not a protobuf body", []byte(`{"kind":"PodMetricsList"}`)},
		{"prefix only", "not a protobuf body", list[:4]},
		{"another kind", `holds a "NodeMetricsList"`, node},
		{"cut short", "unexpected EOF", list[:len(list)-3]},
		{"an item cut short", "PodMetricsList.items[0]", truncatedItem(t, list)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodePodMetricsProto(tt.data)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
			if got.items != nil {
				t.Errorf("a failed decode returned %d items", len(got.items))
			}
		})
	}
}

// FuzzProtoDecode: no input panics the decoder, and whatever both it and
// the generated decoder accept decodes the same.
func FuzzProtoDecode(f *testing.F) {
	for i, items := range [][]metricsapi.PodMetrics{
		nil,
		{podMetricsItem("web-0", map[string]string{"app": "web"}, metricsapi.ContainerMetrics{Name: "app", Usage: usage("cpu", "51m", "memory", "1Gi")})},
		{podMetricsItem("a", nil), podMetricsItem("b", map[string]string{"x": "y", "z": ""}, metricsapi.ContainerMetrics{Name: "c"})},
	} {
		f.Add(encodeProto(f, &metricsapi.PodMetricsList{ListMeta: metav1.ListMeta{ResourceVersion: fmt.Sprint(i)}, Items: items}))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := decodePodMetricsProto(data)
		want, werr := generatedDecode(data)
		if err == nil && werr == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("decoded\n%+v\nwant the generated decoder's\n%+v", got, want)
		}
	})
}

// truncatedItem rebuilds list's body with its first item's bytes cut
// short but every length around it consistent, so the error is the item's.
func truncatedItem(t *testing.T, list []byte) []byte {
	t.Helper()
	var l metricsapi.PodMetricsList
	if err := k8sruntime.DecodeInto(podMetricsDecoder, list, &l); err != nil {
		t.Fatal(err)
	}
	item, err := l.Items[0].Marshal()
	if err != nil {
		t.Fatal(err)
	}
	raw := protowire.AppendBytes(protowire.AppendTag(nil, listItems, protowire.BytesType), item[:len(item)-2])
	body := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), raw) // Unknown.raw
	return append(append([]byte(nil), pbwire.Prefix...), body...)
}
