package source

import (
	"bytes"
	"fmt"
	"sync"

	jsonv2 "github.com/go-json-experiment/json"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/autoscaler/internal/jsonmeta"
)

// Deferred reports whether the HorizontalAutoscaler namespace/name, as the
// watch sends it, may be kept with only its metadata decoded: one this
// replica does not reconcile now (a sharded replica: another's share).
// Whatever it answers, Get returns the whole object; it only moves the
// decode to the first Get.
type Deferred func(namespace, name string) bool

// deferredHA is a HorizontalAutoscaler as the informer keeps it when its
// decode was deferred: the metadata decoded (the informer's key, resource
// version and transform need it), the rest kept as the watch sent it and
// decoded by the first Get, once the object's share moved to this replica.
// Every replica's status writes come back through every replica's watch:
// at 10,000 autoscalers and three replicas, decoding them was 15% of a
// replica's CPU, two thirds of it for objects the replica never read.
type deferredHA struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	// raw is the whole object as the watch sent it (managed fields cut).
	raw []byte
	// full decodes raw once: the object with this one's metadata.
	full func() (*v1alpha1.HorizontalAutoscaler, error)
	// decode is the decoder raw is decoded with.
	decode func([]byte) (*v1alpha1.HorizontalAutoscaler, error)
}

var _ metav1.Object = &deferredHA{}

// newDeferredHA returns data, whose metadata is meta, deferred; ok is
// false where meta does not decode (the caller decodes data whole, and
// reports the error as before).
func newDeferredHA(data, meta []byte, decode func([]byte) (*v1alpha1.HorizontalAutoscaler, error)) (*deferredHA, bool) {
	d := &deferredHA{TypeMeta: metav1.TypeMeta{APIVersion: haAPIVersion, Kind: haKind.Kind}}
	if jsonv2.Unmarshal(meta, &d.ObjectMeta) != nil {
		return nil, false
	}
	d.raw, d.decode = bytes.Clone(data), decode
	d.full = sync.OnceValues(d.decodeRaw)
	return d, true
}

// decodeRaw decodes raw and gives the object this one's type and object
// metadata: what the decoder's caller and the informer's transform made
// of them since (client-go clears the kind, the transform drops managed
// fields and the last applied configuration).
func (d *deferredHA) decodeRaw() (*v1alpha1.HorizontalAutoscaler, error) {
	ha, err := d.decode(d.raw)
	if err != nil {
		return nil, fmt.Errorf("%s %s/%s: decoding the object the watch sent: %w", v1alpha1.Kind, d.Namespace, d.Name, err)
	}
	ha.TypeMeta = d.TypeMeta
	d.ObjectMeta.DeepCopyInto(&ha.ObjectMeta)
	return ha, nil
}

// DeepCopyObject implements runtime.Object: the copy decodes raw again
// when read.
func (d *deferredHA) DeepCopyObject() runtime.Object {
	c := &deferredHA{TypeMeta: d.TypeMeta, raw: d.raw, decode: d.decode}
	d.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	c.full = sync.OnceValues(c.decodeRaw)
	return c
}

// deferHA returns data, a HorizontalAutoscaler whose head is h, deferred
// where deferred says to leave it undecoded; ok is false otherwise.
func (d haDecoder) deferHA(h jsonmeta.Head, data []byte) (obj *deferredHA, ok bool) {
	if d.deferred == nil || !d.deferred(h.Namespace, h.Name) {
		return nil, false
	}
	return newDeferredHA(data, h.Metadata, d.decodeHA)
}

// haAPIVersion is a HorizontalAutoscaler's apiVersion.
var haAPIVersion = haKind.GroupVersion().String()
