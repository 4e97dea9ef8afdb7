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
	"encoding/binary"
	encjson "encoding/json"
	"math/bits"

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
	return walk(data, nil, visit)
}

// walk is memberSpans, finding the end of each value with valueEnd (key,
// and the index of the value in data) where it is not nil, and with skip
// where it is; valueEnd returns -1 where the document ends first.
func walk(data []byte, valueEnd func(key []byte, i int) int, visit func(member) bool) (end int, ok bool) {
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
		if valueEnd != nil {
			i = valueEnd(key, start)
		} else {
			i = skip(data, start)
		}
		if i < 0 || !visit(member{key: key, start: keyStart, value: start, end: i}) {
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

// span is the bytes [from, to) of a document.
type span struct{ from, to int }

// managedFieldsCut is what to cut out of obj to drop mf, the managedFields
// member of meta, obj's metadata member: the member and the comma after
// it, or else the one before it.
func managedFieldsCut(obj []byte, meta, mf member) span {
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
	return span{from, to}
}

// without returns a copy of data without the bytes of cut.
func without(data []byte, cut span) []byte {
	out := make([]byte, 0, len(data)-(cut.to-cut.from))
	out = append(out, data[:cut.from]...)
	return append(out, data[cut.to:]...)
}

// skipFindingManagedFields is skip, for the object at i, that also finds
// its metadata.managedFields member in the same pass: cut is what to leave
// out of data[i:end]. found is false where it cannot be sure to find that
// member as encoding/json would: escapes or non-ASCII in a key on the
// way, a repeated "metadata" or "managedFields" key, or none.
func skipFindingManagedFields(data []byte, i int) (end int, cut span, found bool) {
	obj := data[i:]
	var meta, mf member
	metas, mfs, metaWalked := 0, 0, false
	end, ok := walk(obj, func(key []byte, j int) int {
		if string(key) != "metadata" {
			return skip(obj, j)
		}
		metas++
		metaEnd, ok := memberSpans(obj[j:], func(c member) bool {
			if string(c.key) == "managedFields" {
				mf = c
				mfs++
			}
			return true
		})
		if metaWalked = ok; !ok {
			return skip(obj, j)
		}
		return j + metaEnd
	}, func(m member) bool {
		if string(m.key) == "metadata" {
			meta = m
		}
		return true
	})
	if !ok {
		// Not an object that walk reads: its end as skip finds it (the
		// scan again, but only for documents no apiserver sends).
		return skip(data, i), span{}, false
	}
	if metas != 1 || !metaWalked || mfs != 1 {
		return i + end, span{}, false
	}
	return i + end, managedFieldsCut(obj, meta, mf), true
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
//
// The loops test bytes against tables rather than calling
// bytes.IndexByte: the strings of an API object are short (a key is about
// ten bytes), and for them IndexByte's setup cost more than the search;
// these scans were 7% of the autoscaler's CPU in crd mode.
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
			c := data[i]
			if !structural[c] {
				i++
				continue
			}
			switch c {
			case '"':
				if i = skipString(data, i); i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			default: // '}' or ']'
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	default: // a number, true, false or null
		// It ends at a delimiter, or at any byte that counting brackets
		// would not pass over (a quote, a bracket): so wherever walk
		// reads an object, it ends where skip does (see
		// skipFindingManagedFields).
		for i < len(data) {
			switch data[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r', '"', '{', '[':
				return i
			}
			i++
		}
		return i
	}
}

// skipString returns the index after the string that starts at i, or -1
// where the document ends first. A backslash escapes the byte after it,
// so a quote ends the string unless an odd number of backslashes precede
// it.
func skipString(data []byte, i int) int {
	j := i + 1
	for j < len(data) {
		j = plainRun(data, j)
		if j >= len(data) {
			return -1
		}
		if data[j] == '"' {
			return j + 1
		}
		j += 2 // a backslash and the byte it escapes
	}
	return -1
}

// plainRun returns the index of the first quote or backslash in data from
// j on, or len(data). It tests eight bytes at a time: (x-lo)&^x&hi marks
// the zero bytes of x, exactly up to the first one, which is all it needs.
func plainRun(data []byte, j int) int {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	for ; j+8 <= len(data); j += 8 {
		w := binary.LittleEndian.Uint64(data[j:])
		q, b := w^(lo*'"'), w^(lo*'\\')
		if m := ((q-lo)&^q | (b-lo)&^b) & hi; m != 0 {
			return j + bits.TrailingZeros64(m)/8
		}
	}
	for ; j < len(data) && !inString[data[j]]; j++ {
	}
	return j
}

// structural marks the bytes that open or close a string, object or array;
// inString the bytes that end a string's plain run: a quote or a backslash.
var structural, inString = byteSet(`"{}[]`), byteSet(`"\`)

// byteSet is a table with the bytes of s set.
func byteSet(s string) (t [256]bool) {
	for i := range len(s) {
		t[s[i]] = true
	}
	return t
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

// EventWithoutManagedFields is Event, with the object copied and its
// metadata.managedFields member, which is not validated, cut out where
// skipFindingManagedFields finds it. The autoscaler's informer drops
// managed fields anyway; on the objects it watches they are 40% of the
// bytes (the status writer's field set is larger than the status), so
// decoding them was 40% of the decode.
//
// The object is read in one pass, where Event and then cutting the member
// out took three (these scans were 7% of the autoscaler's CPU in crd mode,
// where every status write comes back through the watch); the answer is
// the same for every document (FuzzEventWithoutManagedFields).
func EventWithoutManagedFields(data []byte) (typ string, object []byte, ok bool) {
	var (
		replaced []byte // an earlier "object", which no decoder will read
		cut      span   // of the latest object, where found
		found    bool
	)
	end, ok := walk(data, func(key []byte, i int) int {
		if string(key) != "object" || i >= len(data) || data[i] != '{' {
			return skip(data, i)
		}
		var end int
		end, cut, found = skipFindingManagedFields(data, i)
		return end
	}, func(m member) bool {
		value := data[m.value:m.end]
		switch string(m.key) {
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
			switch {
			case string(value) == "null":
				object = nil
			case found && len(value) > 0 && value[0] == '{':
				object = without(value, cut)
			default:
				object = bytes.Clone(value)
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
