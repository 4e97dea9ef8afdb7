package jsonmeta

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
)

// readFrames reads every frame from framer's reader over in, as
// streaming.Decoder does: into a buffer of size bufSize, grown and read
// again on io.ErrShortBuffer. It returns the frames and the error that
// ended them.
func readFrames(framer runtime.Framer, in io.Reader, bufSize int) ([]string, error) {
	r := framer.NewFrameReader(io.NopCloser(in))
	var frames []string
	buf := make([]byte, bufSize)
	for {
		n, err := r.Read(buf)
		frame := append([]byte(nil), buf[:n]...)
		for errors.Is(err, io.ErrShortBuffer) {
			n, err = r.Read(buf)
			frame = append(frame, buf[:n]...)
		}
		if err != nil {
			return frames, err
		}
		frames = append(frames, string(frame))
	}
}

func TestFramer(t *testing.T) {
	tests := []struct {
		name   string
		stream string
		frames []string
		err    error
	}{
		{"as the apiserver writes events", `{"type":"ADDED","object":{"a":1}}` + "\n" + `{"type":"MODIFIED","object":{"a":2}}` + "\n",
			[]string{`{"type":"ADDED","object":{"a":1}}`, `{"type":"MODIFIED","object":{"a":2}}`}, io.EOF},
		{"no separator, space around", " \t{}[]\r\n{ } ", []string{`{}`, `[]`, `{ }`}, io.EOF},
		{"brackets and quotes inside strings", `{"a":"}]{[","b":"\"}","c":"\\"}{"d":"\\\""}`,
			[]string{`{"a":"}]{[","b":"\"}","c":"\\"}`, `{"d":"\\\""}`}, io.EOF},
		{"nesting", `{"a":[{"b":[[]]},{}]}`, []string{`{"a":[{"b":[[]]},{}]}`}, io.EOF},
		{"empty stream", "", nil, io.EOF},
		{"only space", " \n ", nil, io.EOF},
		{"cut inside a value", `{"a":1}{"b":[`, []string{`{"a":1}`}, io.ErrUnexpectedEOF},
		{"cut inside a string", `{"a":"}`, nil, io.ErrUnexpectedEOF},
		{"a value that is not an object", `{"a":1} 5 {}`, []string{`{"a":1}`}, errNotObject},
	}
	for _, tc := range tests {
		for _, read := range []struct {
			name string
			r    func(string) io.Reader
			buf  int
		}{
			{"whole", func(s string) io.Reader { return strings.NewReader(s) }, 1024},
			{"byte by byte, small buffer", func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) }, 3},
			{"half", func(s string) io.Reader { return iotest.HalfReader(strings.NewReader(s)) }, 5},
		} {
			t.Run(tc.name+"/"+read.name, func(t *testing.T) {
				frames, err := readFrames(Framer, read.r(tc.stream), read.buf)
				if strings.Join(frames, "|") != strings.Join(tc.frames, "|") || len(frames) != len(tc.frames) {
					t.Errorf("frames %q, want %q", frames, tc.frames)
				}
				if !errors.Is(err, tc.err) {
					t.Errorf("error %v, want %v", err, tc.err)
				}
			})
		}
	}
}

// TestFramerLargeValue: a value much larger than one read of the stream
// and than the caller's buffer arrives whole, and the next one after it.
func TestFramerLargeValue(t *testing.T) {
	big := `{"s":"` + strings.Repeat(`x\"{`, 100_000) + `"}`
	frames, err := readFrames(Framer, iotest.HalfReader(strings.NewReader(big+"\n{}")), 4096)
	if err != io.EOF || len(frames) != 2 || frames[0] != big || frames[1] != "{}" {
		t.Fatalf("%d frames (first %d bytes), error %v", len(frames), len(frames[0]), err)
	}
}

// FuzzFramer: on every stream, the frames apimachinery's JSON framer
// returns, up to its first error or first value that is not an object or
// array, are the frames Framer returns.
func FuzzFramer(f *testing.F) {
	for _, s := range []string{
		`{"type":"ADDED","object":{"a":"}"}}` + "\n" + `{"type":"DELETED","object":null}`,
		`[1,{"a":[]}] {"b":"\\"} 7`,
		`{"a":"\u007d"}{`,
	} {
		f.Add([]byte(s), 16)
	}
	f.Fuzz(func(t *testing.T, stream []byte, bufSize int) {
		if bufSize < 1 || bufSize > 1<<16 {
			return
		}
		want, _ := readFrames(kjson.Framer, bytes.NewReader(stream), bufSize)
		got, _ := readFrames(Framer, iotest.HalfReader(bytes.NewReader(stream)), bufSize)
		for i, w := range want {
			if c := w[0]; c != '{' && c != '[' {
				return
			}
			if i >= len(got) || got[i] != w {
				t.Fatalf("frame %d: %q, apimachinery's framer: %q (stream %q)", i, got, want, stream)
			}
		}
	})
}
