// Package adapter benchmarks `tidal adapter` on the real harness (etcd,
// kube-apiserver with the aggregator, controllers, kwok, Prometheus), and,
// when asked, prometheus-adapter v0.12.0 side by side in the same run:
//
//   - BenchmarkPodsCustomMetric: a Deployment of kwok pods with one series
//     per pod; 32 clients as the HPA's identity, through the aggregator,
//     GET pods/* of a custom metric with a label selector, bounded in count
//     and time. Reports requests/s (rps), p50-ms, p99-ms, adapter CPU
//     milliseconds per request (cpu-ms/req, from /proc/PID/stat), errors.
//   - BenchmarkPodMetrics: the same pods, each with cAdvisor-style cpu and
//     memory series, and exporter.ResourceRules (the adapter e2e tests'
//     too); 32 clients as the HPA's identity GET metrics.k8s.io PodMetrics
//     of the pods by label selector. Same figures.
//   - Both ask for protobuf, as kube-controller-manager's HPA clients do
//     (TIDAL_BENCH_ACCEPT=json: JSON), and check that they got it. Each
//     runs by two routes: through the aggregator, and directly to the
//     adapter's port with the same client certificate, which leaves
//     kube-apiserver's proxying out. Both also log the CPU per request of
//     every other process on the machine.
//   - BenchmarkDiscoveryMemory: Prometheus loaded with NAMES x LABELSETS
//     series; reports the adapter's RSS growth from idle to after
//     discovery (rss-delta-MiB, from /proc/PID/status VmRSS; peak-delta-MiB
//     from VmHWM), and its first relist time (its own
//     tidal_adapter_discovery_duration_seconds) over the raw
//     /api/v1/series call of the same seriesQuery timed right after it
//     (relist-ratio).
//
// Run (the harness binaries come from `make tools`):
//
//	TIDAL_TOOLS_DIR=$(readlink -f _output/tools) go test -run '^$' -bench . -benchtime 1x -timeout 30m ./test/bench/adapter/
//
// Knobs (environment): TIDAL_BENCH_PODS (100), TIDAL_BENCH_CLIENTS (32),
// TIDAL_BENCH_REQUESTS (5000, per server), TIDAL_BENCH_DURATION (30s, per
// server), TIDAL_BENCH_NAMES (1000), TIDAL_BENCH_LABELSETS (100),
// TIDAL_BENCH_ACCEPT (protobuf; json), TIDAL_BENCH_ROUTES
// (aggregator,direct), TIDAL_BENCH_BASELINE (another
// tidal binary, run as "baseline" right after this tree's: before/after
// ratios from one run), TIDAL_BENCH_PEER (a prometheus-adapter binary, or "build" to build it
// from test/bench/peer; unset: tidal only), TIDAL_BENCH_PEER_ARGS (extra
// flags for prometheus-adapter, space-separated, e.g. "--client-qps=1000
// --client-burst=2000" to lift the 5 QPS limit of the client its pods/*
// requests list pods with), TIDAL_BENCH_PPROF (a directory:
// a CPU profile of tidal during each load, and of kube-apiserver during
// each load through the aggregator, TIDAL_BENCH_PPROF_SECONDS long,
// default 5), TIDAL_BENCH_NOOP (the no-op aggregated server,
// test/cmd/noopadapter: a binary, or "build"; run as a third side, the
// ceiling of the apiserver stack), TIDAL_BENCH_ROUNDS (1: how many times
// the sides take turns, A B C A B C ...), TIDAL_BENCH_SAMPLES (a file:
// every round's figures appended as JSON lines, see test/bench/samples).
//
// Figures depend on the machine and its load; nothing here asserts on
// time. Compare runs with benchstat.
package adapter

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tidal-autoscaler/tidal/test/harness"
)

// env reads an integer or duration knob.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

var (
	shared struct {
		once sync.Once
		h    *harness.Harness
		bin  string
		peer string
		err  error
	}
)

// TestMain stops the shared harness after the benchmarks.
func TestMain(m *testing.M) {
	code := harness.RunTests(m)
	if shared.h != nil {
		if err := shared.h.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop harness: %v\n", err)
		}
	}
	os.Exit(code)
}

// setup starts the harness and builds the binaries once per test binary.
func setup(b *testing.B) (*harness.Harness, string, string) {
	b.Helper()
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		opts := harness.Full()
		opts.Logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
		if os.Getenv("TIDAL_BENCH_PPROF") != "" {
			opts.APIServerArgs = append(opts.APIServerArgs, "--profiling=true")
		}
		if shared.bin, shared.err = harness.TidalBinary(ctx); shared.err != nil {
			return
		}
		if shared.peer, shared.err = peerBinary(ctx); shared.err != nil {
			return
		}
		shared.h, shared.err = harness.Start(ctx, opts)
	})
	if shared.err != nil {
		b.Fatal(shared.err)
	}
	return shared.h, shared.bin, shared.peer
}

// peerBinary returns prometheus-adapter's binary per TIDAL_BENCH_PEER:
// a path, "build" (built from test/bench/peer, which pins v0.12.0), or ""
// for none.
func peerBinary(ctx context.Context) (string, error) {
	v := os.Getenv("TIDAL_BENCH_PEER")
	if v != "build" {
		return v, nil
	}
	root, err := harness.RepoRoot()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "tidal-bench-peer-")
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "prometheus-adapter")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "sigs.k8s.io/prometheus-adapter/cmd/adapter")
	cmd.Dir = filepath.Join(root, "test", "bench", "peer")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building prometheus-adapter in test/bench/peer: %w\n%s", err, msg)
	}
	return out, nil
}

// server is one adapter under test.
type server struct {
	name string
	pid  int
	// url is https://127.0.0.1:PORT.
	url string
	// stop stops it before the benchmark's end, when set.
	stop func()
}

// get GETs url and returns the body; any status but 200 is an error that
// quotes the start of the body.
func get(ctx context.Context, c *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %.300s", url, resp.Status, body)
	}
	return body, nil
}

func httpGetOK(ctx context.Context, c *http.Client, url string) error {
	_, err := get(ctx, c, url)
	return err
}
