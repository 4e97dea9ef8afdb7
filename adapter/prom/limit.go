package prom

import (
	"errors"
	"fmt"
	"io"
	"net/http"
)

// ErrTooLarge is the cause of a request whose response was longer than
// the backend's limit (see Options.MaxResponseBytes); test with errors.Is.
// Such a request fails with Kind ErrQuery: the query selects too much.
var ErrTooLarge = errors.New("response too large")

// Default limits of a response's bytes. A query answers with samples
// (the HPA's requests: a few per pod), 64 MiB is some 300,000 series; the
// response is held whole and decoded, so the limit bounds the memory of
// one query at a few times it. A series response is streamed and only its
// distinct shapes kept (internal/seriesjson), so its limit bounds the
// transfer and the worst case of shapes all distinct rather than the
// common case: 1 GiB is some four million series of a relist. What the
// distinct shapes of one series response may hold is bounded apart, by
// MaxShapeBytes: a relist has hundreds or thousands of shapes, a response
// of ever new names (garbage) would otherwise hold several times its
// length.
const (
	DefaultMaxResponseBytes       int64 = 64 << 20
	DefaultMaxSeriesResponseBytes int64 = 1 << 30
	MaxShapeBytes                 int64 = 64 << 20
)

// limitTransport fails responses longer than max bytes: at once when
// their Content-Length says so, and at the byte past max otherwise.
type limitTransport struct {
	base http.RoundTripper
	max  int64
	flag string
}

func (t *limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if _, err := limitBody(resp, t.max, t.flag); err != nil {
		return nil, err
	}
	return resp, nil
}

// limitBody replaces resp.Body with one that fails past max bytes, or
// closes it and fails when its Content-Length is already longer.
func limitBody(resp *http.Response, max int64, flag string) (*limitedBody, error) {
	if resp.ContentLength > max {
		_ = resp.Body.Close()
		return nil, tooLarge(max, flag)
	}
	b := &limitedBody{rc: resp.Body, max: max, flag: flag}
	resp.Body = b
	return b, nil
}

func tooLarge(max int64, flag string) error {
	return fmt.Errorf("%w: longer than %d bytes (%s); narrow the rule's query or raise %s", ErrTooLarge, max, flag, flag)
}

// limitedBody reads at most max bytes of rc; reading one more fails with
// ErrTooLarge. Unlike io.LimitReader it does not end quietly, which a
// decoder would report as truncated JSON.
type limitedBody struct {
	rc       io.ReadCloser
	n, max   int64
	flag     string
	exceeded bool
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.exceeded {
		return 0, tooLarge(b.max, b.flag)
	}
	if left := b.max - b.n + 1; int64(len(p)) > left {
		p = p[:left]
	}
	n, err := b.rc.Read(p)
	b.n += int64(n)
	if b.n > b.max {
		b.exceeded = true
		return n - int(b.n-b.max), tooLarge(b.max, b.flag)
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
