package source

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	restwatch "k8s.io/client-go/rest/watch"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
)

func cpuUtilization(target int32) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(target)},
	}}
}

// wireHA is a HorizontalAutoscaler as the apiserver sends it after one of
// the controller's status writes: managed fields, a cpu metric, three
// conditions and tidal's explanation.
func wireHA(i int) *v1alpha1.HorizontalAutoscaler {
	t := metav1.NewTime(time.Date(2026, 11, 21, 12, 0, i%60, 0, time.UTC))
	status := `{"f:status":{".":{},"f:conditions":{".":{},"k:{\"type\":\"AbleToScale\"}":{".":{},"f:lastTransitionTime":{},"f:message":{},"f:reason":{},"f:status":{},"f:type":{}},"k:{\"type\":\"ScalingActive\"}":{".":{},"f:lastTransitionTime":{},"f:message":{},"f:reason":{},"f:status":{},"f:type":{}}},"f:currentMetrics":{},"f:currentReplicas":{},"f:desiredReplicas":{},"f:tidal":{".":{},"f:decision":{},"f:history":{},"f:reference":{},"f:targets":{}}}}`
	spec := `{"f:spec":{".":{},"f:maxReplicas":{},"f:metrics":{},"f:minReplicas":{},"f:scaleTargetRef":{".":{},"f:apiVersion":{},"f:kind":{},"f:name":{}}}}`
	cond := func(typ autoscalingv2.HorizontalPodAutoscalerConditionType, reason, msg string) autoscalingv2.HorizontalPodAutoscalerCondition {
		return autoscalingv2.HorizontalPodAutoscalerCondition{Type: typ, Status: corev1.ConditionTrue, LastTransitionTime: t, Reason: reason, Message: msg}
	}
	q := resource.MustParse(fmt.Sprintf("%dm", 40+i%20))
	return &v1alpha1.HorizontalAutoscaler{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("web-%d", i), Namespace: "bench", UID: "6b0a3c1e-6c2e-4c8e-9d4e-0f3a2b1c4d5e",
			ResourceVersion: fmt.Sprint(100000 + i), Generation: 1, CreationTimestamp: t,
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "autoscaling.tidal.dev/v1alpha1", Time: &t, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(spec)},
				{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "autoscaling.tidal.dev/v1alpha1", Time: &t, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(status), Subresource: "status"},
			},
		},
		Spec: v1alpha1.HorizontalAutoscalerSpec{HorizontalPodAutoscalerSpec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: fmt.Sprintf("web-%d", i)},
			MinReplicas:    ptr.To[int32](1), MaxReplicas: 10,
			Metrics: []autoscalingv2.MetricSpec{cpuUtilization(50)},
		}},
		Status: v1alpha1.HorizontalAutoscalerStatus{
			HorizontalPodAutoscalerStatus: autoscalingv2.HorizontalPodAutoscalerStatus{
				ObservedGeneration: ptr.To[int64](1), CurrentReplicas: 5, DesiredReplicas: 5,
				CurrentMetrics: []autoscalingv2.MetricStatus{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{
					Name: corev1.ResourceCPU, Current: autoscalingv2.MetricValueStatus{AverageValue: &q, AverageUtilization: ptr.To[int32](int32(40 + i%20))}}}},
				Conditions: []autoscalingv2.HorizontalPodAutoscalerCondition{
					cond("AbleToScale", "ReadyForNewScale", "recommended size matches current size"),
					cond("ScalingActive", "ValidMetricFound", "the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of request)"),
				},
			},
			Tidal: &v1alpha1.TidalStatus{
				Reference: "Deployment/web", Targets: "cpu: 50%/50%", History: "r=5@1795262400+15x8",
				Decision: &v1alpha1.Decision{CurrentReplicas: 5, ProposedReplicas: 5, DesiredReplicas: 5, StabilizedReplicas: ptr.To[int32](5),
					Winner:    "cpu resource utilization (percentage of request)",
					Proposals: []v1alpha1.MetricProposal{{Name: "cpu resource utilization (percentage of request)", Replicas: ptr.To[int32](5)}}},
			},
		},
	}
}

// watchStream is n MODIFIED events and an ERROR, as the apiserver writes
// them: JSON objects one after another, each object's keys sorted (a
// custom resource is served from an unstructured map).
func watchStream(t testing.TB, n int) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for i := range n {
		raw, err := json.Marshal(wireHA(i))
		if err != nil {
			t.Fatal(err)
		}
		var sorted map[string]any // re-encoded with sorted keys
		if err := json.Unmarshal(raw, &sorted); err != nil {
			t.Fatal(err)
		}
		if err := enc.Encode(map[string]any{"type": "MODIFIED", "object": sorted}); err != nil {
			t.Fatal(err)
		}
	}
	gone := metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version"}
	if err := enc.Encode(map[string]any{"type": "ERROR", "object": gone}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// decodeWatch decodes stream as the informer's watch does with ns.
func decodeWatch(t testing.TB, ns runtime.NegotiatedSerializer, stream []byte) []watch.Event {
	info, ok := runtime.SerializerInfoForMediaType(ns.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok {
		t.Fatal("no JSON serializer")
	}
	fr := info.StreamSerializer.Framer.NewFrameReader(io.NopCloser(bytes.NewReader(stream)))
	d := restwatch.NewDecoder(streaming.NewDecoder(fr, info.StreamSerializer.Serializer), ns.DecoderToVersion(info.Serializer, v1alpha1.SchemeGroupVersion))
	var events []watch.Event
	for {
		typ, obj, err := d.Decode()
		if err == io.EOF {
			return events
		}
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, watch.Event{Type: typ, Object: obj})
	}
}

// TestHAJSONDecodesAsCodecFactory: the HorizontalAutoscaler client's
// serializer decodes a watch stream into exactly the objects
// apimachinery's own codec factory does.
func TestHAJSONDecodesAsCodecFactory(t *testing.T) {
	stream := watchStream(t, 5)
	want := decodeWatch(t, serializer.NewCodecFactory(haScheme).WithoutConversion(), stream)
	got := decodeWatch(t, newHAJSON(nil, nil), stream)
	if len(got) != 6 || len(want) != 6 {
		t.Fatalf("decoded %d and %d events, want 6", len(got), len(want))
	}
	for i := range want {
		// The client drops managed fields, as the informer would.
		if ha, ok := want[i].Object.(*v1alpha1.HorizontalAutoscaler); ok {
			if ha.ManagedFields == nil {
				t.Fatalf("event %d: the stream has no managed fields to drop", i)
			}
			ha.ManagedFields = nil
		}
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("event %d:\n got %#v\nwant %#v", i, got[i].Object, want[i].Object)
		}
	}
	if ha, ok := got[0].Object.(*v1alpha1.HorizontalAutoscaler); !ok || ha.Status.Tidal == nil || ha.Status.CurrentMetrics[0].Resource.Current.AverageValue.MilliValue() != 40 {
		t.Errorf("first object %#v", got[0].Object)
	}
	if st, ok := got[5].Object.(*metav1.Status); !ok || st.Code != 410 {
		t.Errorf("error event %#v, want a 410 Status", got[5].Object)
	}
}

// withFramer is n with its watch streams framed by f.
func withFramer(n haJSON, f runtime.Framer) haJSON {
	stream := *n.info.StreamSerializer
	stream.Framer = f
	n.info.StreamSerializer = &stream
	return n
}

// keepingManagedFields is n decoding the events' managed fields too.
func keepingManagedFields(n haJSON) haJSON {
	stream := *n.info.StreamSerializer
	ev := stream.Serializer.(eventSerializer)
	ev.keepManagedFields = true
	stream.Serializer = ev
	n.info.StreamSerializer = &stream
	return n
}

// BenchmarkWatchDecode decodes the same watch stream with apimachinery's
// codec factory; with the client's serializer framing the stream with
// apimachinery's JSON framer and decoding managed fields (as before both
// changes); with the client's serializer decoding managed fields; and
// with the client's serializer; and with every object the echo of a
// status write whose stored object the client holds (compare with
// benchstat -col /name).
func BenchmarkWatchDecode(b *testing.B) {
	const n = 100
	stream := watchStream(b, n)
	echoes := newEchoes()
	expectAll := func() {
		for i := range n {
			ha := wireHA(i)
			ha.ManagedFields = nil
			echoes.finish(echoes.begin(ha.Namespace, ha.Name), ha)
		}
	}
	for _, tc := range []struct {
		name   string
		ns     runtime.NegotiatedSerializer
		before func()
	}{
		{"codecfactory", serializer.NewCodecFactory(haScheme).WithoutConversion(), nil},
		{"hajson-jsonframer", withFramer(keepingManagedFields(newHAJSON(nil, nil)), kjson.Framer), nil},
		{"hajson-managedfields", keepingManagedFields(newHAJSON(nil, nil)), nil},
		{"hajson", newHAJSON(nil, nil), nil},
		{"hajson-deferred", newHAJSON(deferAll, nil), nil},
		{"hajson-echoes", newHAJSON(nil, echoes), expectAll},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(stream)))
			b.ReportAllocs()
			for b.Loop() {
				if tc.before != nil {
					b.StopTimer()
					tc.before()
					b.StartTimer()
				}
				if ev := decodeWatch(b, tc.ns, stream); len(ev) != n+1 {
					b.Fatalf("%d events", len(ev))
				}
			}
		})
	}
}

// TestCRDSourceWatch runs CRDSource's informer against a server speaking
// the apiserver's wire format: the listed object and a watched
// modification arrive decoded, without their managed fields; with the
// watch deferring, the modification is kept as a deferredHA (the informer
// takes it) and reads the same.
func TestCRDSourceWatch(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deferred Deferred
	}{{"decoded at once", nil}, {"deferred", deferAll}} {
		t.Run(tc.name, func(t *testing.T) { testCRDSourceWatch(t, tc.deferred) })
	}
}

func testCRDSourceWatch(t *testing.T, deferred Deferred) {
	listed, modified := wireHA(1), wireHA(1)
	listed.ResourceVersion, modified.ResourceVersion = "10", "11"
	modified.Status.DesiredReplicas = 7
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/apis/autoscaling.tidal.dev/v1alpha1/horizontalautoscalers" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		if r.URL.Query().Get("watch") != "true" {
			_ = enc.Encode(map[string]any{"apiVersion": "autoscaling.tidal.dev/v1alpha1", "kind": "HorizontalAutoscalerList",
				"metadata": map[string]any{"resourceVersion": "10"}, "items": []any{listed}})
			return
		}
		if r.URL.Query().Get("sendInitialEvents") == "true" { // client-go's watch-list
			_ = enc.Encode(map[string]any{"type": "ADDED", "object": listed})
			_ = enc.Encode(map[string]any{"type": "BOOKMARK", "object": map[string]any{
				"apiVersion": "autoscaling.tidal.dev/v1alpha1", "kind": "HorizontalAutoscaler",
				"metadata": map[string]any{"resourceVersion": "10", "annotations": map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}})
		}
		_ = enc.Encode(map[string]any{"type": "MODIFIED", "object": modified})
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	clients, err := NewHorizontalAutoscalerClients(&rest.Config{Host: srv.URL}, 1, deferred)
	if err != nil {
		t.Fatal(err)
	}
	source := CRDSource(clients, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go source.Informer().RunWithContext(ctx)
	key := modified.Namespace + "/" + modified.Name
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		obj, ok, err := source.Informer().GetIndexer().GetByKey(key)
		return ok && err == nil && obj.(metav1.Object).GetResourceVersion() == "11", nil
	}); err != nil {
		t.Fatalf("the watched modification never arrived: %v", err)
	}
	obj, _, _ := source.Informer().GetIndexer().GetByKey(key)
	if _, isDeferred := obj.(*deferredHA); isDeferred != (deferred != nil) {
		t.Errorf("the informer holds a %T", obj)
	}
	o, err := source.Get(modified.Namespace, modified.Name)
	if err != nil {
		t.Fatal(err)
	}
	got := o.Runtime().(*v1alpha1.HorizontalAutoscaler)
	if got.ManagedFields != nil {
		t.Errorf("managed fields kept in the cache: %v", got.ManagedFields)
	}
	if got.Status.DesiredReplicas != 7 || got.Status.Tidal == nil || got.Status.Tidal.History != modified.Status.Tidal.History {
		t.Errorf("status %+v", got.Status)
	}
}
