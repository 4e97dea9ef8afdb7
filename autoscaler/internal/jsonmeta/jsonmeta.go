// Package jsonmeta finds the apiVersion and kind of a JSON document
// without decoding all of it.
//
// apimachinery's JSON serializer learns a document's kind with
// encoding/json before decoding it, a full validating pass over the bytes.
// For a watch event that happens twice (the event, then its object), and
// profiles of the autoscaler put those two passes at about 40% of decoding
// its own status writes coming back through the watch. MetaFactory reads
// the top-level keys and skips the values between them instead. Where the
// answer could differ from encoding/json's (escapes, non-ASCII keys, keys
// that match only case-insensitively, values that are not plain strings),
// it asks json.DefaultMetaFactory, so for valid JSON the result is the
// same. Invalid JSON is not validated here: the decode that follows does
// that.
package jsonmeta

import (
	"bytes"
	encjson "encoding/json"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
)

// MetaFactory implements json.MetaFactory.
type MetaFactory struct{}

var _ json.MetaFactory = MetaFactory{}

// Interpret returns the document's group, version and kind.
func (MetaFactory) Interpret(data []byte) (*schema.GroupVersionKind, error) {
	apiVersion, kind, ok := sniff(data)
	if !ok {
		return json.DefaultMetaFactory.Interpret(data)
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, err
	}
	return &schema.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: kind}, nil
}

// sniff reads the top-level "apiVersion" and "kind" strings of a JSON
// object, the last of each when repeated, as encoding/json does. ok is
// false where it cannot be sure to agree with encoding/json.
func sniff(data []byte) (apiVersion, kind string, ok bool) {
	_, ok = members(data, func(key, value []byte) bool {
		switch {
		case string(key) == "apiVersion" || string(key) == "kind":
			v, plain := plainString(value)
			if !plain {
				return false
			}
			if string(key) == "kind" {
				kind = v
			} else {
				apiVersion = v
			}
		case bytes.EqualFold(key, []byte("apiVersion")) || bytes.EqualFold(key, []byte("kind")):
			// encoding/json matches field names case-insensitively.
			return false
		}
		return true
	})
	if !ok {
		return "", "", false
	}
	return apiVersion, kind, true
}

// members walks the top-level members of the JSON object in data, in
// order, calling visit with each key (which must be plain: see plainBytes) and
// the bytes of its value, found without validating them. It returns the
// index after the object, and false where data is not such an object or
// visit returns false.
func members(data []byte, visit func(key, value []byte) bool) (end int, ok bool) {
	return memberSpans(data, func(m member) bool { return visit(m.key, data[m.value:m.end]) })
}

// member is where one member of an object is: its key starts at start
// (the opening quote), its value at value, and the value ends at end. key
// is the key's bytes in data (no copy: a string per key was half the
// allocations of decoding a watch event).
type member struct {
	key               []byte
	start, value, end int
}

// memberSpans is members, with the positions of each member.
func memberSpans(data []byte, visit func(member) bool) (end int, ok bool) {
	i := space(data, 0)
	if i >= len(data) || data[i] != '{' {
		return 0, false
	}
	i = space(data, i+1)
	if i < len(data) && data[i] == '}' {
		return i + 1, true
	}
	for {
		keyStart := i
		key, next, plain := plainBytes(data, i)
		if !plain {
			return 0, false
		}
		i = space(data, next)
		if i >= len(data) || data[i] != ':' {
			return 0, false
		}
		start := space(data, i+1)
		if i = skip(data, start); i < 0 || !visit(member{key: key, start: keyStart, value: start, end: i}) {
			return 0, false
		}
		i = space(data, i)
		if i >= len(data) {
			return 0, false
		}
		switch data[i] {
		case ',':
			i = space(data, i+1)
		case '}':
			return i + 1, true
		default:
			return 0, false
		}
	}
}

// WithoutManagedFields returns a copy of the JSON object obj without its
// metadata.managedFields member, which is not validated. ok is false
// (and obj is to be used as it is) where it cannot be sure to find that
// member as encoding/json would: no object, escapes or non-ASCII in a key
// on the way, a repeated "metadata" or "managedFields" key, or none.
//
// The autoscaler's informer drops managed fields anyway; on the objects
// it watches they are 40% of the bytes (the status writer's field set is
// larger than the status), so decoding them was 40% of the decode.
func WithoutManagedFields(obj []byte) (out []byte, ok bool) {
	meta, ok := onlyMember(obj, "metadata")
	if !ok {
		return nil, false
	}
	mf, ok := onlyMember(obj[meta.value:meta.end], "managedFields")
	if !ok {
		return nil, false
	}
	// Cut the member and the comma after it, or else the one before it.
	from, to := meta.value+mf.start, meta.value+mf.end
	if j := space(obj, to); obj[j] == ',' {
		to = space(obj, j+1)
	} else {
		k := from - 1
		for k > meta.value && isSpace(obj[k]) {
			k--
		}
		if obj[k] == ',' {
			from = k
		}
	}
	out = make([]byte, 0, len(obj)-(to-from))
	out = append(out, obj[:from]...)
	return append(out, obj[to:]...), true
}

// Head is what a decoder may want to know of a JSON object before
// decoding it: its kind, and where its metadata is.
type Head struct {
	APIVersion, Kind string
	// Metadata is the metadata member's value (not validated); Namespace
	// ("" when missing) and Name are strings in it, and so is
	// ResourceVersion, "" when missing or not read with certainty (escaped,
	// repeated, or a key matching it only case-insensitively).
	Metadata                         []byte
	Namespace, Name, ResourceVersion string
}

// ReadHead reads the Head of the JSON object obj in one pass over its
// top-level members, without decoding. ok is false where it cannot be
// sure to find them as encoding/json would (no object, escapes or
// non-ASCII in a key on the way or in a value read, a key matching only
// case-insensitively, a repeated metadata, namespace or name, a value read
// that is not a string) and where obj has no metadata or name.
func ReadHead(obj []byte) (Head, bool) {
	var h Head
	metadata := 0
	_, ok := members(obj, func(key, value []byte) bool {
		plain := true
		switch string(key) {
		case "apiVersion":
			h.APIVersion, plain = plainString(value)
		case "kind":
			h.Kind, plain = plainString(value)
		case "metadata":
			h.Metadata = value
			metadata++
		default:
			return !bytes.EqualFold(key, []byte("apiVersion")) && !bytes.EqualFold(key, []byte("kind")) && !bytes.EqualFold(key, []byte("metadata"))
		}
		return plain
	})
	if !ok || metadata != 1 {
		return Head{}, false
	}
	var namespaces, names, versions int
	versionKnown := true
	_, ok = members(h.Metadata, func(key, value []byte) bool {
		plain := true
		switch string(key) {
		case "namespace":
			h.Namespace, plain = plainString(value)
			namespaces++
		case "name":
			h.Name, plain = plainString(value)
			names++
		case "resourceVersion":
			var known bool
			h.ResourceVersion, known = plainString(value)
			versionKnown = versionKnown && known
			versions++
		default:
			if bytes.EqualFold(key, []byte("resourceVersion")) {
				versionKnown = false
			}
			return !bytes.EqualFold(key, []byte("namespace")) && !bytes.EqualFold(key, []byte("name"))
		}
		return plain
	})
	if !ok || namespaces > 1 || names != 1 {
		return Head{}, false
	}
	if !versionKnown || versions > 1 {
		h.ResourceVersion = ""
	}
	return h, true
}

// onlyMember returns the member key of the JSON object in data; ok is
// false where data is no such object (see memberSpans), or the key is
// missing or repeated.
func onlyMember(data []byte, key string) (m member, ok bool) {
	found := false
	if _, ok := memberSpans(data, func(c member) bool {
		if string(c.key) != key {
			return true
		}
		m, found = c, !found
		return found // a second one: give up
	}); !ok {
		return member{}, false
	}
	return m, found
}

// plainString is the value of a JSON string without escapes and of ASCII
// only (see plainBytes) that is all of value.
func plainString(value []byte) (string, bool) {
	s, next, plain := plainBytes(value, 0)
	if !plain || next != len(value) {
		return "", false
	}
	return string(s), true
}

// space returns the index of the first byte from i on that is not JSON
// white space.
func space(data []byte, i int) int {
	for i < len(data) && isSpace(data[i]) {
		i++
	}
	return i
}

// isSpace reports whether c is JSON white space.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// plainBytes reads a JSON string at i that has no escapes and only ASCII,
// and returns its bytes in data and the index after it; plain is false
// otherwise.
func plainBytes(data []byte, i int) (s []byte, next int, plain bool) {
	if i >= len(data) || data[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(data); j++ {
		switch c := data[j]; {
		case c == '"':
			return data[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// skip returns the index after the JSON value at i, or -1 where the
// document ends first. It finds the value's end without validating it.
func skip(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for i < len(data) {
			switch data[i] {
			case '"':
				if i = skipString(data, i); i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	default: // a number, true, false or null
		for i < len(data) {
			switch data[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}

// skipString returns the index after the string that starts at i.
func skipString(data []byte, i int) int {
	for j := i + 1; j < len(data); j++ {
		q := bytes.IndexByte(data[j:], '"')
		if q < 0 {
			return -1
		}
		j += q
		if !escapedQuote(data, i+1, j) {
			return j + 1
		}
	}
	return -1
}

// Event reads a watch event, {"type": ..., "object": ...}, as
// sigs.k8s.io/json decodes it into a metav1.WatchEvent: the type, and the
// object's bytes as they are in data (nil for null). Keys match exactly,
// others are ignored, and the last of a repeated key wins. ok is false
// where it cannot be sure to agree (escapes or non-ASCII in a key or the
// type, a type that is not a string) and where data is not valid JSON,
// except inside the object it returns: the caller decodes that object
// with a validating decoder. So with Framer, which does not validate, a
// stream is accepted exactly when encoding/json would accept it.
func Event(data []byte) (typ string, object []byte, ok bool) {
	var replaced []byte // an earlier "object", which no decoder will read
	end, ok := members(data, func(key, value []byte) bool {
		switch string(key) {
		case "type":
			v, plain := plainString(value)
			if !plain {
				return false
			}
			typ = v
		case "object":
			if replaced != nil && !encjson.Valid(replaced) {
				return false
			}
			replaced = value
			if string(value) == "null" {
				object = nil
			} else {
				object = value
			}
		default:
			return encjson.Valid(value)
		}
		return true
	})
	if !ok || space(data, end) != len(data) {
		return "", nil, false
	}
	return typ, object, true
}
