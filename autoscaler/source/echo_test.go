package source

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"sigs.k8s.io/randfill"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/autoscaler/internal/pbwire"
)

// echoOf is what kube-apiserver sends back through the watch after a
// status write of body to cached: the object as stored (an unstructured
// map, encoded with sorted keys), cached's but for the status the body
// carries and the resourceVersion.
func echoOf(t *testing.T, cached *v1alpha1.HorizontalAutoscaler, body []byte, version string) []byte {
	t.Helper()
	// Numbers as they are written: the apiserver keeps int64s exact.
	unstructured := func(data []byte) map[string]any {
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		var m map[string]any
		if err := d.Decode(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	o := cached.DeepCopy()
	o.ResourceVersion = version
	data, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	stored := unstructured(data)
	stored["status"] = unstructured(body)["status"]
	if data, err = json.Marshal(stored); err != nil {
		t.Fatal(err)
	}
	return data
}

// decodeWatched decodes data as the watch's client does, with d.
func decodeWatched(t *testing.T, d runtime.Decoder, data []byte) *v1alpha1.HorizontalAutoscaler {
	t.Helper()
	obj, err := runtime.Decode(runtime.WithoutVersionDecoder{Decoder: d}, data)
	if err != nil {
		t.Fatal(err)
	}
	ha, ok := obj.(*v1alpha1.HorizontalAutoscaler)
	if !ok {
		t.Fatalf("decoded a %T", obj)
	}
	return ha
}

// checkStoredIsTheEcho writes status to cached (on paper): unless the
// body is one storedObject refuses, the watch's decoder must take the
// object storedObject gives for the echo, and that object must be the one
// decoding the echo gives: semantically equal, and encoded alike.
func checkStoredIsTheEcho(t *testing.T, cached *v1alpha1.HorizontalAutoscaler, status v1alpha1.HorizontalAutoscalerStatus) (taken bool) {
	t.Helper()
	body, err := encodeStatusBody(haStatusBody{TypeMeta: haTypeMeta, ObjectMeta: cached.ObjectMeta, Status: status})
	if err != nil {
		t.Fatal(err)
	}
	const version = "4711"
	stored, ok := storedObject(cached, &status, body, version)
	if !ok {
		if !hasReplacement(body) {
			t.Fatalf("storedObject refused a body with no replaced string: %s", body)
		}
		return false
	}
	echo := echoOf(t, cached, body, version)
	want := decodeWatched(t, newHAJSON(nil, nil).info.Serializer, echo)
	e := newEchoes()
	e.finish(e.begin(cached.Namespace, cached.Name), stored)
	got := decodeWatched(t, newHAJSON(nil, e).info.Serializer, echo)
	if got != stored {
		t.Fatalf("the decoder did not take the expected object for the echo %s", echo)
	}
	if !apiequality.Semantic.DeepEqual(got, want) {
		t.Fatalf("the object taken differs from the echo decoded:\ntaken   %+v\ndecoded %+v", got, want)
	}
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(want)
	if !bytes.Equal(gotJSON, wantJSON) {
		t.Fatalf("the object taken encodes as\n%s\nthe echo decoded as\n%s", gotJSON, wantJSON)
	}
	for i, c := range got.Status.Conditions {
		if w := want.Status.Conditions[i].LastTransitionTime; c.LastTransitionTime.Location() != w.Location() || !c.LastTransitionTime.Equal(&w) {
			t.Fatalf("condition %d's time is %v, decoded %v", i, c.LastTransitionTime, w)
		}
	}

	// The echo before the write's answer: kept undecoded, then read as
	// the object the write stored.
	stored, _ = storedObject(cached, &status, body, version)
	w := e.begin(cached.Namespace, cached.Name)
	obj, err := runtime.Decode(runtime.WithoutVersionDecoder{Decoder: newHAJSON(nil, e).info.Serializer}, echo)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := obj.(*deferredHA); !ok {
		t.Fatalf("the echo of a write in flight was decoded as a %T, want it kept (a deferredHA)", obj)
	}
	e.finish(w, stored)
	read, err := getOne(t, obj)
	if err != nil {
		t.Fatal(err)
	}
	if read != stored {
		t.Fatal("the echo that came before the write's answer was decoded when read, not taken")
	}
	readJSON, _ := json.Marshal(read)
	if !apiequality.Semantic.DeepEqual(read, want) || !bytes.Equal(readJSON, wantJSON) {
		t.Fatalf("the echo that came before the answer reads as\n%s\ndecoded\n%s", readJSON, wantJSON)
	}
	return true
}

// TestStoredObjectIsTheEcho: the object a status write stored, as
// storedObject makes it, is the one the watch's decoder would have made of
// the echo, for the statuses a reconcile writes (times with nanoseconds,
// which JSON holds to the second) and for random ones.
func TestStoredObjectIsTheEcho(t *testing.T) {
	cached := wireHA(3)
	cached.ManagedFields = nil
	cached.Labels = map[string]string{"app": "web"}
	cached.Annotations = map[string]string{"note": "kept"}
	now := metav1.NewTime(time.Date(2026, 12, 1, 10, 30, 15, 123456789, time.UTC))
	before := metav1.NewTime(time.Date(1969, 7, 20, 20, 17, 40, 999999999, time.FixedZone("x", 3600)))
	for _, tc := range []struct {
		name   string
		status func() v1alpha1.HorizontalAutoscalerStatus
	}{
		{"a reconcile's status", func() v1alpha1.HorizontalAutoscalerStatus { return wireHA(4).Status }},
		{"times with nanoseconds, in other zones, before 1970", func() v1alpha1.HorizontalAutoscalerStatus {
			s := wireHA(5).Status
			s.LastScaleTime = &now
			s.Conditions[0].LastTransitionTime = now
			s.Conditions[1].LastTransitionTime = before
			return s
		}},
		{"a zero time and no tidal block", func() v1alpha1.HorizontalAutoscalerStatus {
			s := wireHA(6).Status
			s.Conditions[0].LastTransitionTime = metav1.Time{}
			s.Tidal = nil
			return s
		}},
		{"no metrics, an empty list", func() v1alpha1.HorizontalAutoscalerStatus {
			s := wireHA(7).Status
			s.CurrentMetrics = []autoscalingv2.MetricStatus{}
			return s
		}},
		{"empty", func() v1alpha1.HorizontalAutoscalerStatus { return v1alpha1.HorizontalAutoscalerStatus{} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !checkStoredIsTheEcho(t, cached, tc.status()) {
				t.Fatal("storedObject refused the status")
			}
		})
	}
	t.Run("random", func(t *testing.T) {
		taken, refused := 0, 0
		for seed := int64(0); seed < 300; seed++ {
			for _, f := range []*randfill.Filler{newHAFiller(seed), newHAFiller(seed).Funcs(asciiString)} {
				f = f.Funcs(func(t *metav1.Time, c randfill.Continue) {
					*t = metav1.NewTime(time.Unix(c.Int63n(4e9), c.Int63n(1e9)))
				})
				status := randomHA(f).Status
				if checkStoredIsTheEcho(t, cached, status) {
					taken++
				} else {
					refused++
				}
			}
		}
		t.Logf("%d statuses taken, %d refused (strings with invalid UTF-8)", taken, refused)
		if taken < 300 {
			t.Errorf("only %d of %d random statuses taken", taken, taken+refused)
		}
	})
	t.Run("a replaced string", func(t *testing.T) {
		s := wireHA(8).Status
		s.Conditions[0].Message = "bad \xff byte"
		if checkStoredIsTheEcho(t, cached, s) {
			t.Fatal("storedObject took a status whose message comes back changed")
		}
	})
	t.Run("no version", func(t *testing.T) {
		s := wireHA(9).Status
		if _, ok := storedObject(cached, &s, []byte(`{}`), ""); ok {
			t.Fatal("storedObject made an object without the write's resourceVersion")
		}
	})
}

// TestEchoesTake: the object a write stored is taken once, by the event
// of its namespace, name and version, whether the event comes after the
// write's answer (take) or before it (resolve, when the event's object is
// read); the first other event of the object forgets the write.
func TestEchoesTake(t *testing.T) {
	stored := func(version string) *v1alpha1.HorizontalAutoscaler {
		return &v1alpha1.HorizontalAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web", ResourceVersion: version}}
	}
	// A step: "begin", "finish" (stored at version; "" stored nothing),
	// "take" of an event at version (want: "taken", "pending" or ""), or
	// "resolve" the last pending write for an event at version (want:
	// "taken" or "").
	type step struct{ op, version, want string }
	for _, tc := range []struct {
		name   string
		steps  []step
		reused uint64
	}{
		{"the echo after the answer", []step{{"begin", "", ""}, {"finish", "7", ""}, {"take", "7", "taken"}}, 1},
		{"taken once", []step{{"begin", "", ""}, {"finish", "7", ""}, {"take", "7", "taken"}, {"take", "7", ""}}, 1},
		{"another version forgets it", []step{{"begin", "", ""}, {"finish", "7", ""}, {"take", "8", ""}, {"take", "7", ""}}, 0},
		{"a failed write", []step{{"begin", "", ""}, {"finish", "", ""}, {"take", "7", ""}}, 0},
		{"the last write counts", []step{{"begin", "", ""}, {"finish", "7", ""}, {"begin", "", ""}, {"finish", "9", ""}, {"take", "9", "taken"}}, 1},
		{"an event without a version", []step{{"begin", "", ""}, {"finish", "7", ""}, {"take", "", ""}}, 0},
		{"nothing written", []step{{"take", "7", ""}}, 0},
		{"the echo before the answer", []step{{"begin", "", ""}, {"take", "7", "pending"}, {"finish", "7", ""}, {"resolve", "7", "taken"}, {"resolve", "7", ""}}, 1},
		{"read before the answer", []step{{"begin", "", ""}, {"take", "7", "pending"}, {"resolve", "7", ""}, {"finish", "7", ""}}, 0},
		{"another writer's change before the answer", []step{{"begin", "", ""}, {"take", "6", "pending"}, {"finish", "", ""}, {"resolve", "6", ""}}, 0},
		{"pending, then forgotten", []step{{"begin", "", ""}, {"take", "7", "pending"}, {"finish", "7", ""}, {"take", "7", ""}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEchoes()
			var w, pending *write
			for i, st := range tc.steps {
				got := ""
				switch st.op {
				case "begin":
					w = e.begin("a", "web")
				case "finish":
					var obj *v1alpha1.HorizontalAutoscaler
					if st.version != "" {
						obj = stored(st.version)
					}
					e.finish(w, obj)
				case "take":
					obj, p := e.take("a", "web", st.version)
					switch {
					case obj != nil && obj.ResourceVersion == st.version:
						got = "taken"
					case obj != nil:
						got = "taken at " + obj.ResourceVersion
					case p != nil:
						got, pending = "pending", p
					}
				case "resolve":
					if obj, ok := e.resolve(pending, st.version); ok && obj.ResourceVersion == st.version {
						got = "taken"
					} else if ok {
						got = "taken at " + obj.ResourceVersion
					}
				}
				if got != st.want {
					t.Fatalf("step %d (%s %q) gave %q, want %q", i, st.op, st.version, got, st.want)
				}
			}
			if n := e.reused.Load(); n != tc.reused {
				t.Errorf("%d echoes reused, want %d", n, tc.reused)
			}
		})
	}
	var none *echoes
	if obj, p := none.take("a", "web", "7"); obj != nil || p != nil {
		t.Error("no echoes took an object")
	}
}

// TestAnswerVersion reads the resourceVersion of a status write's answer.
func TestAnswerVersion(t *testing.T) {
	for _, tc := range []struct{ name, answer, want string }{
		{"PartialObjectMetadata", `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"web","namespace":"a","uid":"u","resourceVersion":"4711","managedFields":[{"manager":"tidal"}]}}`, "4711"},
		{"the whole object", `{"apiVersion":"autoscaling.tidal.dev/v1alpha1","kind":"HorizontalAutoscaler","metadata":{"name":"web","resourceVersion":"12"},"spec":{},"status":{}}`, "12"},
		{"protobuf PartialObjectMetadata", string(protobufAnswer(t, "4711")), "4711"},
		{"protobuf, the version repeated: the last", string(protobufAnswer(t, "1", "4711")), "4711"},
		{"protobuf, another kind", "k8s\x00\n\x0c\n\x02v1\x12\x06Status", ""},
		{"protobuf, cut short", string(protobufAnswer(t, "4711")[:20]), ""},
		{"no version", `{"metadata":{"name":"web"}}`, ""},
		{"empty", ``, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := answerVersion([]byte(tc.answer)); got != tc.want {
				t.Errorf("answerVersion = %q, want %q", got, tc.want)
			}
		})
	}
}

// protobufAnswer is kube-apiserver's protobuf PartialObjectMetadata of an
// object with managed fields, encoded by apimachinery's serializer, at
// versions (each another metadata field, merged by a decoder: the last
// wins).
func protobufAnswer(t *testing.T, versions ...string) []byte {
	t.Helper()
	s := runtime.NewScheme()
	metav1.AddMetaToScheme(s)
	ser := protobuf.NewSerializer(s, s)
	var out []byte
	for i, v := range versions {
		m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "a", UID: "u", ResourceVersion: v,
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "tidal", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:status":{}}`)}}}}
		m.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("PartialObjectMetadata"))
		var buf bytes.Buffer
		if err := ser.Encode(m, &buf); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			out = buf.Bytes()
			continue
		}
		// Append this one's metadata field to the first one's object:
		// the envelope's raw field is rewritten with the longer object.
		e, err := pbwire.ReadEnvelope(buf.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		first, err := pbwire.ReadEnvelope(out)
		if err != nil {
			t.Fatal(err)
		}
		raw := append(append([]byte(nil), first.Raw...), e.Raw...)
		out = envelope(first.APIVersion, first.Kind, raw)
	}
	if got, _, err := ser.Decode(out, nil, nil); err != nil || got.(*metav1.PartialObjectMetadata).ResourceVersion != versions[len(versions)-1] {
		t.Fatalf("the answer decodes as %v, %v", got, err)
	}
	return out
}

// envelope is a Kubernetes protobuf body of an object of apiVersion and
// kind whose message is raw.
func envelope(apiVersion, kind, raw []byte) []byte {
	typeMeta := protowire.AppendTag(nil, 1, protowire.BytesType)
	typeMeta = protowire.AppendBytes(typeMeta, apiVersion)
	typeMeta = protowire.AppendTag(typeMeta, 2, protowire.BytesType)
	typeMeta = protowire.AppendBytes(typeMeta, kind)
	b := append([]byte(nil), pbwire.Prefix...)
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendBytes(b, typeMeta)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	return protowire.AppendBytes(b, raw)
}
