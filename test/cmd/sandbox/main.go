// Command sandbox runs Tidal's demo on this machine: the local control plane
// and Prometheus (test/harness), `tidal adapter` with the demo app's rule
// file (test/sandbox/rules.yaml), `tidal autoscaler` (mode crd), a demo
// Deployment run by kwok, a HorizontalAutoscaler on CPU, requests per
// second and queue length, and a load simulator that follows a demand
// curve. It prints a live view, writes a report folder under
// _output/sandbox/ and stops everything at the end of the curve (with
// --keep: on Ctrl-C). --dry-run and --fallback show those two fields.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/tidal-autoscaler/tidal/test/harness"
	"github.com/tidal-autoscaler/tidal/test/sandbox"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox:", err)
		os.Exit(1)
	}
}

func run() error {
	dir := flag.String("dir", "", "folder for the control plane's certificates, data and logs (default: _output/sandbox/cluster, wiped at start)")
	reports := flag.String("report-dir", "", "folder for report-<timestamp>/ folders (default: _output/sandbox)")
	duration := flag.Duration("duration", 270*time.Second, "length of the demand curve (baseline, ramp, batch, burst, quiet); phases scale with it")
	every := flag.Duration("print-every", 5*time.Second, "period of the live view")
	keep := flag.Bool("keep", false, "keep everything running after the curve ends (demand stays quiet) until Ctrl-C, to use kubectl against it")
	verbose := flag.Bool("v", false, "print the harness's progress")
	dryRun := flag.Bool("dry-run", false, "set the demo autoscaler's spec.dryRun: it decides and reports the counts it would write, and the Deployment keeps its replicas")
	fallback := flag.Bool("fallback", false, fmt.Sprintf("set spec.fallback (failureThreshold %d, replicas %d, behavior static) and stop Prometheus for a while in the quiet phase, so every metric fails (with the default duration: %s)",
		sandbox.FallbackThreshold, sandbox.FallbackReplicas, outage(270*time.Second)))
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q: every option is a flag, e.g. --duration=120s (see -h)", flag.Args())
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	if *dir == "" {
		*dir = filepath.Join(root, "_output", "sandbox", "cluster")
	}
	if *reports == "" {
		*reports = filepath.Join(root, "_output", "sandbox")
	}
	cfg := sandbox.Config{
		Dir: *dir, ReportRoot: *reports, Duration: *duration, PrintEvery: *every, Keep: *keep,
		DryRun: *dryRun, Fallback: *fallback,
	}
	if *duration < 30*time.Second {
		return fmt.Errorf("--duration=%s is too short for the curve's phases and the autoscaler's 5s sync period: use 30s or more", *duration)
	}
	if *verbose {
		cfg.Logf = func(format string, args ...any) { fmt.Printf(format+"\n", args...) }
	}
	// The tidal binary the sandbox builds is removed when it ends.
	defer func() { _ = harness.RemoveTidalBinary() }()
	_, err = sandbox.Run(ctx, cfg)
	return err
}

// outage describes the --fallback outage window of a curve.
func outage(d time.Duration) string {
	from, to := sandbox.OutageWindow(d)
	return fmt.Sprintf("from %s to %s", from, to)
}
