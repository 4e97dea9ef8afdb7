// Package seriesjson decodes Prometheus' /api/v1/series responses into the
// distinct (name, label names) shapes of their series, streaming: label
// values are skipped without being copied, so memory grows with shapes, not
// series. It accepts exactly what encoding/json accepts (fuzz-tested against
// it).
package seriesjson

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/tidal-autoscaler/tidal/internal/intern"
)

// Shape is what discovery needs of a series: its name and its label names
// (sorted, without __name__).
type Shape struct {
	Name   string
	Labels []string
}

// Response is what an /api/v1/series response says: the distinct shapes
// of its series, its status and, for an error, its errorType and error.
type Response struct {
	Shapes                  []Shape
	Status, ErrType, ErrMsg string
}

const (
	// seriesBufSize is the read buffer; it grows only for a label or
	// metric name longer than it, up to maxNameBytes.
	seriesBufSize = 32 << 10
	maxNameBytes  = 1 << 20
	// maxDepth is encoding/json's nesting limit, so both accept the same
	// documents.
	maxDepth = 10000
)

// Read decodes a series response from r: the JSON object
// {"status": ..., "data": [{label: value, ...}, ...], "errorType": ...,
// "error": ...}, other keys ignored. It accepts exactly the documents
// encoding/json accepts, with the same meaning (a repeated key: the last
// wins; a null data: no series), and requires every label value, a repeated
// label's first too, to be a string (as decoding into map[string]string does).
func Read(r io.Reader) (Response, error) {
	return ReadLimited(r, 0)
}

// ErrTooManyShapes is returned by ReadLimited when the distinct shapes
// of a response would hold more than its limit.
var ErrTooManyShapes = errors.New("too many distinct series shapes")

// ReadLimited is Read, failing with ErrTooManyShapes once the distinct
// shapes kept would take more than maxShapeBytes of memory (estimated); 0 means no limit. Repeated shapes cost nothing, so this
// bounds what a response of ever new names (garbage, or a selector far
// wider than meant) can make the decoder hold, whatever its length.
func ReadLimited(r io.Reader, maxShapeBytes int64) (Response, error) {
	s := &seriesScanner{
		r:        r,
		buf:      make([]byte, seriesBufSize),
		seen:     map[string]struct{}{},
		strs:     intern.Strings{},
		maxShape: maxShapeBytes,
	}
	err := s.response()
	return s.out, err
}

// shapeBytes estimates the memory one distinct shape holds in the
// decoder: its identity in the seen set, its Shape (with the slack of the
// growing list) and, at most, its strings with their intern entries.
func shapeBytes(name string, labels []string) int64 {
	n := int64(2*len(name) + 256)
	for _, l := range labels {
		n += int64(2*len(l) + 24)
	}
	return n
}

// seriesScanner is a JSON scanner specialised for series responses.
type seriesScanner struct {
	r      io.Reader
	buf    []byte
	pos, n int   // unread input is buf[pos:n]
	off    int64 // input offset of buf[0], for error positions
	rerr   error // the reader's error, io.EOF at the end
	// scratch holds an unescaped string (see str).
	scratch []byte

	// Per series: its name, and its label names back to back in labels
	// at spans; key is the shape's identity.
	name   []byte
	labels []byte
	spans  []span
	key    []byte

	seen map[string]struct{}
	strs intern.Strings
	out  Response
	// kept estimates the bytes the distinct shapes hold, maxShape bounds
	// it (0: no bound).
	kept, maxShape int64
}

type span struct{ start, end int }

func (s *seriesScanner) response() error {
	if err := s.expect('{'); err != nil {
		return err
	}
	c, err := s.peek()
	if err != nil {
		return err
	}
	if c == '}' {
		s.pos++
		return s.end()
	}
	for {
		k, err := s.str()
		if err != nil {
			return err
		}
		field := string(k) // small: only the response's few keys
		if err := s.expect(':'); err != nil {
			return err
		}
		switch field {
		case "status":
			s.out.Status, err = s.optionalString()
		case "errorType":
			s.out.ErrType, err = s.optionalString()
		case "error":
			s.out.ErrMsg, err = s.optionalString()
		case "data":
			err = s.data()
		default:
			err = s.skipValue(1)
		}
		if err != nil {
			return err
		}
		more, err := s.next('}')
		if err != nil {
			return err
		}
		if !more {
			return s.end()
		}
	}
}

// end checks that only whitespace follows the response.
func (s *seriesScanner) end() error {
	if _, err := s.peek(); err == nil {
		return s.syntax("data after the end of the response")
	} else if !errors.Is(err, io.ErrUnexpectedEOF) {
		return err
	}
	return nil
}

// optionalString reads a string value, or skips any other value and
// returns "" (encoding/json leaves such a field unset or fails, and the
// response is then not a success either way).
func (s *seriesScanner) optionalString() (string, error) {
	c, err := s.peek()
	if err != nil {
		return "", err
	}
	if c != '"' {
		return "", s.skipValue(1)
	}
	v, err := s.str()
	return string(v), err
}

// data reads the list of series; a repeated "data" replaces the first.
func (s *seriesScanner) data() error {
	s.out.Shapes = nil
	s.kept = 0
	clear(s.seen)
	c, err := s.peek()
	if err != nil {
		return err
	}
	if c == 'n' {
		return s.literal("null")
	}
	if c != '[' {
		return s.syntax("data is not a list of series")
	}
	s.pos++
	if c, err = s.peek(); err != nil {
		return err
	}
	if c == ']' {
		s.pos++
		return nil
	}
	for {
		if err := s.series(); err != nil {
			return err
		}
		more, err := s.next(']')
		if err != nil || !more {
			return err
		}
	}
}

// series reads one label set and records its shape if it is new.
func (s *seriesScanner) series() error {
	if err := s.expect('{'); err != nil {
		return err
	}
	s.name, s.labels, s.spans = s.name[:0], s.labels[:0], s.spans[:0]
	c, err := s.peek()
	if err != nil {
		return err
	}
	if c == '}' {
		s.pos++
	} else {
		for {
			if err := s.label(); err != nil {
				return err
			}
			more, err := s.next('}')
			if err != nil {
				return err
			}
			if !more {
				break
			}
		}
	}
	return s.addShape()
}

// label reads one "name": "value" pair, keeping the value only for
// __name__.
func (s *seriesScanner) label() error {
	k, err := s.str()
	if err != nil {
		return err
	}
	isName := string(k) == "__name__"
	if !isName {
		start := len(s.labels)
		s.labels = append(s.labels, k...)
		s.spans = append(s.spans, span{start, len(s.labels)})
	}
	if err := s.expect(':'); err != nil {
		return err
	}
	c, err := s.peek()
	if err != nil {
		return err
	}
	if c != '"' {
		return s.syntax("a label value is not a string")
	}
	if !isName {
		return s.skipString()
	}
	v, err := s.str()
	s.name = append(s.name[:0], v...)
	return err
}

// addShape records the current series' shape unless it was seen: label
// names sorted and deduplicated (a repeated label is one label, as in a
// decoded map), the key length-prefixed so that no two shapes share one.
func (s *seriesScanner) addShape() error {
	sp := s.spans
	lb := s.labels
	// Insertion sort: Prometheus sends label names sorted already.
	for i := 1; i < len(sp); i++ {
		for j := i; j > 0 && bytes.Compare(lb[sp[j].start:sp[j].end], lb[sp[j-1].start:sp[j-1].end]) < 0; j-- {
			sp[j], sp[j-1] = sp[j-1], sp[j]
		}
	}
	uniq := sp[:0]
	for i, x := range sp {
		if i > 0 && bytes.Equal(lb[x.start:x.end], lb[sp[i-1].start:sp[i-1].end]) {
			continue
		}
		uniq = append(uniq, x)
	}
	s.spans = uniq
	s.key = binary.AppendUvarint(s.key[:0], uint64(len(s.name)))
	s.key = append(s.key, s.name...)
	for _, x := range uniq {
		s.key = binary.AppendUvarint(s.key, uint64(x.end-x.start))
		s.key = append(s.key, lb[x.start:x.end]...)
	}
	if _, ok := s.seen[string(s.key)]; ok {
		return nil
	}
	sh := Shape{Name: s.strs.Of(s.name), Labels: make([]string, len(uniq))}
	for i, x := range uniq {
		sh.Labels[i] = s.strs.Of(lb[x.start:x.end])
	}
	s.kept += shapeBytes(sh.Name, sh.Labels)
	if s.maxShape > 0 && s.kept > s.maxShape {
		return fmt.Errorf("%w: the %d distinct shapes before byte %d hold more than %d bytes", ErrTooManyShapes, len(s.out.Shapes)+1, s.off+int64(s.pos), s.maxShape)
	}
	s.seen[string(s.key)] = struct{}{}
	s.out.Shapes = append(s.out.Shapes, sh)
	return nil
}

// next reads the ',' between elements (true) or the closing delimiter
// (false).
func (s *seriesScanner) next(closing byte) (bool, error) {
	c, err := s.peek()
	if err != nil {
		return false, err
	}
	switch c {
	case ',':
		s.pos++
		return true, nil
	case closing:
		s.pos++
		return false, nil
	}
	return false, s.syntax(fmt.Sprintf("want ',' or %q", closing))
}
