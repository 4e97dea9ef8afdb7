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

// nextField reads the field at the start of b; rest is what follows it.
func nextField(b []byte) (f pbField, rest []byte, err error) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 {
		return f, nil, protowire.ParseError(n)
	}
	b = b[n:]
	f = pbField{num: num, typ: typ}
	switch typ {
	case protowire.BytesType:
		f.bytes, n = protowire.ConsumeBytes(b)
	case protowire.VarintType:
		f.varint, n = protowire.ConsumeVarint(b)
	case protowire.EndGroupType:
		return f, nil, fmt.Errorf("field %d: end group outside a group", num)
	default:
		n = protowire.ConsumeFieldValue(num, typ, b)
	}
	if n < 0 {
		return f, nil, fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
	}
	return f, b[n:], nil
}

// want checks a known field's wire type, as the generated decoders do.
func (f pbField) want(typ protowire.Type, name string) error {
	if f.typ != typ {
		return fmt.Errorf("wrong wire type %d for %s", f.typ, name)
	}
	return nil
}

// interned shares, within one decode, the strings a list repeats (label
// keys and values, container and resource names) and its label sets: the
// pods of one Deployment carry the same labels, and a map per pod was a
// third of the decode's allocations. Everything decoded is read-only.
type interned struct {
	strs   map[string]string
	labels map[string]map[string]string
	// scratch collects a pod's label entries, the key of its set.
	scratch []byte
}

func newInterned() *interned {
	return &interned{strs: map[string]string{}, labels: map[string]map[string]string{}}
}

func (in *interned) str(b []byte) string {
	if s, ok := in.strs[string(b)]; ok {
		return s
	}
	s := string(b)
	in.strs[s] = s
	return s
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
		m[in.str(k)] = in.str(v)
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
	for b := raw; len(b) > 0; {
		var f pbField
		if f, b, err = nextField(b); err != nil {
			return usageList{}, fmt.Errorf("PodMetricsList: %w", err)
		}
		if f.num == listItems {
			n++
		}
	}
	out := usageList{items: make([]replicas.PodUsage, 0, n), labels: make([]map[string]string, 0, n)}
	in := newInterned()
	for b := raw; len(b) > 0; {
		f, rest, _ := nextField(b) // read above without error
		b = rest
		if f.num != listItems {
			continue
		}
		if err := f.want(protowire.BytesType, "PodMetricsList.items"); err != nil {
			return usageList{}, err
		}
		item, labels, err := decodePodUsage(f.bytes, in)
		if err != nil {
			return usageList{}, fmt.Errorf("PodMetricsList.items[%d]: %w", len(out.items), err)
		}
		out.items = append(out.items, item)
		out.labels = append(out.labels, labels)
	}
	return out, nil
}

// envelopeRaw returns the object inside a runtime.Unknown envelope, which
// must be a metrics.k8s.io/v1beta1 PodMetricsList (or not say).
func envelopeRaw(b []byte) ([]byte, error) {
	var raw []byte
	for len(b) > 0 {
		f, rest, err := nextField(b)
		if err != nil {
			return nil, fmt.Errorf("envelope: %w", err)
		}
		b = rest
		switch f.num {
		case unknownTypeMeta:
			if err := f.want(protowire.BytesType, "Unknown.typeMeta"); err != nil {
				return nil, err
			}
			if err := checkTypeMeta(f.bytes); err != nil {
				return nil, err
			}
		case unknownRaw:
			if err := f.want(protowire.BytesType, "Unknown.raw"); err != nil {
				return nil, err
			}
			raw = f.bytes
		}
	}
	return raw, nil
}

func checkTypeMeta(b []byte) error {
	for len(b) > 0 {
		f, rest, err := nextField(b)
		if err != nil {
			return fmt.Errorf("envelope's type: %w", err)
		}
		b = rest
		var want string
		switch f.num {
		case typeMetaVersion:
			want = "metrics.k8s.io/v1beta1"
		case typeMetaKind:
			want = "PodMetricsList"
		default:
			continue
		}
		if err := f.want(protowire.BytesType, "TypeMeta"); err != nil {
			return err
		}
		if got := string(f.bytes); got != "" && got != want {
			return fmt.Errorf("the body holds a %q, want %q", got, want)
		}
	}
	return nil
}

func decodePodUsage(b []byte, in *interned) (replicas.PodUsage, map[string]string, error) {
	var (
		pu     replicas.PodUsage
		labels map[string]string
	)
	for len(b) > 0 {
		f, rest, err := nextField(b)
		if err != nil {
			return pu, nil, err
		}
		b = rest
		switch f.num {
		case podMetadata:
			if err := f.want(protowire.BytesType, "metadata"); err != nil {
				return pu, nil, err
			}
			if labels, err = decodeObjectMeta(f.bytes, &pu.Name, labels, in); err != nil {
				return pu, nil, fmt.Errorf("metadata: %w", err)
			}
		case podTimestamp:
			if err := f.want(protowire.BytesType, "timestamp"); err != nil {
				return pu, nil, err
			}
			if pu.Timestamp, err = decodeTime(f.bytes); err != nil {
				return pu, nil, fmt.Errorf("timestamp: %w", err)
			}
		case podWindow:
			if err := f.want(protowire.BytesType, "window"); err != nil {
				return pu, nil, err
			}
			if pu.Window, err = decodeDuration(f.bytes); err != nil {
				return pu, nil, fmt.Errorf("window: %w", err)
			}
		case podContainers:
			if err := f.want(protowire.BytesType, "containers"); err != nil {
				return pu, nil, err
			}
			c, err := decodeContainer(f.bytes, in)
			if err != nil {
				return pu, nil, fmt.Errorf("containers[%d]: %w", len(pu.Containers), err)
			}
			pu.Containers = append(pu.Containers, c)
		}
	}
	return pu, labels, nil
}

// decodeObjectMeta reads the name and labels of an ObjectMeta. A second
// metadata field adds to the labels of the first, as the generated
// decoder merges a repeated message (in a map of its own: sets are
// shared).
func decodeObjectMeta(b []byte, name *string, labels map[string]string, in *interned) (map[string]string, error) {
	in.scratch = in.scratch[:0]
	for len(b) > 0 {
		f, rest, err := nextField(b)
		if err != nil {
			return nil, err
		}
		b = rest
		switch f.num {
		case metaName:
			if err := f.want(protowire.BytesType, "name"); err != nil {
				return nil, err
			}
			*name = string(f.bytes)
		case metaLabels:
			if err := f.want(protowire.BytesType, "labels"); err != nil {
				return nil, err
			}
			in.scratch = protowire.AppendBytes(in.scratch, f.bytes)
		}
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
	for len(b) > 0 {
		f, rest, err := nextField(b)
		if err != nil {
			return nil, nil, err
		}
		b = rest
		switch f.num {
		case mapKey:
			if err := f.want(protowire.BytesType, "a map key"); err != nil {
				return nil, nil, err
			}
			key = f.bytes
		case mapValue:
			if err := f.want(protowire.BytesType, "a map value"); err != nil {
				return nil, nil, err
			}
			value = f.bytes
		}
	}
	return key, value, nil
}

// decodeTime is metav1.Time's decoder: whole seconds, local time; an
// empty message is the zero time.
func decodeTime(b []byte) (time.Time, error) {
	if len(b) == 0 {
		return time.Time{}, nil
	}
	var seconds int64
	for len(b) > 0 {
		f, rest, err := nextField(b)
		if err != nil {
			return time.Time{}, err
		}
		b = rest
		if f.num == timeSeconds {
			if err := f.want(protowire.VarintType, "seconds"); err != nil {
				return time.Time{}, err
			}
			seconds = int64(f.varint)
		}
	}
	return time.Unix(seconds, 0).Local(), nil
}

func decodeDuration(b []byte) (time.Duration, error) {
	var d time.Duration
	for len(b) > 0 {
		f, rest, err := nextField(b)
		if err != nil {
			return 0, err
		}
		b = rest
		if f.num == durationValue {
			if err := f.want(protowire.VarintType, "duration"); err != nil {
				return 0, err
			}
			d = time.Duration(int64(f.varint))
		}
	}
	return d, nil
}

func decodeContainer(b []byte, in *interned) (replicas.ContainerUsage, error) {
	var c replicas.ContainerUsage
	for len(b) > 0 {
		f, rest, err := nextField(b)
		if err != nil {
			return c, err
		}
		b = rest
		switch f.num {
		case containerName:
			if err := f.want(protowire.BytesType, "name"); err != nil {
				return c, err
			}
			c.Name = in.str(f.bytes)
		case containerUsage:
			if err := f.want(protowire.BytesType, "usage"); err != nil {
				return c, err
			}
			k, v, err := mapEntry(f.bytes)
			if err != nil {
				return c, fmt.Errorf("usage: %w", err)
			}
			milli, err := quantityMilli(v)
			if err != nil {
				return c, fmt.Errorf("usage %q: %w", k, err)
			}
			if c.Usage == nil {
				c.Usage = map[corev1.ResourceName]int64{}
			}
			c.Usage[corev1.ResourceName(in.str(k))] = milli
		}
	}
	return c, nil
}

// quantityMilli reads a resource.Quantity message (its string form) in
// milli-units; an empty message is zero.
func quantityMilli(b []byte) (int64, error) {
	var q resource.Quantity
	for len(b) > 0 {
		f, rest, err := nextField(b)
		if err != nil {
			return 0, err
		}
		b = rest
		if f.num == quantityAsString {
			if err := f.want(protowire.BytesType, "a quantity"); err != nil {
				return 0, err
			}
			if q, err = resource.ParseQuantity(string(f.bytes)); err != nil {
				return 0, err
			}
		}
	}
	return q.MilliValue(), nil
}
