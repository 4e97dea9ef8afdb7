package adapter

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/tidal-autoscaler/tidal/test/harness"
)

// profiler fetches a CPU profile of an adapter while the load runs, when
// TIDAL_BENCH_PPROF names a directory. The adapter serves /debug/pprof on
// its secure port to authorized identities (the harness admin) when
// started with --profiling, which startServer adds.
type profiler struct {
	done chan error
	file string
}

// startProfile starts a CPU profile of TIDAL_BENCH_PPROF_SECONDS (5) into
// $TIDAL_BENCH_PPROF/NAME.cpu.pprof; nil when TIDAL_BENCH_PPROF is unset.
func startProfile(ctx context.Context, b *testing.B, h *harness.Harness, base, name string) *profiler {
	dir := os.Getenv("TIDAL_BENCH_PPROF")
	if dir == "" {
		return nil
	}
	seconds := envInt("TIDAL_BENCH_PPROF_SECONDS", 5)
	p := &profiler{done: make(chan error, 1), file: filepath.Join(dir, strings.NewReplacer("/", "_").Replace(name)+".cpu.pprof")}
	c := directClient(b, h, base)
	c.Timeout = time.Duration(seconds+30) * time.Second
	go func() {
		p.done <- fetchProfile(ctx, c, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, seconds), p.file)
	}()
	return p
}

// startAPIServerProfile does the same for kube-apiserver (profiling on
// with TIDAL_BENCH_PPROF set, see setup), into NAME.kube-apiserver.cpu.pprof:
// what proxying one request through the aggregator costs.
func startAPIServerProfile(ctx context.Context, b *testing.B, h *harness.Harness, name string) *profiler {
	dir := os.Getenv("TIDAL_BENCH_PPROF")
	if dir == "" {
		return nil
	}
	seconds := envInt("TIDAL_BENCH_PPROF_SECONDS", 5)
	p := &profiler{done: make(chan error, 1), file: filepath.Join(dir, strings.NewReplacer("/", "_").Replace(name)+".kube-apiserver.cpu.pprof")}
	c, err := rest.HTTPClientFor(h.Admin)
	if err != nil {
		b.Fatal(err)
	}
	c.Timeout = time.Duration(seconds+30) * time.Second
	go func() {
		p.done <- fetchProfile(ctx, c, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", h.APIServerURL, seconds), p.file)
	}()
	return p
}

// wait waits for the profile and logs where it is.
func (p *profiler) wait(b *testing.B) {
	if p == nil {
		return
	}
	if err := <-p.done; err != nil {
		b.Logf("CPU profile: %v", err)
		return
	}
	b.Logf("CPU profile: %s", p.file)
}

func fetchProfile(ctx context.Context, c *http.Client, url, file string) error {
	body, err := get(ctx, c, url)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	return os.WriteFile(file, body, 0o644)
}
