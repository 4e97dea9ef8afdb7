package sandbox

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/tidal-autoscaler/tidal/test/harness"
)

// outage stops Prometheus during OutageWindow in a --fallback run, so every
// metric of the demo autoscaler fails, and starts it again (same port and
// data) at the window's end.
type outage struct {
	h        *harness.Harness
	out      io.Writer
	enabled  bool
	from, to time.Duration

	mu      sync.Mutex
	stopped bool // Prometheus was stopped
	start   func(context.Context) error
	done    chan struct{} // closed when the restart ended
	seen    Outage
	// upAt is when Prometheus was ready again.
	upAt time.Time
}

func newOutage(h *harness.Harness, cfg Config, out io.Writer) *outage {
	o := &outage{h: h, out: out, enabled: cfg.Fallback, done: make(chan struct{})}
	o.from, o.to = OutageWindow(cfg.Duration)
	return o
}

// at stops or restarts Prometheus as t requires and says whether it is
// down (stopped and not yet ready again).
func (o *outage) at(ctx context.Context, t time.Duration) bool {
	if !o.enabled {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case !o.stopped && t >= o.from && t < o.to:
		o.stopped = true
		o.seen.From = t
		start, err := o.h.StopPrometheus()
		if err != nil {
			fmt.Fprintln(o.out, "sandbox: could not stop Prometheus:", err)
			close(o.done)
			return false
		}
		fmt.Fprintf(o.out, "sandbox: %3.0fs Prometheus stopped (fallback demo): every metric fails until %.0fs\n", t.Seconds(), o.to.Seconds())
		o.start = start
	case o.start != nil && t >= o.to:
		o.restart(ctx, t)
	}
	return o.stopped && !o.closed()
}

// restart starts Prometheus again in the background; o.mu is held.
func (o *outage) restart(ctx context.Context, t time.Duration) {
	start := o.start
	o.start = nil
	go func() {
		defer close(o.done)
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 90*time.Second)
		defer cancel()
		err := start(sctx)
		o.mu.Lock()
		defer o.mu.Unlock()
		if err != nil {
			fmt.Fprintln(o.out, "sandbox: could not start Prometheus again:", err)
			return
		}
		o.seen.To = t
		o.upAt = time.Now()
		fmt.Fprintf(o.out, "sandbox: %3.0fs Prometheus started again\n", t.Seconds())
	}()
}

func (o *outage) closed() bool {
	select {
	case <-o.done:
		return true
	default:
		return false
	}
}

// finish starts Prometheus again if the run ended during the outage, waits
// until it is up, and returns the outage seen and when Prometheus was up
// again (zero without an outage).
func (o *outage) finish(t time.Duration) (Outage, time.Time) {
	if !o.enabled {
		return Outage{}, time.Time{}
	}
	o.mu.Lock()
	switch {
	case o.start != nil:
		o.restart(context.Background(), t)
	case !o.stopped:
		o.mu.Unlock()
		return Outage{}, time.Time{}
	}
	o.mu.Unlock()
	<-o.done
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.seen, o.upAt
}
