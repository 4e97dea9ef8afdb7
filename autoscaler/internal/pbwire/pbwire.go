// Package pbwire walks protobuf messages field by field with the Go
// project's wire-format reader (google.golang.org/protobuf's protowire),
// for decoders that read a few fields of an API object's encoding without
// the generated code's copies.
package pbwire

import (
	"bytes"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field is one field of a message: a length-delimited field's bytes (a
// slice of the message, not a copy), or a varint field's value.
type Field struct {
	Num    protowire.Number
	Type   protowire.Type
	Bytes  []byte
	Varint uint64
}

// Each calls fn with each field of message b, in order; it stops at
// fn's first error, or at the first malformed field.
func Each(b []byte, fn func(f Field) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		f := Field{Num: num, Type: typ}
		switch typ {
		case protowire.BytesType:
			f.Bytes, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			f.Varint, n = protowire.ConsumeVarint(b)
		case protowire.EndGroupType:
			return fmt.Errorf("field %d: end group outside a group", num)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

// BytesOf and VarintOf return a known field's value, checking its wire
// type as the generated decoders do; name is the field's, for the error.
func (f Field) BytesOf(name string) ([]byte, error) {
	if f.Type != protowire.BytesType {
		return nil, fmt.Errorf("wrong wire type %d for %s", f.Type, name)
	}
	return f.Bytes, nil
}

func (f Field) VarintOf(name string) (uint64, error) {
	if f.Type != protowire.VarintType {
		return 0, fmt.Errorf("wrong wire type %d for %s", f.Type, name)
	}
	return f.Varint, nil
}

// Prefix starts every Kubernetes protobuf body (runtime/serializer/protobuf).
var Prefix = []byte("k8s\x00")

// Envelope is the runtime.Unknown that wraps an object in a Kubernetes
// protobuf body, its fields slices of the body.
type Envelope struct {
	APIVersion, Kind []byte // its TypeMeta
	Raw              []byte // the object's message
}

// Field numbers of runtime.Unknown and runtime.TypeMeta
// (k8s.io/apimachinery/pkg/runtime/generated.proto).
const (
	unknownTypeMeta        = 1
	unknownRaw             = 2
	unknownContentEncoding = 3
	unknownContentType     = 4
	typeMetaAPIVersion     = 1
	typeMetaKind           = 2
)

// ReadEnvelope reads a Kubernetes protobuf body: the prefix, then the
// envelope. A field repeated takes its last value, as in the generated
// decoder.
func ReadEnvelope(body []byte) (Envelope, error) {
	if !bytes.HasPrefix(body, Prefix) || len(body) == len(Prefix) {
		return Envelope{}, errors.New("not a protobuf body")
	}
	var e Envelope
	err := Each(body[len(Prefix):], func(f Field) error {
		var err error
		switch f.Num {
		case unknownTypeMeta:
			var meta []byte
			if meta, err = f.BytesOf("Unknown.typeMeta"); err != nil {
				return err
			}
			return Each(meta, func(f Field) error {
				var err error
				switch f.Num {
				case typeMetaAPIVersion:
					e.APIVersion, err = f.BytesOf("TypeMeta.apiVersion")
				case typeMetaKind:
					e.Kind, err = f.BytesOf("TypeMeta.kind")
				}
				return err
			})
		case unknownRaw:
			e.Raw, err = f.BytesOf("Unknown.raw")
		case unknownContentEncoding, unknownContentType:
			// Unread, as apimachinery's serializer leaves them when it
			// decodes the object, but checked as its decoder checks them.
			_, err = f.BytesOf("Unknown.contentEncoding or contentType")
		}
		return err
	})
	if err != nil {
		return Envelope{}, fmt.Errorf("envelope: %w", err)
	}
	return e, nil
}

// Field numbers of metav1.WatchEvent and runtime.RawExtension
// (k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto and
// k8s.io/apimachinery/pkg/runtime/generated.proto).
const (
	watchEventType   = 1
	watchEventObject = 2
	rawExtensionRaw  = 1
)

// ReadWatchEvent reads one frame of a protobuf watch stream, a
// metav1.WatchEvent without prefix or envelope: its type, and its object's
// encoding (a whole protobuf body, prefix and envelope), both slices of
// frame. A field repeated takes its last value and an absent object is
// nil, as in the generated decoder.
func ReadWatchEvent(frame []byte) (eventType, object []byte, err error) {
	err = Each(frame, func(f Field) error {
		var err error
		switch f.Num {
		case watchEventType:
			eventType, err = f.BytesOf("WatchEvent.type")
		case watchEventObject:
			var ext []byte
			if ext, err = f.BytesOf("WatchEvent.object"); err != nil {
				return err
			}
			return Each(ext, func(f Field) error {
				var err error
				if f.Num == rawExtensionRaw {
					object, err = f.BytesOf("RawExtension.raw")
				}
				return err
			})
		}
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("watch event: %w", err)
	}
	return eventType, object, nil
}
