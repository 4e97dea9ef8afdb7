// Package harness starts and stops a real local control plane for Tidal's
// integration and e2e tests and for `make sandbox`: etcd, kube-apiserver with
// the aggregation layer, kube-controller-manager (workload controllers, and
// optionally a second one running only the upstream HPA controller),
// kube-scheduler, kwok with a fake node, and Prometheus scraping an exporter
// whose series the caller controls.
//
// Everything listens on 127.0.0.1 on ports chosen free at start, so several
// harnesses can run side by side. Binaries come from `make tools`
// (test/tools/install.sh).
package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tidal-autoscaler/tidal/test/exporter"
)

// Options choose which parts to start. The apiserver and etcd always run.
type Options struct {
	// Dir holds certificates, data and logs. Empty: a new temporary folder,
	// removed by Stop unless KeepDir is set.
	Dir     string
	KeepDir bool
	// ToolsDir holds the binaries; empty: $TIDAL_TOOLS_DIR, else the
	// repository's _output/tools.
	ToolsDir string

	// ControllerManager runs kube-controller-manager with the workload
	// controllers and without the HPA controller.
	ControllerManager bool
	// ControllerManagerArgs are extra flags for that controller manager,
	// such as a higher --kube-api-qps for creating thousands of pods.
	ControllerManagerArgs []string
	// Scheduler runs kube-scheduler so pods of Deployments land on the kwok node.
	Scheduler bool
	// Kwok runs kwok and creates one fake node; its pods become Running and Ready.
	Kwok bool
	// Prometheus runs Prometheus scraping the harness's exporter every second.
	Prometheus bool
	// HPAController runs a second kube-controller-manager with only the
	// upstream HPA controller (process HPAControllerProcess): the oracle
	// for conformance tests.
	HPAController bool
	// HPAControllerArgs are extra flags for that controller manager, such as
	// --horizontal-pod-autoscaler-sync-period=5s.
	HPAControllerArgs []string
	// FeatureGates are passed as --feature-gates to kube-apiserver and both
	// controller managers, e.g. "HPAScaleToZero=true".
	FeatureGates []string
	// APIServerArgs are extra kube-apiserver flags.
	APIServerArgs []string

	// Logf reports progress; nil is silent.
	Logf func(format string, args ...any)
}

// Full returns options that start every part except the HPA oracle.
func Full() Options {
	return Options{ControllerManager: true, Scheduler: true, Kwok: true, Prometheus: true}
}

// Harness is a running control plane.
type Harness struct {
	opts  Options
	tools string

	// Dir holds certs/, data/, logs/ and the kubeconfigs.
	Dir string
	// APIServerURL is https://127.0.0.1:PORT.
	APIServerURL string
	// EtcdDataDir is etcd's --data-dir (its database is
	// member/snap/db there).
	EtcdDataDir string
	// AdminKubeconfig is a kubeconfig for a system:masters user.
	AdminKubeconfig string
	// Admin is the admin's rest config and Client its clientset.
	Admin  *rest.Config
	Client kubernetes.Interface
	// CA signs client and serving certificates that the apiserver trusts;
	// FrontProxyCA signs the aggregator's proxy client certificate.
	CA           *CA
	FrontProxyCA *CA
	// NodeName is the kwok node, when Kwok is on.
	NodeName string
	// PrometheusURL is http://127.0.0.1:PORT when Prometheus is on, and
	// Exporter the series Prometheus scrapes.
	PrometheusURL string
	Exporter      *exporter.Exporter

	mu sync.Mutex
	// prometheus is the Prometheus process, and scrapeJobs the jobs added
	// beside the exporter's (AddScrapeJob).
	prometheus *Process
	scrapeJobs []ScrapeJob
	procs      []*Process
	ports      []int
}

// StartT starts a harness for a test and stops it when the test ends, passed
// or failed. Logs of every process are kept when the test failed.
func StartT(t testing.TB, opts Options) *Harness {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	h, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("start harness: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("harness files kept in %s", h.Dir)
			h.opts.KeepDir = true
		}
		if err := h.Stop(); err != nil {
			t.Errorf("stop harness: %v", err)
		}
	})
	return h
}

// Start starts the parts opts asks for and returns when each is ready. On
// error everything already started is stopped.
func Start(ctx context.Context, opts Options) (h *Harness, err error) {
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	tools, err := findTools(opts.ToolsDir)
	if err != nil {
		return nil, err
	}
	dir := opts.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "tidal-harness-"); err != nil {
			return nil, err
		}
	} else {
		opts.KeepDir = true
	}
	h = &Harness{opts: opts, tools: tools, Dir: dir}
	defer func() {
		if err != nil {
			h.opts.KeepDir = true
			if stopErr := h.Stop(); stopErr != nil {
				err = errors.Join(err, stopErr)
			}
			err = fmt.Errorf("%w (files and logs in %s)", err, dir)
		}
	}()
	for _, sub := range []string{"certs", "data", "logs"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return h, err
		}
	}
	start := time.Now()

	// Prometheus is slowest to take its first sample: start it first and
	// let it come up while the control plane starts.
	promReady := make(chan error, 1)
	if opts.Prometheus {
		go func() { promReady <- h.startPrometheus(ctx) }()
	} else {
		promReady <- nil
	}
	if err := h.writePKI(); err != nil {
		return h, err
	}
	etcdURL, err := h.startEtcd(ctx)
	if err != nil {
		return h, err
	}
	if err := h.startAPIServer(ctx, etcdURL); err != nil {
		return h, err
	}
	if err := h.bootstrap(ctx); err != nil {
		return h, err
	}
	if opts.ControllerManager {
		if err := h.startControllerManager(ctx, "kube-controller-manager", workloadControllers, opts.ControllerManagerArgs); err != nil {
			return h, err
		}
	}
	if opts.HPAController {
		if err := h.startControllerManager(ctx, HPAControllerProcess, []string{"horizontal-pod-autoscaler-controller"}, opts.HPAControllerArgs); err != nil {
			return h, err
		}
	}
	if opts.Scheduler {
		if err := h.startScheduler(ctx); err != nil {
			return h, err
		}
	}
	if opts.Kwok {
		if err := h.startKwok(ctx); err != nil {
			return h, err
		}
	}
	if err := <-promReady; err != nil {
		return h, err
	}
	opts.Logf("harness: ready in %s (apiserver %s, prometheus %q, files %s)",
		time.Since(start).Round(10*time.Millisecond), h.APIServerURL, h.PrometheusURL, dir)
	return h, nil
}

// Stop stops every process, newest first, and removes Dir unless kept. It is
// safe to call more than once.
func (h *Harness) Stop() error {
	h.mu.Lock()
	procs := h.procs
	h.procs = nil
	h.mu.Unlock()
	var errs []error
	for i := len(procs) - 1; i >= 0; i-- {
		if err := procs[i].stop(15 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	if h.Exporter != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := h.Exporter.Stop(ctx); err != nil {
			errs = append(errs, err)
		}
		cancel()
	}
	if !h.opts.KeepDir && h.Dir != "" {
		if err := os.RemoveAll(h.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// StopShared stops a harness that a package's TestMain shares between its
// tests. Its files stay when something failed (their directory is named on
// stderr, to read the servers' logs) and go with it otherwise, whatever
// Options.KeepDir said.
func (h *Harness) StopShared(failed bool) {
	h.opts.KeepDir = failed
	if failed {
		fmt.Fprintf(os.Stderr, "harness files kept in %s\n", h.Dir)
	}
	if err := h.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop harness:", err)
	}
}

// PIDs returns the process ids of the running servers, by name.
func (h *Harness) PIDs() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]int{}
	for _, p := range h.procs {
		out[p.name] = p.PID()
	}
	return out
}

// Ports returns every port the harness's servers listen on.
func (h *Harness) Ports() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]int(nil), h.ports...)
}

// LogPath returns the log file of the named process (e.g. "kube-apiserver").
func (h *Harness) LogPath(name string) string {
	return filepath.Join(h.Dir, "logs", name+".log")
}

func (h *Harness) path(parts ...string) string {
	return filepath.Join(append([]string{h.Dir}, parts...)...)
}

func (h *Harness) bin(name string) string { return filepath.Join(h.tools, name) }

// run starts a process and records it for Stop.
func (h *Harness) run(name, bin string, args []string, ports ...int) (*Process, error) {
	return h.runWithEnv(name, bin, args, nil, ports...)
}

// runWithEnv is run with env (NAME=VALUE) added to the harness's own.
func (h *Harness) runWithEnv(name, bin string, args, env []string, ports ...int) (*Process, error) {
	p, err := startProcess(name, h.path("logs"), bin, args, env)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.procs = append(h.procs, p)
	h.ports = append(h.ports, ports...)
	h.mu.Unlock()
	return p, nil
}

// waitFor polls check until it returns nil, the process exits, or ctx ends.
func waitFor(ctx context.Context, p *Process, what string, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		if p != nil {
			if done, werr := p.exited(); done {
				return fmt.Errorf("%s exited before it was ready (%v); log %s ends with:\n%s", p.name, werr, p.logPath, p.LogTail())
			}
		}
		if last = check(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			tail := ""
			if p != nil {
				tail = fmt.Sprintf("; log %s ends with:\n%s", p.logPath, p.LogTail())
			}
			return fmt.Errorf("%s not ready after %s: %v%s", what, timeout, last, tail)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// findTools locates the folder test/tools/install.sh filled.
func findTools(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv("TIDAL_TOOLS_DIR")
	}
	if dir == "" {
		root, err := RepoRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "_output", "tools")
	}
	var missing []string
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "prometheus", "kwok-stages.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("test tools missing from %s: %s; run `make tools` first (it builds them once into a cache)",
			dir, strings.Join(missing, ", "))
	}
	return filepath.EvalSymlinks(dir)
}

// RepoRoot returns the folder of Tidal's go.mod, searching up from the
// working directory (tests run in their package's folder).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(data), "module github.com/tidal-autoscaler/tidal\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find Tidal's go.mod above the working directory; run from inside the repository or set TIDAL_TOOLS_DIR")
		}
		dir = parent
	}
}

func hostPort(port int) string { return net.JoinHostPort("127.0.0.1", fmt.Sprint(port)) }

// StartProcess starts an extra server (such as `tidal adapter`) under the
// harness: its log goes to LOGDIR/NAME.log, it gets SIGKILL if the test
// process dies, and Stop stops it before the control plane. ports are
// recorded for leak checks.
func (h *Harness) StartProcess(name, bin string, args []string, ports ...int) (*Process, error) {
	return h.run(name, bin, args, ports...)
}

// WaitReady polls check until it succeeds, p exits (its log tail is in the
// error), or timeout passes.
func WaitReady(ctx context.Context, p *Process, what string, timeout time.Duration, check func(context.Context) error) error {
	return waitFor(ctx, p, what, timeout, check)
}

// FreePort returns a port on 127.0.0.1 that was free a moment ago. A
// server started on it may find it taken: OnFreePorts starts it again.
func FreePort() (int, error) { return freePort() }

// OnFreePorts runs start with n distinct ports on 127.0.0.1 that were free
// a moment ago, and again on new ones (3 tries in all) when start's error
// says a port was taken before the server bound it ("address already in
// use", e.g. in the log tail WaitReady quotes).
func OnFreePorts(n int, start func(ports []int) error) error { return onFreePorts(n, start) }

// ToolsDir is the folder of the binaries the harness runs (kubectl and helm too).
func (h *Harness) ToolsDir() string { return h.tools }
