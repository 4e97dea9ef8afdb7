package jsonmeta

import (
	"bytes"
	"io"
	"os"
	"testing"
)

// BenchmarkEchoPath runs the scans a watch event of the autoscaler's own
// status write goes through before its echo is recognized: framing,
// EventWithoutManagedFields and ReadHead, over a stream of 100 events as
// the apiserver sends them (testdata/event.json, keys sorted).
func BenchmarkEchoPath(b *testing.B) {
	event, err := os.ReadFile("testdata/event.json")
	if err != nil {
		b.Fatal(err)
	}
	stream := bytes.Repeat(event, 100)
	buf := make([]byte, 64<<10)
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		fr := Framer.NewFrameReader(io.NopCloser(bytes.NewReader(stream)))
		for range 100 {
			n, err := fr.Read(buf)
			if err != nil {
				b.Fatal(err)
			}
			_, slim, ok := EventWithoutManagedFields(buf[:n])
			if !ok || len(slim) >= n*3/4 {
				b.Fatal("not an event, or its managed fields not cut")
			}
			if _, ok := ReadHead(slim); !ok {
				b.Fatal("no head")
			}
		}
	}
}
