package harness

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"
)

// StopPrometheus stops the harness's Prometheus, as an outage would, and
// returns a function that starts it again with the same flags (same port,
// same data directory, so its series survive) and waits until it is ready.
func (h *Harness) StopPrometheus() (start func(ctx context.Context) error, err error) {
	url := h.PrometheusURL
	return h.stopComponent("prometheus", func(ctx context.Context) error {
		return httpOK(ctx, http.DefaultClient, url+"/-/ready")
	})
}

// StopAPIServer stops kube-apiserver, as an outage would (etcd and every
// other process keep running), and returns a function that starts it
// again with the same flags (same port, same etcd) and waits until its
// /readyz answers.
func (h *Harness) StopAPIServer() (start func(ctx context.Context) error, err error) {
	client, err := h.adminHTTPClient()
	if err != nil {
		return nil, err
	}
	url := h.APIServerURL
	return h.stopComponent("kube-apiserver", func(ctx context.Context) error {
		return httpOK(ctx, client, url+"/readyz")
	})
}

// stopComponent stops the process name and returns a function that runs
// it again with the same binary and flags and waits until ready succeeds.
func (h *Harness) stopComponent(name string, ready func(ctx context.Context) error) (start func(ctx context.Context) error, err error) {
	h.mu.Lock()
	var p *Process
	for i, proc := range h.procs {
		if proc.name == name {
			p = proc
			h.procs = append(h.procs[:i:i], h.procs[i+1:]...)
			break
		}
	}
	h.mu.Unlock()
	if p == nil {
		return nil, errors.New(name + " is not running under this harness")
	}
	args := append([]string(nil), p.cmd.Args[1:]...)
	bin := p.cmd.Path
	if err := p.stop(15 * time.Second); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		np, err := h.run(name, bin, args)
		if err != nil {
			return err
		}
		return waitFor(ctx, np, name, 60*time.Second, ready)
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

// StopHPAController stops the kube-controller-manager that runs only the
// HPA controller (Options.HPAController), so that Tidal in native mode is
// the only writer of the autoscaling/v2 HPAs, and returns a function that
// starts it again with the same flags and waits until its /healthz answers.
func (h *Harness) StopHPAController() (start func(ctx context.Context) error, err error) {
	port, err := h.SecurePort(HPAControllerProcess)
	if err != nil {
		return nil, err
	}
	client, err := insecureLocalClient()
	if err != nil {
		return nil, err
	}
	return h.stopComponent(HPAControllerProcess, kubeComponentReady(client, port))
}

// SecurePort is the --secure-port of the harness's process name, for
// reaching its /healthz or /debug/pprof.
func (h *Harness) SecurePort(name string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range h.procs {
		if p.name != name {
			continue
		}
		for _, a := range p.cmd.Args {
			if v, ok := strings.CutPrefix(a, "--secure-port="); ok {
				return v, nil
			}
		}
	}
	return "", errors.New(name + " is not running under this harness, or has no --secure-port")
}
