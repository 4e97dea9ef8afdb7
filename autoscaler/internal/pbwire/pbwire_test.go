package pbwire

import (
	"bytes"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestEach: fields come out in order with their values; malformed input
// is an error, not a panic.
func TestEach(t *testing.T) {
	msg := protowire.AppendTag(nil, 1, protowire.BytesType)
	msg = protowire.AppendString(msg, "web")
	msg = protowire.AppendTag(msg, 2, protowire.VarintType)
	msg = protowire.AppendVarint(msg, 300)
	msg = protowire.AppendTag(msg, 3, protowire.Fixed64Type)
	msg = protowire.AppendFixed64(msg, 7)
	tests := []struct {
		name    string
		in      []byte
		want    []Field
		wantErr string
	}{
		{name: "empty", in: nil},
		{name: "bytes, varint and a skipped fixed64", in: msg, want: []Field{
			{Num: 1, Type: protowire.BytesType, Bytes: []byte("web")},
			{Num: 2, Type: protowire.VarintType, Varint: 300},
			{Num: 3, Type: protowire.Fixed64Type},
		}},
		{name: "truncated bytes", in: msg[:3], wantErr: "field 1"},
		{name: "a bad tag", in: []byte{0x80}, wantErr: "unexpected EOF"},
		{name: "end group outside a group", in: protowire.AppendTag(nil, 4, protowire.EndGroupType), wantErr: "end group"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []Field
			err := Each(tt.in, func(f Field) error { got = append(got, f); return nil })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("fields %+v, want %+v", got, tt.want)
			}
			for i := range got {
				g, w := got[i], tt.want[i]
				if g.Num != w.Num || g.Type != w.Type || !bytes.Equal(g.Bytes, w.Bytes) || g.Varint != w.Varint {
					t.Errorf("field %d: %+v, want %+v", i, g, w)
				}
			}
		})
	}
	if _, err := (Field{Type: protowire.VarintType}).BytesOf("x"); err == nil {
		t.Error("BytesOf a varint field: no error")
	}
	if _, err := (Field{Type: protowire.BytesType}).VarintOf("x"); err == nil {
		t.Error("VarintOf a bytes field: no error")
	}
}

// TestReadEnvelope: the envelope's fields are what the generated
// runtime.Unknown decoder reads, as slices of the body.
func TestReadEnvelope(t *testing.T) {
	body := func(u runtime.Unknown) []byte {
		b, err := u.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return append(append([]byte(nil), Prefix...), b...)
	}
	tests := []struct {
		name    string
		in      []byte
		want    runtime.Unknown
		wantErr string
	}{
		{name: "an object", in: body(runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"}, Raw: []byte{0x0a, 0x00}}),
			want: runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"}, Raw: []byte{0x0a, 0x00}}},
		{name: "content fields skipped", in: body(runtime.Unknown{Raw: []byte("x"), ContentEncoding: "gzip", ContentType: "application/json"}),
			want: runtime.Unknown{Raw: []byte("x")}},
		{name: "a content field of the wrong wire type", in: append(body(runtime.Unknown{Raw: []byte("x")}), protowire.AppendVarint(protowire.AppendTag(nil, 4, protowire.VarintType), 1)...),
			wantErr: "wrong wire type"},
		{name: "no prefix", in: []byte{0x0a, 0x00}, wantErr: "not a protobuf body"},
		{name: "the prefix alone", in: Prefix, wantErr: "not a protobuf body"},
		{name: "truncated", in: body(runtime.Unknown{Raw: []byte("object")})[:8], wantErr: "envelope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := ReadEnvelope(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			w := tt.want
			if string(e.APIVersion) != w.APIVersion || string(e.Kind) != w.Kind || !bytes.Equal(e.Raw, w.Raw) {
				t.Errorf("envelope %q, want %+v", e, w)
			}
		})
	}
}

// TestReadWatchEvent: the event's type and object are what the generated
// metav1.WatchEvent decoder reads, as slices of the frame.
func TestReadWatchEvent(t *testing.T) {
	frame := func(e metav1.WatchEvent) []byte {
		b, err := e.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	object := append(append([]byte(nil), Prefix...), 0x0a, 0x00)
	modified := frame(metav1.WatchEvent{Type: "MODIFIED", Object: runtime.RawExtension{Raw: object}})
	tests := []struct {
		name    string
		in      []byte
		wantErr string
	}{
		{name: "an event", in: modified},
		{name: "no object", in: frame(metav1.WatchEvent{Type: "BOOKMARK"})},
		{name: "an empty object", in: frame(metav1.WatchEvent{Type: "ADDED", Object: runtime.RawExtension{Raw: []byte{}}})},
		{name: "no type", in: frame(metav1.WatchEvent{Object: runtime.RawExtension{Raw: object}})},
		{name: "fields repeated: the last ones", in: append(frame(metav1.WatchEvent{Type: "ADDED", Object: runtime.RawExtension{Raw: []byte("first")}}), modified...)},
		{name: "an unknown field skipped", in: append(protowire.AppendVarint(protowire.AppendTag(nil, 9, protowire.VarintType), 7), modified...)},
		{name: "the type of the wrong wire type", in: protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 1), wantErr: "wrong wire type"},
		{name: "the raw object of the wrong wire type", in: protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType),
			protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 1)), wantErr: "wrong wire type"},
		{name: "truncated", in: modified[:len(modified)-2], wantErr: "watch event"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			typ, obj, err := ReadWatchEvent(tt.in)
			var want metav1.WatchEvent
			wantErr := want.Unmarshal(tt.in)
			if tt.wantErr != "" {
				if err == nil || wantErr == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v (generated decoder's %v), want one with %q", err, wantErr, tt.wantErr)
				}
				return
			}
			if err != nil || wantErr != nil {
				t.Fatalf("errors %v, %v", err, wantErr)
			}
			if string(typ) != want.Type || !bytes.Equal(obj, want.Object.Raw) || (obj == nil) != (want.Object.Raw == nil) {
				t.Errorf("type %q object %q, want %q %q", typ, obj, want.Type, want.Object.Raw)
			}
		})
	}
}
