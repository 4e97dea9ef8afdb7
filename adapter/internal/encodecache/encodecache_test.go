package encodecache

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	goruntime "runtime"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// countingEncoder writes "ID:name" and counts its calls; it fails for
// objects named "bad".
type countingEncoder struct {
	id    string
	calls *int
}

func (e countingEncoder) Encode(obj runtime.Object, w io.Writer) error {
	*e.calls++
	st := obj.(*metav1.Status)
	if st.Message == "bad" {
		return errors.New("cannot encode")
	}
	_, err := fmt.Fprintf(w, "%s:%s", e.id, st.Message)
	return err
}

func (e countingEncoder) Identifier() runtime.Identifier { return runtime.Identifier(e.id) }

// passthrough is a NegotiatedSerializer whose encoders are the ones given.
type passthrough struct{ runtime.NegotiatedSerializer }

func (passthrough) EncoderForVersion(e runtime.Encoder, _ runtime.GroupVersioner) runtime.Encoder {
	return e
}

func TestEncoder(t *testing.T) {
	type encode struct {
		obj      string // which object
		encoder  string // "json" or "protobuf"
		want     string
		encodes  int // the wrapped encoders' calls so far
		wantFail bool
	}
	tests := []struct {
		name     string
		remember []string // before the encodes
		encodes  []encode
	}{
		{"a remembered object is encoded once per encoder", []string{"a"}, []encode{
			{obj: "a", encoder: "json", want: "json:a", encodes: 1},
			{obj: "a", encoder: "json", want: "json:a", encodes: 1},
			{obj: "a", encoder: "protobuf", want: "protobuf:a", encodes: 2},
			{obj: "a", encoder: "protobuf", want: "protobuf:a", encodes: 2},
		}},
		{"other objects are encoded every time", []string{"a"}, []encode{
			{obj: "b", encoder: "json", want: "json:b", encodes: 1},
			{obj: "b", encoder: "json", want: "json:b", encodes: 2},
		}},
		{"remembering twice changes nothing", []string{"a", "a"}, []encode{
			{obj: "a", encoder: "json", want: "json:a", encodes: 1},
			{obj: "a", encoder: "json", want: "json:a", encodes: 1},
		}},
		{"a failed encoding is not kept", []string{"bad"}, []encode{
			{obj: "bad", encoder: "json", wantFail: true, encodes: 1},
			{obj: "bad", encoder: "json", wantFail: true, encodes: 2},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := map[string]*metav1.Status{}
			for _, n := range []string{"a", "b", "c", "bad"} {
				objs[n] = &metav1.Status{Message: n}
			}
			c := New[metav1.Status]()
			for _, n := range tc.remember {
				c.Remember(objs[n])
			}
			calls := 0
			ns := c.NegotiatedSerializer(passthrough{})
			for i, e := range tc.encodes {
				enc := ns.EncoderForVersion(countingEncoder{id: e.encoder, calls: &calls}, schema.GroupVersion{})
				var buf bytes.Buffer
				err := enc.Encode(objs[e.obj], &buf)
				if (err != nil) != e.wantFail {
					t.Fatalf("encode %d: error %v, want failure %v", i, err, e.wantFail)
				}
				if !e.wantFail && buf.String() != e.want {
					t.Errorf("encode %d: %q, want %q", i, buf.String(), e.want)
				}
				if calls != e.encodes {
					t.Errorf("encode %d: the encoder ran %d times, want %d", i, calls, e.encodes)
				}
			}
		})
	}
}

// The wrapped serializer's real encoders give the same bytes through the
// cache as without it.
func TestSameBytesAsWrapped(t *testing.T) {
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	codecs := serializer.NewCodecFactory(scheme).WithoutConversion()
	c := New[metav1.Status]()
	ns := c.NegotiatedSerializer(codecs)
	obj := &metav1.Status{Status: metav1.StatusSuccess, Message: "shared", Code: 200}
	c.Remember(obj)
	for _, info := range codecs.SupportedMediaTypes() {
		want, err := runtime.Encode(codecs.EncoderForVersion(info.Serializer, metav1.SchemeGroupVersion), obj)
		if err != nil {
			continue // a media type this object has no encoding in
		}
		for range 2 {
			got, err := runtime.Encode(ns.EncoderForVersion(info.Serializer, metav1.SchemeGroupVersion), obj)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s: %q, %v; want %q", info.MediaType, got, err, want)
			}
		}
	}
}

// An entry goes when its object does.
func TestForgetsCollectedObjects(t *testing.T) {
	c := New[metav1.Status]()
	func() {
		for i := range 10 {
			c.Remember(&metav1.Status{Message: fmt.Sprint(i)})
		}
	}()
	for i := 0; c.Len() > 0 && i < 100; i++ {
		goruntime.GC()
		time.Sleep(time.Millisecond)
	}
	if n := c.Len(); n != 0 {
		t.Errorf("%d entries left after their objects were collected", n)
	}
	kept := &metav1.Status{}
	c.Remember(kept)
	goruntime.GC()
	if c.Len() != 1 {
		t.Errorf("the entry of a live object was dropped")
	}
	goruntime.KeepAlive(kept)
}
