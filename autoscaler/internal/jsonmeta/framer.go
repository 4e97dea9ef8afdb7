package jsonmeta

import (
	"errors"
	"fmt"
	"io"

	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
)

// Framer splits a watch stream of JSON values, as apimachinery's JSON
// framer does, but finds where each value ends by counting brackets
// outside strings instead of running encoding/json's validating scanner
// over it twice (once to find the end, once more to copy it out): that was
// 12% of the autoscaler's CPU, decoding its own status writes coming back
// through the watch. Frames are not validated here; every frame is
// decoded next, and the decoders validate what they use (see Event).
//
// Only objects and arrays are framed, which is all an apiserver sends; any
// other value is an error.
var Framer = framer{}

type framer struct{}

// NewFrameReader implements runtime.Framer.
func (framer) NewFrameReader(r io.ReadCloser) io.ReadCloser {
	return &frameReader{r: r}
}

// NewFrameWriter implements runtime.Framer: JSON values need no framing
// on the way out.
func (framer) NewFrameWriter(w io.Writer) io.Writer {
	return kjson.Framer.NewFrameWriter(w)
}

// frameReader returns one JSON value per Read, or as much of it as fits
// with io.ErrShortBuffer, and the rest on the next calls (the contract of
// apimachinery's framed readers, which streaming.Decoder relies on).
type frameReader struct {
	r io.ReadCloser
	// buf[start:end] is read but not yet returned; scan is how far the
	// current value has been scanned, with the scanner's state.
	buf        []byte
	start, end int
	scan       int
	depth      int
	inString   bool
	// remaining is the part of the last frame that did not fit.
	remaining []byte
	err       error
}

const (
	minRead  = 32 << 10
	maxFrame = 64 << 20 // the apiserver's own limit on a request body is 3 MiB
)

var errNotObject = errors.New("watch stream: a value that is not a JSON object or array")

func (f *frameReader) Read(data []byte) (int, error) {
	if len(f.remaining) > 0 {
		n := copy(data, f.remaining)
		f.remaining = f.remaining[n:]
		if len(f.remaining) > 0 {
			return n, io.ErrShortBuffer
		}
		f.remaining = nil
		return n, nil
	}
	frame, err := f.next()
	if err != nil {
		return 0, err
	}
	n := copy(data, frame)
	if n < len(frame) {
		// The buffer is reused by the next frame: keep a copy.
		f.remaining = append([]byte(nil), frame[n:]...)
		return n, io.ErrShortBuffer
	}
	return n, nil
}

func (f *frameReader) Close() error { return f.r.Close() }

// next returns the next value's bytes, valid until the next call.
func (f *frameReader) next() ([]byte, error) {
	for {
		if frameEnd, ok, err := f.scanValue(); err != nil {
			return nil, err
		} else if ok {
			frame := f.buf[f.start:frameEnd]
			f.start, f.scan = frameEnd, frameEnd
			return frame, nil
		}
		if f.err != nil {
			if f.err == io.EOF && f.start < f.end {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, f.err
		}
		if err := f.fill(); err != nil {
			return nil, err
		}
	}
}

// scanValue continues scanning buf from scan. It skips white space before
// a value and returns the end of the value when it is complete.
func (f *frameReader) scanValue() (end int, ok bool, err error) {
	b := f.buf[:f.end]
	i := f.scan
	if f.depth == 0 {
		i = space(b, i)
		f.start, f.scan = i, i
		if i == len(b) {
			return 0, false, nil
		}
		if b[i] != '{' && b[i] != '[' {
			return 0, false, errNotObject
		}
	}
	for i < len(b) {
		if f.inString {
			// Jump to the next quote or backslash, as skipString does.
			j := plainRun(b, i)
			switch {
			case j >= len(b):
				i = j
			case b[j] == '"':
				f.inString = false
				i = j + 1
				continue
			case j+1 < len(b):
				i = j + 2 // a backslash and the byte it escapes
				continue
			default:
				i = j // a backslash last: scan on from it once more is read
			}
			break
		}
		switch b[i] {
		case '"':
			f.inString = true
		case '{', '[':
			f.depth++
		case '}', ']':
			f.depth--
			if f.depth == 0 {
				f.scan = i + 1
				return i + 1, true, nil
			}
		}
		i++
	}
	f.scan = i
	return 0, false, nil
}

// fill reads more of the stream, first moving the unreturned bytes to the
// front of the buffer (or into a larger one).
func (f *frameReader) fill() error {
	if f.start > 0 {
		n := copy(f.buf, f.buf[f.start:f.end])
		f.scan -= f.start
		f.end, f.start = n, 0
	}
	if len(f.buf)-f.end < minRead/2 {
		if len(f.buf) >= maxFrame {
			return fmt.Errorf("watch stream: a value longer than %d bytes", maxFrame)
		}
		grown := make([]byte, max(2*len(f.buf), minRead))
		copy(grown, f.buf[:f.end])
		f.buf = grown
	}
	n, err := f.r.Read(f.buf[f.end:])
	f.end += n
	if err != nil {
		f.err = err
	}
	return nil
}
