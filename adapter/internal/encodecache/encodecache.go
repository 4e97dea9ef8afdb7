// Package encodecache keeps the encoded bytes of response objects that
// many requests share, so that an answer served a thousand times a second
// is encoded once per media type and version.
//
// The storage marks an object with Remember when it hands the same,
// never-modified object to every request with the same inputs (see
// adapter/internal/memo). NegotiatedSerializer wraps the API group's
// serializer: the encoders it returns write a remembered object's bytes
// from the cache, and encode every other object as before. Encoding was
// 20% of the adapter's CPU per PodMetrics request.
//
// An entry lives exactly as long as its object: it is keyed by a weak
// pointer and dropped when the object is collected. So every encoding of
// a shared object goes through its entry, one at a time; that matters
// because apimachinery's versioning encoder writes the object's TypeMeta
// (and puts it back) while it encodes.
package encodecache

import (
	"bytes"
	"io"
	"runtime"
	"sync"
	"weak"

	kruntime "k8s.io/apimachinery/pkg/runtime"
)

// Cache keeps the encodings of remembered objects of type *T.
type Cache[T any] struct {
	mu      sync.Mutex
	entries map[weak.Pointer[T]]*entry
}

type entry struct {
	mu        sync.Mutex
	encodings map[kruntime.Identifier][]byte
}

// New returns an empty Cache.
func New[T any]() *Cache[T] {
	return &Cache[T]{entries: map[weak.Pointer[T]]*entry{}}
}

// Remember marks obj, which no one modifies from now on, as shared: its
// encodings are kept while it is alive.
func (c *Cache[T]) Remember(obj *T) {
	k := weak.Make(obj)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[k]; ok {
		return
	}
	c.entries[k] = &entry{encodings: map[kruntime.Identifier][]byte{}}
	runtime.AddCleanup(obj, c.forget, k)
}

func (c *Cache[T]) forget(k weak.Pointer[T]) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, k)
}

// Len is the number of objects remembered and alive.
func (c *Cache[T]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

func (c *Cache[T]) lookup(obj kruntime.Object) *entry {
	p, ok := any(obj).(*T)
	if !ok {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[weak.Make(p)]
}

// NegotiatedSerializer wraps ns so that its encoders use c.
func (c *Cache[T]) NegotiatedSerializer(ns kruntime.NegotiatedSerializer) kruntime.NegotiatedSerializer {
	return negotiated[T]{NegotiatedSerializer: ns, c: c}
}

type negotiated[T any] struct {
	kruntime.NegotiatedSerializer
	c *Cache[T]
}

func (n negotiated[T]) EncoderForVersion(e kruntime.Encoder, gv kruntime.GroupVersioner) kruntime.Encoder {
	return encoder[T]{Encoder: n.NegotiatedSerializer.EncoderForVersion(e, gv), c: n.c}
}

// encoder writes remembered objects from the cache. Its Identifier is
// the wrapped encoder's: the bytes are the same.
type encoder[T any] struct {
	kruntime.Encoder
	c *Cache[T]
}

func (e encoder[T]) Encode(obj kruntime.Object, w io.Writer) error {
	ent := e.c.lookup(obj)
	if ent == nil {
		return e.Encoder.Encode(obj, w)
	}
	id := e.Encoder.Identifier()
	ent.mu.Lock()
	b, ok := ent.encodings[id]
	if !ok {
		var buf bytes.Buffer
		if err := e.Encoder.Encode(obj, &buf); err != nil {
			ent.mu.Unlock()
			return err
		}
		b = buf.Bytes()
		ent.encodings[id] = b
	}
	ent.mu.Unlock()
	_, err := w.Write(b)
	return err
}
