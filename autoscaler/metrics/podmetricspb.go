package metrics

import (
	"bytes"
	"fmt"
	"maps"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/tidal-autoscaler/tidal/autoscaler/replicas"
	"github.com/tidal-autoscaler/tidal/internal/intern"
)

// This file decodes a protobuf PodMetricsList straight into what the
// controller keeps of it (usageList), with protowire, the protobuf
// module's wire-format reader. The generated decoder builds a PodMetrics
// per pod (object metadata, a ResourceList of Quantities per container)
// after copying the body out of its envelope, all of it garbage once
// converted: a fifth of the controller's allocations at 1,000
// autoscalers. The result is the generated decoder's, converted
// (TestProtoDecodeMatchesGenerated, FuzzProtoDecode); fields the
// conversion does not read are skipped.

// protobufPrefix starts every Kubernetes protobuf body.
var protobufPrefix = []byte("k8s\x00")

// Field numbers, from the messages' generated.proto files.
const (
	// runtime.Unknown and its TypeMeta.
	unknownTypeMeta  = 1
	unknownRaw       = 2
	typeMetaVersion  = 1
	typeMetaKind     = 2
	listItems        = 2 // PodMetricsList.items
	podMetadata      = 1 // PodMetrics
	podTimestamp     = 2
	podWindow        = 3
	podContainers    = 4
	metaName         = 1  // ObjectMeta
	metaLabels       = 11 //
	containerName    = 1  // ContainerMetrics
	containerUsage   = 2
	mapKey           = 1 // a map entry
	mapValue         = 2
	timeSeconds      = 1 // metav1.Timestamp
	durationValue    = 1 // metav1.Duration
	quantityAsString = 1 // resource.Quantity
)

// usageList is a PodMetrics list as the controller keeps it: the items
// converted for the arithmetic, and labels[i] the labels of items[i].
type usageList struct {
	items  []replicas.PodUsage
	labels []map[string]string
}

// pbField is one field of a protobuf message: a length-delimited field's
// bytes, or a varint field's value.
type pbField struct {
	num    protowire.Number
	typ    protowire.Type
	bytes  []byte
	varint uint64
}

// eachField calls fn with each field of message b, in order.
func eachField(b []byte, fn func(f pbField) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		f := pbField{num: num, typ: typ}
		switch typ {
		case protowire.BytesType:
			f.bytes, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			f.varint, n = protowire.ConsumeVarint(b)
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

// bytesOf and varintOf return a known field's value, checking its wire
// type as the generated decoders do.
func (f pbField) bytesOf(name string) ([]byte, error) {
	if f.typ != protowire.BytesType {
		return nil, fmt.Errorf("wrong wire type %d for %s", f.typ, name)
	}
	return f.bytes, nil
}

func (f pbField) varintOf(name string) (uint64, error) {
	if f.typ != protowire.VarintType {
		return 0, fmt.Errorf("wrong wire type %d for %s", f.typ, name)
	}
	return f.varint, nil
}

// interned shares, within one decode, the strings a list repeats (label
// keys and values, container and resource names) and its label sets: the
// pods of one Deployment carry the same labels, and a map per pod was a
// third of the decode's allocations. Everything decoded is read-only.
type interned struct {
	strs   intern.Strings
	labels map[string]map[string]string
	// scratch collects a pod's label entries, the key of its set.
	scratch []byte
}

func newInterned() *interned {
	return &interned{strs: intern.Strings{}, labels: map[string]map[string]string{}}
}

// labelSet returns the labels whose entries (length-prefixed, in order)
// in.scratch holds, shared with any pod of the list that had the same.
func (in *interned) labelSet() (map[string]string, error) {
	if m, ok := in.labels[string(in.scratch)]; ok {
		return m, nil
	}
	m := map[string]string{}
	for b := in.scratch; len(b) > 0; {
		entry, n := protowire.ConsumeBytes(b)
		b = b[n:]
		k, v, err := mapEntry(entry)
		if err != nil {
			return nil, err
		}
		m[in.strs.Of(k)] = in.strs.Of(v)
	}
	in.labels[string(in.scratch)] = m
	return m, nil
}

// decodePodMetricsProto decodes a protobuf PodMetricsList body, prefix and
// envelope included.
func decodePodMetricsProto(body []byte) (usageList, error) {
	if !bytes.HasPrefix(body, protobufPrefix) || len(body) == len(protobufPrefix) {
		return usageList{}, fmt.Errorf("not a protobuf body")
	}
	raw, err := envelopeRaw(body[len(protobufPrefix):])
	if err != nil {
		return usageList{}, err
	}
	n := 0
	if err := eachField(raw, func(f pbField) error {
		if f.num == listItems {
			n++
		}
		return nil
	}); err != nil {
		return usageList{}, fmt.Errorf("PodMetricsList: %w", err)
	}
	out := usageList{items: make([]replicas.PodUsage, 0, n), labels: make([]map[string]string, 0, n)}
	in := newInterned()
	if err := eachField(raw, func(f pbField) error {
		if f.num != listItems {
			return nil
		}
		b, err := f.bytesOf("PodMetricsList.items")
		if err != nil {
			return err
		}
		item, labels, err := decodePodUsage(b, in)
		if err != nil {
			return fmt.Errorf("PodMetricsList.items[%d]: %w", len(out.items), err)
		}
		out.items = append(out.items, item)
		out.labels = append(out.labels, labels)
		return nil
	}); err != nil {
		return usageList{}, err
	}
	return out, nil
}

// envelopeRaw returns the object inside a runtime.Unknown envelope, which
// must be a metrics.k8s.io/v1beta1 PodMetricsList (or not say).
func envelopeRaw(b []byte) (raw []byte, err error) {
	err = eachField(b, func(f pbField) error {
		switch f.num {
		case unknownTypeMeta:
			meta, err := f.bytesOf("Unknown.typeMeta")
			if err != nil {
				return err
			}
			return checkTypeMeta(meta)
		case unknownRaw:
			raw, err = f.bytesOf("Unknown.raw")
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("envelope: %w", err)
	}
	return raw, nil
}

func checkTypeMeta(b []byte) error {
	return eachField(b, func(f pbField) error {
		var want string
		switch f.num {
		case typeMetaVersion:
			want = "metrics.k8s.io/v1beta1"
		case typeMetaKind:
			want = "PodMetricsList"
		default:
			return nil
		}
		got, err := f.bytesOf("TypeMeta")
		if err != nil {
			return err
		}
		if len(got) > 0 && string(got) != want {
			return fmt.Errorf("the body holds a %q, want %q", got, want)
		}
		return nil
	})
}

func decodePodUsage(b []byte, in *interned) (pu replicas.PodUsage, labels map[string]string, err error) {
	err = eachField(b, func(f pbField) error {
		var v []byte
		switch f.num {
		case podMetadata:
			if v, err = f.bytesOf("metadata"); err == nil {
				if labels, err = decodeObjectMeta(v, &pu.Name, labels, in); err != nil {
					err = fmt.Errorf("metadata: %w", err)
				}
			}
		case podTimestamp:
			if v, err = f.bytesOf("timestamp"); err == nil {
				if pu.Timestamp, err = decodeTime(v); err != nil {
					err = fmt.Errorf("timestamp: %w", err)
				}
			}
		case podWindow:
			if v, err = f.bytesOf("window"); err == nil {
				if pu.Window, err = decodeDuration(v); err != nil {
					err = fmt.Errorf("window: %w", err)
				}
			}
		case podContainers:
			if v, err = f.bytesOf("containers"); err == nil {
				var c replicas.ContainerUsage
				if c, err = decodeContainer(v, in); err != nil {
					return fmt.Errorf("containers[%d]: %w", len(pu.Containers), err)
				}
				pu.Containers = append(pu.Containers, c)
			}
		}
		return err
	})
	return pu, labels, err
}

// decodeObjectMeta reads the name and labels of an ObjectMeta. A second
// metadata field adds to the labels of the first, as the generated
// decoder merges a repeated message (in a map of its own: sets are
// shared).
func decodeObjectMeta(b []byte, name *string, labels map[string]string, in *interned) (map[string]string, error) {
	in.scratch = in.scratch[:0]
	if err := eachField(b, func(f pbField) error {
		switch f.num {
		case metaName:
			v, err := f.bytesOf("name")
			*name = string(v)
			return err
		case metaLabels:
			v, err := f.bytesOf("labels")
			in.scratch = protowire.AppendBytes(in.scratch, v)
			return err
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if len(in.scratch) == 0 {
		return labels, nil
	}
	set, err := in.labelSet()
	if err != nil {
		return nil, fmt.Errorf("labels: %w", err)
	}
	if labels == nil {
		return set, nil
	}
	merged := maps.Clone(labels)
	maps.Copy(merged, set)
	return merged, nil
}

// mapEntry reads a map<string, X> entry: its key, and its value's bytes
// (a string, or a message).
func mapEntry(b []byte) (key, value []byte, err error) {
	err = eachField(b, func(f pbField) error {
		var err error
		switch f.num {
		case mapKey:
			key, err = f.bytesOf("a map key")
		case mapValue:
			value, err = f.bytesOf("a map value")
		}
		return err
	})
	return key, value, err
}

// decodeTime is metav1.Time's decoder: whole seconds, local time; an
// empty message is the zero time.
func decodeTime(b []byte) (time.Time, error) {
	if len(b) == 0 {
		return time.Time{}, nil
	}
	var seconds uint64
	err := eachField(b, func(f pbField) (err error) {
		if f.num == timeSeconds {
			seconds, err = f.varintOf("seconds")
		}
		return err
	})
	return time.Unix(int64(seconds), 0).Local(), err
}

func decodeDuration(b []byte) (time.Duration, error) {
	var d uint64
	err := eachField(b, func(f pbField) (err error) {
		if f.num == durationValue {
			d, err = f.varintOf("duration")
		}
		return err
	})
	return time.Duration(int64(d)), err
}

func decodeContainer(b []byte, in *interned) (c replicas.ContainerUsage, err error) {
	err = eachField(b, func(f pbField) error {
		switch f.num {
		case containerName:
			v, err := f.bytesOf("name")
			c.Name = in.strs.Of(v)
			return err
		case containerUsage:
			v, err := f.bytesOf("usage")
			if err != nil {
				return err
			}
			k, q, err := mapEntry(v)
			if err != nil {
				return fmt.Errorf("usage: %w", err)
			}
			milli, err := quantityMilli(q)
			if err != nil {
				return fmt.Errorf("usage %q: %w", k, err)
			}
			c.Set(corev1.ResourceName(in.strs.Of(k)), milli)
		}
		return nil
	})
	return c, err
}

// quantityMilli reads a resource.Quantity message (its string form) in
// milli-units; an empty message is zero.
func quantityMilli(b []byte) (int64, error) {
	var q resource.Quantity
	err := eachField(b, func(f pbField) error {
		if f.num != quantityAsString {
			return nil
		}
		v, err := f.bytesOf("a quantity")
		if err == nil {
			q, err = resource.ParseQuantity(string(v))
		}
		return err
	})
	return q.MilliValue(), err
}
