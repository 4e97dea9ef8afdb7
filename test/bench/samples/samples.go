// Package samples writes and reads the benchmarks' machine-readable
// figures: with TIDAL_BENCH_SAMPLES=FILE set, every measured figure of
// every round is appended to FILE as one JSON line, which test/cmd/bench
// reads to compute medians, spreads and ratios. Unset, nothing is written.
package samples

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
)

// Env names the file samples are appended to.
const Env = "TIDAL_BENCH_SAMPLES"

// The metrics of the fleet rows' processes besides the controller,
// kube-apiserver and etcd, written by test/bench/autoscaler and named by
// test/cmd/bench when the machine bounds a side: CPU-seconds per period.
const (
	KwokCPU                = "kwok-cpu-per-period"
	WorkloadControllersCPU = "workload-controllers-cpu-per-period"
	BenchmarkProcessCPU    = "benchmark-cpu-per-period"
)

// Sample is one figure of one side in one round of a benchmark row.
type Sample struct {
	// Row names what was measured, as the benchmark knows it (e.g.
	// "pods/aggregator", "discovery/100000", "fleet"); Side who (tidal,
	// prometheus-adapter, noop, kcm...); Round which repetition, from 1.
	Row    string  `json:"row"`
	Side   string  `json:"side"`
	Round  int     `json:"round"`
	Metric string  `json:"metric"`
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"`
}

var mu sync.Mutex

// Record appends s to $TIDAL_BENCH_SAMPLES, when set. A write error is
// returned so the benchmark can report it; the figure is in its log too.
func Record(s Sample) error {
	file := os.Getenv(Env)
	if file == "" {
		return nil
	}
	line, err := json.Marshal(s)
	if err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	f, err := os.OpenFile(file, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Read parses JSON lines of samples.
func Read(r io.Reader) ([]Sample, error) {
	var out []Sample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var s Sample
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			return out, fmt.Errorf("line %d: %w", n, err)
		}
		out = append(out, s)
	}
	return out, sc.Err()
}
