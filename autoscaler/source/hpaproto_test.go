package source

import (
	"context"
	"encoding/binary"
	"net/http"
	"net/http/httptest"
	"reflect"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// wireHPA is wireHA's content as an autoscaling/v2 HorizontalPodAutoscaler.
func wireHPA(i int) *autoscalingv2.HorizontalPodAutoscaler {
	ha := wireHA(i)
	return &autoscalingv2.HorizontalPodAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: ha.ObjectMeta, Spec: ha.Spec.HorizontalPodAutoscalerSpec, Status: ha.Status.HorizontalPodAutoscalerStatus,
	}
}

// encodeHPAProto encodes obj as the apiserver does for a protobuf client.
func encodeHPAProto(t testing.TB, obj runtime.Object) []byte {
	t.Helper()
	pb := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	data, err := runtime.Encode(scheme.Codecs.EncoderForVersion(pb, autoscalingv2.SchemeGroupVersion), obj)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// protoSerializer is apimachinery's protobuf serializer, the reference
// hpaProtoDecoder must agree with.
func protoSerializer() runtime.Serializer {
	return protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
}

// TestHPAProtoDecoderMatchesSerializer decodes random HPAs, as a watch
// decodes each object (nothing to decode into, no defaults), with
// hpaProtoDecoder and with the protobuf serializer: the same objects and
// kinds.
func TestHPAProtoDecoderMatchesSerializer(t *testing.T) {
	fast := hpaProtoDecoder{protoSerializer()}
	for seed := int64(0); seed < 300; seed++ {
		hpa := &autoscalingv2.HorizontalPodAutoscaler{}
		newHAFiller(seed).Fill(hpa)
		data := encodeHPAProto(t, hpa)
		got, gotKind, err := fast.Decode(data, nil, nil)
		want, wantKind, wantErr := protoSerializer().Decode(data, nil, nil)
		if err != nil || wantErr != nil {
			t.Fatalf("seed %d: errors %v, %v", seed, err, wantErr)
		}
		if !reflect.DeepEqual(got, want) || *gotKind != *wantKind {
			t.Fatalf("seed %d:\n got %#v (%v)\nwant %#v (%v)", seed, got, gotKind, want, wantKind)
		}
	}
}

// TestHPAProtoDecoderFallsBack: what is not a lone HPA, or cannot be read,
// gets the protobuf serializer's answer or error.
func TestHPAProtoDecoderFallsBack(t *testing.T) {
	hpa := encodeHPAProto(t, wireHPA(1))
	status := encodeHPAProto(t, &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Code: 410, Reason: metav1.StatusReasonExpired})
	list := encodeHPAProto(t, &autoscalingv2.HorizontalPodAutoscalerList{Items: []autoscalingv2.HorizontalPodAutoscaler{*wireHPA(2)}})
	defaults := hpaKind
	tests := []struct {
		name     string
		data     []byte
		defaults *schema.GroupVersionKind
		into     func() runtime.Object
		wantErr  string
	}{
		{name: "another kind", data: status},
		{name: "a list into its object", data: list, into: func() runtime.Object { return &autoscalingv2.HorizontalPodAutoscalerList{} }},
		{name: "into an object", data: hpa, into: func() runtime.Object { return &autoscalingv2.HorizontalPodAutoscaler{} }},
		{name: "with defaults", data: hpa, defaults: &defaults},
		{name: "not protobuf", data: []byte(`{"kind":"HorizontalPodAutoscaler"}`), wantErr: "does not appear to be a protobuf message"},
		{name: "truncated", data: hpa[:len(hpa)/2], wantErr: "unexpected EOF"},
		{name: "empty", data: nil, wantErr: "empty data"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			into := func() runtime.Object {
				if tt.into == nil {
					return nil
				}
				return tt.into()
			}
			decodesAs(t, hpaProtoDecoder{protoSerializer()}, protoSerializer(), tt.data, tt.defaults, into, tt.wantErr)
		})
	}
}

// decodesAs decodes data with d and with ref, the reference it must agree
// with, each into a new object from into: the same object and kind, or
// the same error, one containing wantErr when that is set.
func decodesAs(t *testing.T, d, ref runtime.Decoder, data []byte, defaults *schema.GroupVersionKind, into func() runtime.Object, wantErr string) {
	t.Helper()
	got, gotKind, err := d.Decode(data, defaults, into())
	want, wantKind, refErr := ref.Decode(data, defaults, into())
	if wantErr != "" {
		if err == nil || refErr == nil || err.Error() != refErr.Error() || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("error %v, want the serializer's %v (with %q)", err, refErr, wantErr)
		}
		return
	}
	if err != nil || refErr != nil {
		t.Fatalf("errors %v, %v", err, refErr)
	}
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotKind, wantKind) {
		t.Errorf("got %#v (%v)\nwant %#v (%v)", got, gotKind, want, wantKind)
	}
}

// TestHPAProtoDecoderSkipsTheEnvelopeCopy: decoding a lone HPA allocates
// at least the object's size less than the protobuf serializer, which
// copies it out of its envelope first.
func TestHPAProtoDecoderSkipsTheEnvelopeCopy(t *testing.T) {
	data := encodeHPAProto(t, wireHPA(1))
	bytesPerDecode := func(d runtime.Decoder) int64 {
		return testing.Benchmark(func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := d.Decode(data, nil, nil); err != nil {
					b.Fatal(err)
				}
			}
		}).AllocedBytesPerOp()
	}
	fast, ref := bytesPerDecode(hpaProtoDecoder{protoSerializer()}), bytesPerDecode(protoSerializer())
	if ref-fast < int64(len(data))*9/10 {
		t.Errorf("a decode allocates %d bytes, the serializer's %d: want at least %d (the object) less", fast, ref, len(data)*9/10)
	}
}

// hpaAPI serves HPAs in protobuf as kube-apiserver does: listed, or,
// for a watch, listed as ADDED events (to a watch-list request, closed by
// the bookmark that ends the initial events) and then events.
func hpaAPI(t *testing.T, list []autoscalingv2.HorizontalPodAutoscaler, events []*autoscalingv2.HorizontalPodAutoscaler) *httptest.Server {
	// Encoded before serving: an encoder sets the object's kind while it
	// runs, so the test must not encode the same objects meanwhile.
	frame := func(typ watch.EventType, hpa *autoscalingv2.HorizontalPodAutoscaler) []byte {
		ev := metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: encodeHPAProto(t, hpa)}}
		b, err := ev.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
	}
	listBody := encodeHPAProto(t, &autoscalingv2.HorizontalPodAutoscalerList{ListMeta: metav1.ListMeta{ResourceVersion: "10"}, Items: list})
	var initial, later []byte
	for i := range list {
		initial = append(initial, frame(watch.Added, &list[i])...)
	}
	initial = append(initial, frame(watch.Bookmark, &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{
		ResourceVersion: "10", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}})...)
	for _, hpa := range events {
		later = append(later, frame(watch.Modified, hpa)...)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.Header.Get("Accept"), runtime.ContentTypeProtobuf) {
			t.Errorf("%s asked for %q, want protobuf first", r.URL, r.Header.Get("Accept"))
		}
		if r.URL.Query().Get("watch") != "true" {
			w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
			_, _ = w.Write(listBody)
			return
		}
		w.Header().Set("Content-Type", runtime.ContentTypeProtobuf+";stream=watch")
		if r.URL.Query().Get("sendInitialEvents") == "true" {
			_, _ = w.Write(initial)
		}
		_, _ = w.Write(later)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestUseHPAWatchClient: the factory's HPA informer lists and watches
// through the client, and its lister holds what the watch delivered, as
// the protobuf serializer decodes it, through the factory's transform.
func TestUseHPAWatchClient(t *testing.T) {
	listed, watched := wireHPA(1), wireHPA(2)
	watched.Name = listed.Name
	watched.Status.DesiredReplicas = 7
	watched.ResourceVersion = "11"
	srv := hpaAPI(t, []autoscalingv2.HorizontalPodAutoscaler{*listed}, []*autoscalingv2.HorizontalPodAutoscaler{watched})
	client, err := NewHPAWatchClient(&rest.Config{Host: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	transformed := 0
	factory := informers.NewSharedInformerFactoryWithOptions(fake.NewClientset(), 0, informers.WithTransform(func(obj any) (any, error) {
		transformed++
		return obj, nil
	}))
	UseHPAWatchClient(factory, client, "bench")
	lister := factory.Autoscaling().V2().HorizontalPodAutoscalers().Lister()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	defer cancel()
	want, _, err := protoSerializer().Decode(encodeHPAProto(t, watched), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{}) // as the client's decoder leaves it
	var got *autoscalingv2.HorizontalPodAutoscaler
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		got, err = lister.HorizontalPodAutoscalers("bench").Get(listed.Name)
		return err == nil && got.Status.DesiredReplicas == 7, nil
	}); err != nil {
		t.Fatalf("the watched object never reached the cache: %v, %v", got, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("cached %#v\nwant %#v", got, want)
	}
	if !cache.WaitForCacheSync(ctx.Done(), factory.Autoscaling().V2().HorizontalPodAutoscalers().Informer().HasSynced) || transformed < 2 {
		t.Errorf("the factory's transform saw %d objects, want the listed and the watched", transformed)
	}
}

// rawProtoStream is client-go's serializer of protobuf watch frames, the
// reference watchEventDecoder must agree with.
func rawProtoStream(t testing.TB) runtime.Serializer {
	t.Helper()
	for _, info := range rest.CodecFactoryForGeneratedClient(scheme.Scheme, scheme.Codecs).WithoutConversion().SupportedMediaTypes() {
		if info.MediaType == runtime.ContentTypeProtobuf {
			return info.StreamSerializer.Serializer
		}
	}
	t.Fatal("client-go's codec factory has no protobuf stream serializer")
	return nil
}

// watchFrame is one protobuf watch frame's event, without its length.
func watchFrame(t testing.TB, ev metav1.WatchEvent) []byte {
	t.Helper()
	b, err := ev.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWatchEventDecoderMatchesSerializer decodes watch frames into a
// WatchEvent, as client-go's watch decoder does, with watchEventDecoder
// and with the raw protobuf serializer: the same events, kinds and errors.
func TestWatchEventDecoderMatchesSerializer(t *testing.T) {
	hpa := encodeHPAProto(t, wireHPA(1))
	status := encodeHPAProto(t, &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Code: 410, Reason: metav1.StatusReasonExpired})
	modified := watchFrame(t, metav1.WatchEvent{Type: "MODIFIED", Object: runtime.RawExtension{Raw: hpa}})
	rawHPA, err := wireHPA(1).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	defaults := hpaKind
	tests := []struct {
		name     string
		data     []byte
		defaults *schema.GroupVersionKind
		into     func() runtime.Object
		wantErr  string
	}{
		{name: "modified", data: modified},
		{name: "bookmark", data: watchFrame(t, metav1.WatchEvent{Type: "BOOKMARK", Object: runtime.RawExtension{Raw: hpa}})},
		{name: "error", data: watchFrame(t, metav1.WatchEvent{Type: "ERROR", Object: runtime.RawExtension{Raw: status}})},
		{name: "a type the API does not send", data: watchFrame(t, metav1.WatchEvent{Type: "RESIZED", Object: runtime.RawExtension{Raw: hpa}})},
		{name: "no object", data: watchFrame(t, metav1.WatchEvent{Type: "ADDED"})},
		{name: "fields repeated", data: append(watchFrame(t, metav1.WatchEvent{Type: "ADDED", Object: runtime.RawExtension{Raw: status}}), modified...)},
		{name: "with defaults (an HPA's, so the frame is read as one)", data: modified, defaults: &defaults, wantErr: "wrong wireType"},
		{name: "into an HPA", data: rawHPA, into: func() runtime.Object { return &autoscalingv2.HorizontalPodAutoscaler{} }},
		{name: "truncated", data: modified[:len(modified)-3], wantErr: "unexpected EOF"},
		{name: "empty", data: nil, wantErr: "empty data"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			into := func() runtime.Object {
				if tt.into == nil {
					return &metav1.WatchEvent{}
				}
				return tt.into()
			}
			decodesAs(t, watchEventDecoder{rawProtoStream(t)}, rawProtoStream(t), tt.data, tt.defaults, into, tt.wantErr)
		})
	}
}

// TestWatchEventDecoderSkipsTheCopy: decoding a frame allocates at least
// the object's size less than the raw serializer, which copies the object
// out of the frame; and hpaProtobuf gives it for protobuf streams, once,
// without changing client-go's codec factory.
func TestWatchEventDecoderSkipsTheCopy(t *testing.T) {
	frame := watchFrame(t, metav1.WatchEvent{Type: "MODIFIED", Object: runtime.RawExtension{Raw: encodeHPAProto(t, wireHPA(1))}})
	bytesPerDecode := func(d runtime.Decoder) int64 {
		const decodes = 200
		var ev metav1.WatchEvent
		var before, after goruntime.MemStats
		goruntime.ReadMemStats(&before)
		for range decodes {
			if _, _, err := d.Decode(frame, nil, &ev); err != nil {
				t.Fatal(err)
			}
		}
		goruntime.ReadMemStats(&after)
		return int64(after.TotalAlloc-before.TotalAlloc) / decodes
	}
	fast, ref := bytesPerDecode(watchEventDecoder{rawProtoStream(t)}), bytesPerDecode(rawProtoStream(t))
	if ref-fast < int64(len(frame))*9/10 {
		t.Errorf("a decode allocates %d bytes, the serializer's %d: want at least %d (the object) less", fast, ref, len(frame)*9/10)
	}
	for range 2 {
		for _, info := range newHPAProtobuf().SupportedMediaTypes() {
			if info.MediaType != runtime.ContentTypeProtobuf {
				continue
			}
			d, ok := info.StreamSerializer.Serializer.(watchEventDecoder)
			if _, twice := d.Serializer.(watchEventDecoder); !ok || twice {
				t.Errorf("protobuf streams decoded by %#v, want watchEventDecoder around client-go's serializer", info.StreamSerializer.Serializer)
			}
		}
	}
	if _, ok := rawProtoStream(t).(watchEventDecoder); ok {
		t.Error("client-go's codec factory was changed")
	}
}

// BenchmarkHPAProtoDecode: what native mode spends on each HPA its watch
// delivers (every status write comes back so, each replica's to every
// replica when sharded).
func BenchmarkHPAProtoDecode(b *testing.B) {
	data := encodeHPAProto(b, wireHPA(1))
	d := hpaProtoDecoder{protoSerializer()}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := d.Decode(data, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
}
