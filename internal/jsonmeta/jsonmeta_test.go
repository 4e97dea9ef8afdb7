package jsonmeta

import (
	encjson "encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
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
