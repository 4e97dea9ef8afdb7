package metrics

import (
	"fmt"
	"maps"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/tidal-autoscaler/tidal/autoscaler/internal/pbwire"
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

// Field numbers, from the messages' generated.proto files.
const (
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
	env, err := pbwire.ReadEnvelope(body)
	if err != nil {
		return usageList{}, err
	}
	for _, c := range []struct{ got, want string }{{string(env.APIVersion), "metrics.k8s.io/v1beta1"}, {string(env.Kind), "PodMetricsList"}} {
		if c.got != "" && c.got != c.want {
			return usageList{}, fmt.Errorf("envelope: the body holds a %q, want %q", c.got, c.want)
		}
	}
	raw := env.Raw
	n := 0
	if err := pbwire.Each(raw, func(f pbwire.Field) error {
		if f.Num == listItems {
			n++
		}
		return nil
	}); err != nil {
		return usageList{}, fmt.Errorf("PodMetricsList: %w", err)
	}
	out := usageList{items: make([]replicas.PodUsage, 0, n), labels: make([]map[string]string, 0, n)}
	in := newInterned()
	if err := pbwire.Each(raw, func(f pbwire.Field) error {
		if f.Num != listItems {
			return nil
		}
		b, err := f.BytesOf("PodMetricsList.items")
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

func decodePodUsage(b []byte, in *interned) (pu replicas.PodUsage, labels map[string]string, err error) {
	err = pbwire.Each(b, func(f pbwire.Field) error {
		var v []byte
		switch f.Num {
		case podMetadata:
			if v, err = f.BytesOf("metadata"); err == nil {
				if labels, err = decodeObjectMeta(v, &pu.Name, labels, in); err != nil {
					err = fmt.Errorf("metadata: %w", err)
				}
			}
		case podTimestamp:
			if v, err = f.BytesOf("timestamp"); err == nil {
				if pu.Timestamp, err = decodeTime(v); err != nil {
					err = fmt.Errorf("timestamp: %w", err)
				}
			}
		case podWindow:
			if v, err = f.BytesOf("window"); err == nil {
				if pu.Window, err = decodeDuration(v); err != nil {
					err = fmt.Errorf("window: %w", err)
				}
			}
		case podContainers:
			if v, err = f.BytesOf("containers"); err == nil {
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
	if err := pbwire.Each(b, func(f pbwire.Field) error {
		switch f.Num {
		case metaName:
			v, err := f.BytesOf("name")
			*name = string(v)
			return err
		case metaLabels:
			v, err := f.BytesOf("labels")
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
	err = pbwire.Each(b, func(f pbwire.Field) error {
		var err error
		switch f.Num {
		case mapKey:
			key, err = f.BytesOf("a map key")
		case mapValue:
			value, err = f.BytesOf("a map value")
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
	err := pbwire.Each(b, func(f pbwire.Field) (err error) {
		if f.Num == timeSeconds {
			seconds, err = f.VarintOf("seconds")
		}
		return err
	})
	return time.Unix(int64(seconds), 0).Local(), err
}

func decodeDuration(b []byte) (time.Duration, error) {
	var d uint64
	err := pbwire.Each(b, func(f pbwire.Field) (err error) {
		if f.Num == durationValue {
			d, err = f.VarintOf("duration")
		}
		return err
	})
	return time.Duration(int64(d)), err
}

func decodeContainer(b []byte, in *interned) (c replicas.ContainerUsage, err error) {
	err = pbwire.Each(b, func(f pbwire.Field) error {
		switch f.Num {
		case containerName:
			v, err := f.BytesOf("name")
			c.Name = in.strs.Of(v)
			return err
		case containerUsage:
			v, err := f.BytesOf("usage")
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
	err := pbwire.Each(b, func(f pbwire.Field) error {
		if f.Num != quantityAsString {
			return nil
		}
		v, err := f.BytesOf("a quantity")
		if err == nil {
			q, err = resource.ParseQuantity(string(v))
		}
		return err
	})
	return q.MilliValue(), err
}
