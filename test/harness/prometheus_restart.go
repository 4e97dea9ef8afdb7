package harness

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// StopPrometheus stops the harness's Prometheus, as an outage would, and
// returns a function that starts it again with the same flags (same port,
// same data directory, so its series survive) and waits until it is ready.
func (h *Harness) StopPrometheus() (start func(ctx context.Context) error, err error) {
	h.mu.Lock()
	var p *Process
	for i, proc := range h.procs {
		if proc.name == "prometheus" {
			p = proc
			h.procs = append(h.procs[:i:i], h.procs[i+1:]...)
			break
		}
	}
	url := h.PrometheusURL
	h.mu.Unlock()
	if p == nil {
		return nil, errors.New("prometheus is not running under this harness")
	}
	args := append([]string(nil), p.cmd.Args[1:]...)
	bin := p.cmd.Path
	if err := p.stop(15 * time.Second); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		np, err := h.run("prometheus", bin, args)
		if err != nil {
			return err
		}
		return waitFor(ctx, np, "prometheus", 60*time.Second, func(ctx context.Context) error {
			return httpOK(ctx, http.DefaultClient, url+"/-/ready")
		})
	}, nil
}

// RestartPrometheus stops Prometheus and starts it again on the same port
// with the same data.
func (h *Harness) RestartPrometheus(ctx context.Context) error {
	start, err := h.StopPrometheus()
	if err != nil {
		return err
	}
	return start(ctx)
}
