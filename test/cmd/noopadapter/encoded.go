package main

import (
	"bytes"
	"io"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
)

// encodedOnce makes the no-op's fixed lists cost what Tidal's cached
// answers cost: each is encoded once per encoder (media type and group
// version: the encoder's Identifier) and then written as bytes. It is the
// idea of Tidal's adapter/internal/encodecache, which Go's
// internal-package rule keeps from this command, without its weak
// pointers: the fixed lists live as long as the process.
//
// Wrap an API group's NegotiatedSerializer with it (NegotiatedSerializer);
// the handlers negotiate the content type and version with it as before,
// and its encoders encode every other object (a Status, discovery, a
// single MetricValue) as the wrapped ones do.
type encodedOnce struct {
	// fixed are the shared, never modified objects whose bytes are kept,
	// compared by identity.
	fixed []runtime.Object
	// mu is held while a first encoding is made: apimachinery's versioning
	// encoder may set an object's TypeMeta (and put it back) as it
	// encodes, so the shared objects are encoded one at a time.
	mu sync.Mutex
	// encodings maps an encodingKey to its []byte; read without a lock.
	encodings sync.Map
}

type encodingKey struct {
	obj runtime.Object
	id  runtime.Identifier
}

func newEncodedOnce(fixed ...runtime.Object) *encodedOnce {
	return &encodedOnce{fixed: fixed}
}

// NegotiatedSerializer wraps ns so that its encoders write the fixed
// objects from e.
func (e *encodedOnce) NegotiatedSerializer(ns runtime.NegotiatedSerializer) runtime.NegotiatedSerializer {
	return onceNegotiated{NegotiatedSerializer: ns, e: e}
}

type onceNegotiated struct {
	runtime.NegotiatedSerializer
	e *encodedOnce
}

func (n onceNegotiated) EncoderForVersion(enc runtime.Encoder, gv runtime.GroupVersioner) runtime.Encoder {
	return onceEncoder{Encoder: n.NegotiatedSerializer.EncoderForVersion(enc, gv), e: n.e}
}

// onceEncoder's Identifier is the wrapped encoder's: the bytes are the
// same.
type onceEncoder struct {
	runtime.Encoder
	e *encodedOnce
}

func (o onceEncoder) Encode(obj runtime.Object, w io.Writer) error {
	if !slices.Contains(o.e.fixed, obj) {
		return o.Encoder.Encode(obj, w)
	}
	b, err := o.e.bytes(obj, o.Encoder)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// bytes returns obj's encoding by enc, encoding it the first time.
func (e *encodedOnce) bytes(obj runtime.Object, enc runtime.Encoder) ([]byte, error) {
	k := encodingKey{obj: obj, id: enc.Identifier()}
	if b, ok := e.encodings.Load(k); ok {
		return b.([]byte), nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if b, ok := e.encodings.Load(k); ok {
		return b.([]byte), nil
	}
	var buf bytes.Buffer
	if err := enc.Encode(obj, &buf); err != nil {
		return nil, err
	}
	e.encodings.Store(k, buf.Bytes())
	return buf.Bytes(), nil
}
