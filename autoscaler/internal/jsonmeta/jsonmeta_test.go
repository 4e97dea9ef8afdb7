package jsonmeta

import (
	"bytes"
	encjson "encoding/json"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	sigsjson "sigs.k8s.io/json"
)

// same checks that MetaFactory and json.DefaultMetaFactory agree on doc.
func same(t *testing.T, doc []byte) {
	t.Helper()
	got, gotErr := MetaFactory{}.Interpret(doc)
	want, wantErr := json.DefaultMetaFactory.Interpret(doc)
	if (gotErr != nil) != (wantErr != nil) {
		t.Fatalf("%q: error %v, encoding/json says %v", doc, gotErr, wantErr)
	}
	if gotErr == nil && *got != *want {
		t.Fatalf("%q: %v, encoding/json says %v", doc, *got, *want)
	}
}

func TestInterpret(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want schema.GroupVersionKind
		fast bool // answered without encoding/json
	}{
		{"a custom resource as the apiserver writes it", `{"apiVersion":"autoscaling.tidal.dev/v1alpha1","kind":"HorizontalAutoscaler","metadata":{"name":"web","managedFields":[{"fieldsV1":{"f:status":{"k:{\"type\":\"x\"}":{}}}}]},"status":{"kind":"not this one"}}`,
			schema.GroupVersionKind{Group: "autoscaling.tidal.dev", Version: "v1alpha1", Kind: "HorizontalAutoscaler"}, true},
		{"kind first, core group", `{"kind":"Status","apiVersion":"v1","code":410}`, schema.GroupVersionKind{Version: "v1", Kind: "Status"}, true},
		{"a watch event has neither", `{"type":"MODIFIED","object":{"apiVersion":"v1","kind":"Pod"}}`, schema.GroupVersionKind{}, true},
		{"whitespace everywhere", " {\n \"kind\" :\t\"A\" ,\r\n \"apiVersion\" : \"g/v\" } ", schema.GroupVersionKind{Group: "g", Version: "v", Kind: "A"}, true},
		{"the last of repeated keys wins", `{"kind":"A","kind":"B","apiVersion":"v1"}`, schema.GroupVersionKind{Version: "v1", Kind: "B"}, true},
		{"strings with escapes and brackets are skipped whole", `{"x":"a\"}]{[\\","y":[1,{"z":"}"}],"kind":"K"}`, schema.GroupVersionKind{Kind: "K"}, true},
		{"literals and numbers", `{"a":true,"b":null,"c":-1.5e3,"kind":"K","d":false}`, schema.GroupVersionKind{Kind: "K"}, true},
		{"empty object", `{}`, schema.GroupVersionKind{}, true},
		{"a key matching only case-insensitively", `{"Kind":"A","apiVersion":"v1"}`, schema.GroupVersionKind{Version: "v1", Kind: "A"}, false},
		{"the Kelvin sign folds to k", "{\"\u212aind\":\"A\"}", schema.GroupVersionKind{Kind: "A"}, false},
		{"an escaped value", `{"kind":"\u0041"}`, schema.GroupVersionKind{Kind: "A"}, false},
		{"an escaped key", `{"\u006bind":"A"}`, schema.GroupVersionKind{Kind: "A"}, false},
		{"a null kind", `{"kind":null}`, schema.GroupVersionKind{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			same(t, []byte(tc.doc))
			got, err := MetaFactory{}.Interpret([]byte(tc.doc))
			if err != nil || *got != tc.want {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
			if _, _, fast := sniff([]byte(tc.doc)); fast != tc.fast {
				t.Errorf("answered without encoding/json: %v, want %v", fast, tc.fast)
			}
		})
	}
}

func TestInterpretErrors(t *testing.T) {
	for _, doc := range []string{``, `[]`, `"kind"`, `{"kind":1}`, `{"kind":"A"`, `{"kind":"A",}`, `{"apiVersion":"a/b/c"}`, `{"kind" "A"}`} {
		t.Run(doc, func(t *testing.T) {
			if _, err := (MetaFactory{}).Interpret([]byte(doc)); err == nil {
				t.Errorf("%q: no error", doc)
			}
			same(t, []byte(doc))
		})
	}
}

// FuzzInterpret: on every valid JSON document both agree.
func FuzzInterpret(f *testing.F) {
	for _, s := range []string{
		`{"apiVersion":"apps/v1","kind":"Deployment","spec":{"replicas":3}}`,
		`{"type":"ADDED","object":{"kind":"K"}}`,
		`{"a":"\\\"","kind":"K","b":[{},[],"]"]}`,
		`{"KIND":"x","kind":"y"}`,
		`{"kind":"a","Kind":"b"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		if !encjson.Valid(doc) {
			return
		}
		same(t, doc)
	})
}

// decodeEvent is the decoding Event replaces.
func decodeEvent(data []byte) (metav1.WatchEvent, error) {
	var ev metav1.WatchEvent
	err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, &ev)
	return ev, err
}

// sameEvent checks that, where Event answers, it agrees with decodeEvent.
func sameEvent(t *testing.T, doc []byte) (ok bool) {
	t.Helper()
	typ, obj, ok := Event(doc)
	want, err := decodeEvent(doc)
	if !ok {
		return false
	}
	if err != nil {
		t.Fatalf("%q: Event answered, sigs.k8s.io/json fails: %v", doc, err)
	}
	if typ != want.Type || !bytes.Equal(obj, want.Object.Raw) || (obj == nil) != (want.Object.Raw == nil) {
		t.Fatalf("%q: type %q object %q; sigs.k8s.io/json: %q %q", doc, typ, obj, want.Type, want.Object.Raw)
	}
	return true
}

func TestEvent(t *testing.T) {
	tests := []struct {
		name     string
		doc      string
		typ, obj string
		fast     bool
	}{
		{"as the apiserver writes it", `{"type":"MODIFIED","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"}}}` + "\n", "MODIFIED", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"}}`, true},
		{"object first, spaces kept inside", `{ "object" : [1, "}"] , "type":"ADDED" }`, "ADDED", `[1, "}"]`, true},
		{"null object", `{"type":"DELETED","object":null}`, "DELETED", ``, true},
		{"other keys ignored, case matters", `{"Type":"X","type":"BOOKMARK","Object":{},"extra":{"object":1}}`, "BOOKMARK", ``, true},
		{"the last repeated key wins", `{"type":"A","type":"B","object":1,"object":2}`, "B", `2`, true},
		{"empty", `{}`, "", ``, true},
		{"an escaped type", `{"type":"\u0041","object":{}}`, "A", `{}`, false},
		{"a type that is not a string", `{"type":5,"object":{}}`, "", ``, false},
		{"an escaped key", `{"\u0074ype":"A"}`, "A", ``, false},
		{"not an object", `[{"type":"A"}]`, "", ``, false},
		// Framer does not validate: Event rejects what encoding/json would
		// have, except inside the returned object, which its decoder checks.
		{"an invalid value of another key", `{"type":"A","object":{},"x":tru}`, "", ``, false},
		{"something after the event", `{"type":"A","object":{}} x`, "", ``, false},
		{"an invalid object that a later one replaces", `{"type":"A","object":{x},"object":{}}`, "", ``, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if fast := sameEvent(t, []byte(tc.doc)); fast != tc.fast {
				t.Fatalf("answered %v, want %v", fast, tc.fast)
			}
			if !tc.fast {
				return
			}
			typ, obj, _ := Event([]byte(tc.doc))
			if typ != tc.typ || string(obj) != tc.obj {
				t.Errorf("got %q %q, want %q %q", typ, obj, tc.typ, tc.obj)
			}
		})
	}
}

// FuzzEvent: where Event answers with an object that is valid JSON (or
// none), the document is valid and Event agrees with sigs.k8s.io/json.
func FuzzEvent(f *testing.F) {
	for _, s := range []string{
		`{"type":"MODIFIED","object":{"kind":"K","metadata":{"name":"x"}}}`,
		`{"object":null,"type":"ERROR"}`,
		`{"type":"A","object":"\"}","x":[]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		_, obj, ok := Event(doc)
		if !ok || (obj != nil && !encjson.Valid(obj)) {
			return // declined, or its object's decoder rejects it
		}
		sameEvent(t, doc)
	})
}

// withoutManagedFieldsByMap is WithoutManagedFields by decoding: doc as a
// map with metadata.managedFields deleted.
func withoutManagedFieldsByMap(t *testing.T, doc []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := encjson.Unmarshal(doc, &m); err != nil {
		t.Fatalf("%q: %v", doc, err)
	}
	if meta, ok := m["metadata"].(map[string]any); ok {
		delete(meta, "managedFields")
	}
	return m
}

func TestWithoutManagedFields(t *testing.T) {
	tests := []struct {
		name, doc, want string
		ok              bool
	}{
		{"as the apiserver writes it", `{"apiVersion":"v","kind":"K","metadata":{"generation":1,"managedFields":[{"f:x":{}}],"name":"a"},"spec":{}}`,
			`{"apiVersion":"v","kind":"K","metadata":{"generation":1,"name":"a"},"spec":{}}`, true},
		{"first member, spaces", `{"metadata": { "managedFields" : [ "]" ] , "name":"a" }}`, `{"metadata": { "name":"a" }}`, true},
		{"last member", `{"metadata":{"name":"a", "managedFields":[]}}`, `{"metadata":{"name":"a"}}`, true},
		{"only member", `{"metadata":{"managedFields":null}}`, `{"metadata":{}}`, true},
		{"no managed fields", `{"metadata":{"name":"a"}}`, ``, false},
		{"no metadata", `{"kind":"K"}`, ``, false},
		{"metadata not an object", `{"metadata":[{"managedFields":1}]}`, ``, false},
		{"managedFields elsewhere only", `{"spec":{"managedFields":[]},"metadata":{}}`, ``, false},
		{"a repeated metadata", `{"metadata":{"managedFields":[]},"metadata":{"name":"a"}}`, ``, false},
		{"a repeated managedFields", `{"metadata":{"managedFields":[],"managedFields":[1]}}`, ``, false},
		{"an escaped key on the way", `{"metad\u0061ta":{"managedFields":[]}}`, ``, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, ok := WithoutManagedFields([]byte(tc.doc))
			if ok != tc.ok || string(out) != tc.want {
				t.Fatalf("got %q %v, want %q %v", out, ok, tc.want, tc.ok)
			}
			if ok && !reflect.DeepEqual(withoutManagedFieldsByMap(t, out), withoutManagedFieldsByMap(t, []byte(tc.doc))) {
				t.Errorf("%q does not decode as %q without managed fields", out, tc.doc)
			}
		})
	}
}

// FuzzWithoutManagedFields: on every valid JSON document, where
// WithoutManagedFields answers, its answer is valid JSON that decodes as
// the document with metadata.managedFields deleted.
func FuzzWithoutManagedFields(f *testing.F) {
	for _, s := range []string{
		`{"kind":"K","metadata":{"managedFields":[{"f:s":{"k:{\"a\":1}":{}}}],"name":"x"},"status":{}}`,
		`{"metadata":{"name":"x","managedFields":[]} }`,
		`{"metadata":{"managedFields":{}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		var m map[string]any
		if encjson.Unmarshal(doc, &m) != nil {
			return
		}
		out, ok := WithoutManagedFields(doc)
		if !ok {
			return
		}
		if !encjson.Valid(out) {
			t.Fatalf("%q: invalid result %q", doc, out)
		}
		if got, want := withoutManagedFieldsByMap(t, out), withoutManagedFieldsByMap(t, doc); !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: %q decodes as %v, want %v", doc, out, got, want)
		}
	})
}

func TestReadHead(t *testing.T) {
	const av = `"apiVersion":"g/v","kind":"K",`
	tests := []struct {
		desc, doc string
		want      Head
		ok        bool
	}{
		{"as the apiserver writes it", `{` + av + `"metadata":{"name":"a","namespace":"ns","uid":"u","resourceVersion":"42"},"spec":{"name":"b"}}`,
			Head{"g/v", "K", []byte(`{"name":"a","namespace":"ns","uid":"u","resourceVersion":"42"}`), "ns", "a", "42"}, true},
		{"spaces, metadata first", `{ "metadata" : { "namespace" : "ns" , "name" : "a" } , "kind":"K", "spec":{}}`,
			Head{"", "K", []byte(`{ "namespace" : "ns" , "name" : "a" }`), "ns", "a", ""}, true},
		{"the last kind wins", `{"kind":"J","metadata":{"name":"a"},"kind":"K"}`, Head{"", "K", []byte(`{"name":"a"}`), "", "a", ""}, true},
		{"no name", `{` + av + `"metadata":{"namespace":"ns"}}`, Head{}, false},
		{"no metadata", `{` + av + `"spec":{}}`, Head{}, false},
		{"metadata not an object", `{"metadata":["name"]}`, Head{}, false},
		{"a repeated metadata", `{"metadata":{"name":"a"},"metadata":{"name":"b"}}`, Head{}, false},
		{"a repeated name", `{"metadata":{"name":"a","name":"b"}}`, Head{}, false},
		{"a name that is no string", `{"metadata":{"name":1}}`, Head{}, false},
		{"an escaped name", `{"metadata":{"name":"\u0061"}}`, Head{}, false},
		{"a kind that is no string", `{"kind":1,"metadata":{"name":"a"}}`, Head{}, false},
		{"a key matching only in case", `{"metadata":{"name":"a","Namespace":"ns"}}`, Head{}, false},
		{"a resourceVersion matching only in case: unknown", `{"metadata":{"name":"a","resourceVersion":"1","resourceversion":"2"}}`,
			Head{"", "", []byte(`{"name":"a","resourceVersion":"1","resourceversion":"2"}`), "", "a", ""}, true},
		{"a repeated resourceVersion: unknown", `{"metadata":{"name":"a","resourceVersion":"1","resourceVersion":"2"}}`,
			Head{"", "", []byte(`{"name":"a","resourceVersion":"1","resourceVersion":"2"}`), "", "a", ""}, true},
		{"an escaped resourceVersion: unknown", `{"metadata":{"name":"a","resourceVersion":"\u0031"}}`,
			Head{"", "", []byte(`{"name":"a","resourceVersion":"\u0031"}`), "", "a", ""}, true},
		{"a top-level key matching only in case", `{"Kind":"K","metadata":{"name":"a"}}`, Head{}, false},
		{"no object", `["metadata"]`, Head{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got, ok := ReadHead([]byte(tc.doc))
			if ok != tc.ok || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v %v, want %+v %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// eventWithoutManagedFieldsInTwo is EventWithoutManagedFields as Event
// followed by WithoutManagedFields, and a copy where that declines.
func eventWithoutManagedFieldsInTwo(doc []byte) (typ string, object []byte, ok bool) {
	typ, obj, ok := Event(doc)
	if !ok || obj == nil {
		return typ, nil, ok
	}
	if slim, cut := WithoutManagedFields(obj); cut {
		return typ, slim, true
	}
	return typ, bytes.Clone(obj), true
}

// sameInOne checks that EventWithoutManagedFields answers as the two
// calls it replaces.
func sameInOne(t *testing.T, doc []byte) {
	t.Helper()
	typ, obj, ok := EventWithoutManagedFields(doc)
	wantTyp, wantObj, wantOK := eventWithoutManagedFieldsInTwo(doc)
	if typ != wantTyp || !bytes.Equal(obj, wantObj) || (obj == nil) != (wantObj == nil) || ok != wantOK {
		t.Fatalf("%q: got %q %q %v; Event and WithoutManagedFields: %q %q %v", doc, typ, obj, ok, wantTyp, wantObj, wantOK)
	}
}

func TestEventWithoutManagedFields(t *testing.T) {
	tests := []struct {
		name, doc, obj string
		ok             bool
	}{
		{"as the apiserver writes it", `{"type":"MODIFIED","object":{"apiVersion":"v","kind":"K","metadata":{"generation":1,"managedFields":[{"f:x":{"k:{\"a\":\"}\"}":{}}}],"name":"a"},"spec":{}}}` + "\n",
			`{"apiVersion":"v","kind":"K","metadata":{"generation":1,"name":"a"},"spec":{}}`, true},
		{"object first, last member, spaces", `{ "object" : {"metadata": { "name":"a" , "managedFields" : [ "]" ] } } , "type":"ADDED" }`, `{"metadata": { "name":"a"  } }`, true},
		{"no managed fields: copied whole", `{"type":"ADDED","object":{"metadata":{"name":"a"}}}`, `{"metadata":{"name":"a"}}`, true},
		{"an array object: copied whole", `{"type":"ADDED","object":[{"metadata":{"managedFields":[]}}]}`, `[{"metadata":{"managedFields":[]}}]`, true},
		{"a repeated metadata: copied whole", `{"type":"A","object":{"metadata":{"managedFields":[]},"metadata":{}}}`, `{"metadata":{"managedFields":[]},"metadata":{}}`, true},
		{"metadata not an object: copied whole", `{"type":"A","object":{"metadata":1}}`, `{"metadata":1}`, true},
		{"an escaped key in the object: copied whole", `{"type":"A","object":{"\u006bind":"K","metadata":{"managedFields":[]}}}`, `{"\u006bind":"K","metadata":{"managedFields":[]}}`, true},
		{"the last object wins, cut", `{"type":"A","object":{"metadata":{"name":"b"}},"object":{"metadata":{"managedFields":1,"name":"a"}}}`, `{"metadata":{"name":"a"}}`, true},
		{"the last object wins, whole", `{"type":"A","object":{"metadata":{"managedFields":1}},"object":{"x":1}}`, `{"x":1}`, true},
		{"null object", `{"type":"DELETED","object":null}`, ``, true},
		{"an invalid value of another key", `{"type":"A","object":{},"x":tru}`, ``, false},
		{"no value: its decoder fails", `{"type":"A","object":}`, ``, true},
		{"cut off inside the object", `{"type":"A","object":{"metadata":{"managedFields":[`, ``, false},
		{"something after the event", `{"type":"A","object":{}} x`, ``, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sameInOne(t, []byte(tc.doc))
			_, obj, ok := EventWithoutManagedFields([]byte(tc.doc))
			if ok != tc.ok || string(obj) != tc.obj {
				t.Fatalf("got %q %v, want %q %v", obj, ok, tc.obj, tc.ok)
			}
		})
	}
}

// FuzzEventWithoutManagedFields: on every document,
// EventWithoutManagedFields answers as Event followed by
// WithoutManagedFields.
func FuzzEventWithoutManagedFields(f *testing.F) {
	for _, s := range []string{
		`{"type":"MODIFIED","object":{"kind":"K","metadata":{"managedFields":[{"f:s":{"k:{\"a\":1}":{}}}],"name":"x"},"status":{}}}`,
		`{"object":{"metadata":{"name":"x","managedFields":[]} },"type":"ADDED"}`,
		`{"object":null,"type":"ERROR"}`,
		`{"type":"A","object":"\"}","x":[]}`,
		`{"type":"A","object":{"metadata":{"managedFields":tr{ue}}}}`,
		`{"0000":"00000000","object":{"0000":"0","metadata":{"managedFields":0"}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) { sameInOne(t, doc) })
}

// WithoutManagedFields returns a copy of the JSON object obj without its
// metadata.managedFields member, which is not validated. ok is false
// (and obj is to be used as it is) where it cannot be sure to find that
// member as encoding/json would: no object, escapes or non-ASCII in a key
// on the way, a repeated "metadata" or "managedFields" key, or none.
//
// It is how the autoscaler cut them before EventWithoutManagedFields did
// it in the same pass as reading the event, and the reference that
// function is checked against.
func WithoutManagedFields(obj []byte) (out []byte, ok bool) {
	meta, ok := onlyMember(obj, "metadata")
	if !ok {
		return nil, false
	}
	mf, ok := onlyMember(obj[meta.value:meta.end], "managedFields")
	if !ok {
		return nil, false
	}
	return without(obj, managedFieldsCut(obj, meta, mf)), true
}

// onlyMember returns the member key of the JSON object in data; ok is
// false where data is no such object (see memberSpans), or the key is
// missing or repeated.
func onlyMember(data []byte, key string) (m member, ok bool) {
	found := false
	if _, ok := memberSpans(data, func(c member) bool {
		if string(c.key) != key {
			return true
		}
		m, found = c, !found
		return found // a second one: give up
	}); !ok {
		return member{}, false
	}
	return m, found
}
