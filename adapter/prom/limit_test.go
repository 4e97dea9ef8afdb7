package prom_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/tidal-autoscaler/tidal/adapter/prom"
	"github.com/tidal-autoscaler/tidal/internal/raceflag"
)

const hugeBody = 1 << 30

// hugePrometheus is a Prometheus stand-in whose every answer is a valid
// beginning of a success response that goes on for size bytes, generated
// as it is written (nothing of that size is allocated). Query answers
// repeat one sample; series answers repeat one series, or with distinct
// name a new metric in every series, so that a decoder keeping distinct
// names grows with what it reads. It counts the bytes the client
// accepted.
type hugePrometheus struct {
	*httptest.Server
	size int64
	// declare sends the size as Content-Length.
	declare, distinct bool
	served            atomic.Int64
	done              chan struct{}
}

func newHugePrometheus(t *testing.T, size int64, declare, distinct bool) *hugePrometheus {
	h := &hugePrometheus{size: size, declare: declare, distinct: distinct, done: make(chan struct{}, 1)}
	h.Server = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.Close)
	return h
}

func (h *hugePrometheus) serve(w http.ResponseWriter, r *http.Request) {
	defer func() { h.done <- struct{}{} }()
	w.Header().Set("Content-Type", "application/json")
	if h.declare {
		w.Header().Set("Content-Length", strconv.FormatInt(h.size, 10))
	}
	series := r.URL.Path == "/api/v1/series"
	prefix := `{"status":"success","data":{"resultType":"vector","result":[`
	if series {
		prefix = `{"status":"success","data":[`
	}
	buf := make([]byte, 0, 64<<10)
	buf = append(buf, prefix...)
	left := h.size
	for i := 0; left > 0; i++ {
		switch {
		case series && h.distinct:
			buf = append(buf, `{"__name__":"m`...)
			buf = strconv.AppendInt(buf, int64(i), 10)
			buf = append(buf, `","pod":"web-1"},`...)
		case series:
			buf = append(buf, `{"__name__":"m","pod":"web-1","namespace":"default"},`...)
		default:
			buf = append(buf, `{"metric":{"pod":"web-1"},"value":[1700000000,"1"]},`...)
		}
		if len(buf) < cap(buf)-64 && int64(len(buf)) < left {
			continue
		}
		chunk := buf[:min(int64(len(buf)), left)]
		n, err := w.Write(chunk)
		h.served.Add(int64(n))
		left -= int64(n)
		if err != nil {
			return
		}
		buf = buf[:0]
	}
}

// wait waits for the stand-in's answer to end (the client closed the
// connection, or it wrote everything).
func (h *hugePrometheus) wait(t *testing.T) {
	t.Helper()
	select {
	case <-h.done:
	case <-time.After(time.Minute):
		t.Fatal("the stand-in is still writing a minute later: the client keeps reading")
	}
}

func heapInUse() (inUse, totalAlloc uint64) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse, m.TotalAlloc
}

// peakHeap samples the heap in use until stop is called, which returns
// the highest figure seen. A sample may miss the peak by what is
// allocated between two; it is logged, and bounded only loosely.
func peakHeap() (stop func() uint64) {
	var peak atomic.Uint64
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			select {
			case <-quit:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	return func() uint64 {
		close(quit)
		<-done
		return peak.Load()
	}
}

// TestResponseBytesLimited: a Prometheus answering 1 GiB (streamed, or
// announced by Content-Length) gets an ErrTooLarge query error; the
// adapter reads no more than the limit (the stand-in's count, less what
// the sockets buffer), and allocates a few times the limit at most, not
// the body.
func TestResponseBytesLimited(t *testing.T) {
	const limit = 16 << 20
	// slack is what the loopback sockets accept beyond what the client
	// read before it closed the connection.
	const slack = 16 << 20
	tests := []struct {
		name     string
		series   bool
		declare  bool
		distinct bool
		opts     func(*prom.Options)
		// limit in effect.
		limit int64
	}{
		{name: "query, streamed", opts: func(o *prom.Options) { o.MaxResponseBytes = limit }, limit: limit},
		{name: "query, Content-Length", declare: true, opts: func(o *prom.Options) { o.MaxResponseBytes = limit }, limit: limit},
		{name: "query, default limit", limit: prom.DefaultMaxResponseBytes},
		{name: "series, streamed", series: true, opts: func(o *prom.Options) { o.MaxSeriesResponseBytes = limit }, limit: limit},
		{name: "series, Content-Length", series: true, declare: true, opts: func(o *prom.Options) { o.MaxSeriesResponseBytes = limit }, limit: limit},
		{name: "series, ever new names: the shapes' bound", series: true, distinct: true, limit: prom.MaxShapeBytes},
		{name: "series, the query limit does not apply", series: true, opts: func(o *prom.Options) { o.MaxResponseBytes = limit; o.MaxSeriesResponseBytes = 2 * limit }, limit: 2 * limit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHugePrometheus(t, hugeBody, tt.declare, tt.distinct)
			u, _ := url.Parse(h.URL)
			o := prom.Options{Name: "huge", URL: u, Timeout: time.Minute, SeriesTimeout: time.Minute}
			if tt.opts != nil {
				tt.opts(&o)
			}
			c, err := prom.New(o)
			if err != nil {
				t.Fatal(err)
			}
			inUse0, alloc0 := heapInUse()
			stop := peakHeap()
			if tt.series {
				_, err = c.Series(context.Background(), []string{`{__name__=~"m.*"}`}, time.Time{}, time.Time{})
			} else {
				_, err = c.Query(context.Background(), "m", time.Time{})
			}
			h.wait(t)
			peak := stop()
			inUse1, alloc1 := heapInUse()
			served := h.served.Load()
			t.Logf("limit %d MiB: the stand-in wrote %.1f MiB of its %d MiB; heap in use %.1f MiB before, %.1f MiB at the highest sample, %.1f MiB after; %.1f MiB allocated meanwhile; error: %v",
				tt.limit>>20, float64(served)/(1<<20), hugeBody>>20, float64(inUse0)/(1<<20), float64(peak)/(1<<20), float64(inUse1)/(1<<20), float64(alloc1-alloc0)/(1<<20), err)
			if !errors.Is(err, prom.ErrTooLarge) || !errors.Is(err, prom.ErrQuery) {
				t.Errorf("error = %v, want ErrTooLarge of kind ErrQuery", err)
			}
			if served > tt.limit+slack {
				t.Errorf("the stand-in wrote %d bytes, more than the limit %d and %d of socket buffers", served, tt.limit, slack)
			}
			if tt.declare && served > slack {
				t.Errorf("the stand-in wrote %d bytes although its Content-Length was over the limit", served)
			}
			if raceflag.Enabled {
				// The race detector's runtime changes allocation (sync.Pool
				// keeps little, for one) well past these bounds: make
				// test-unit checks them in a run without -race.
				t.Log("race detector on: heap and allocation bounds not checked")
				return
			}
			// client_golang reads a query's body whole into a buffer that
			// doubles as it grows: up to four times the limit is allocated
			// in all, and at most about three times in use at once (the
			// last buffer and the one it was copied from). The body is 16
			// times the default limit, 64 times the others.
			if grown := alloc1 - alloc0; grown > uint64(6*tt.limit) {
				t.Errorf("%d bytes allocated for a limit of %d", grown, tt.limit)
			}
			if grown := int64(peak) - int64(inUse0); grown > 5*tt.limit {
				t.Errorf("heap in use grew by %d bytes for a limit of %d", grown, tt.limit)
			}
			if grown := int64(inUse1) - int64(inUse0); grown > tt.limit {
				t.Errorf("heap in use after the request grew by %d bytes: the response is still held", grown)
			}
		})
	}
}

// TestResponseBytesLimitExact: a response of exactly the limit is read; one
// byte more is not.
func TestResponseBytesLimitExact(t *testing.T) {
	body := `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"pod":"web-1"},"value":[1700000000,"1"]}]}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	tests := []struct {
		name  string
		limit int64
		want  error
	}{
		{"exactly the limit", int64(len(body)), nil},
		{"one byte over", int64(len(body)) - 1, prom.ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := prom.New(prom.Options{Name: "exact", URL: u, MaxResponseBytes: tt.limit})
			if err != nil {
				t.Fatal(err)
			}
			v, err := c.Query(context.Background(), "up", time.Time{})
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("error = %v, want %v", err, tt.want)
			}
			if tt.want == nil && len(v) != 1 {
				t.Errorf("got %v, want one sample", v)
			}
		})
	}
}

// TestMaxResponseBytesFlags: the flags reach the configuration, with the
// defaults when not given (0 leaves the default to New), and must not be
// negative.
func TestMaxResponseBytesFlags(t *testing.T) {
	tests := []struct {
		name              string
		args              []string
		wantQuery, wantSr int64
		wantErr           string
	}{
		{name: "defaults", wantQuery: prom.DefaultMaxResponseBytes, wantSr: prom.DefaultMaxSeriesResponseBytes},
		{name: "set", args: []string{"--prometheus-max-response-bytes=1048576", "--prometheus-max-series-response-bytes=2097152"}, wantQuery: 1 << 20, wantSr: 2 << 20},
		{name: "zero: the default, in New", args: []string{"--prometheus-max-response-bytes=0"}, wantQuery: 0, wantSr: prom.DefaultMaxSeriesResponseBytes},
		{name: "negative", args: []string{"--prometheus-max-series-response-bytes=-1"}, wantErr: "--prometheus-max-series-response-bytes must not be negative, got -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := prom.NewFlagOptions()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(append([]string{"--prometheus-url=http://prometheus:9090"}, tt.args...)); err != nil {
				t.Fatal(err)
			}
			errs := o.Validate()
			if tt.wantErr != "" {
				if len(errs) != 1 || errs[0].Error() != tt.wantErr {
					t.Fatalf("Validate = %v, want %q", errs, tt.wantErr)
				}
				return
			}
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			cfg, err := o.Config()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.MaxResponseBytes != tt.wantQuery || cfg.MaxSeriesResponseBytes != tt.wantSr {
				t.Errorf("limits %d, %d; want %d, %d", cfg.MaxResponseBytes, cfg.MaxSeriesResponseBytes, tt.wantQuery, tt.wantSr)
			}
		})
	}
}
