// Command sandbox starts the local control plane and Prometheus on this
// machine and keeps them running until Ctrl-C, printing how to reach them.
//
// It is the first step of `make sandbox`: the demo workload, the load
// simulator and Tidal itself join it as those parts land.
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
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox:", err)
		os.Exit(1)
	}
}

func run() error {
	dir := flag.String("dir", "", "folder for certificates, data and logs (default: _output/sandbox, wiped at start)")
	hpa := flag.Bool("with-upstream-hpa", false, "also run kube-controller-manager's own HPA controller")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if *dir == "" {
		root, err := harness.RepoRoot()
		if err != nil {
			return err
		}
		*dir = filepath.Join(root, "_output", "sandbox")
	}
	// A fresh folder each run: etcd data from a previous run would hold
	// certificates and tokens this run's CA no longer signs.
	if err := os.RemoveAll(*dir); err != nil {
		return err
	}
	opts := harness.Full()
	opts.Dir = *dir
	opts.HPAController = *hpa
	opts.Logf = func(format string, args ...any) { fmt.Printf(format+"\n", args...) }

	fmt.Println("sandbox: starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and Prometheus on 127.0.0.1 ...")
	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	h, err := harness.Start(startCtx, opts)
	cancel()
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("sandbox: stopping ...")
		if err := h.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "sandbox: stop:", err)
		}
	}()
	fmt.Printf(`
The sandbox is up. In another shell:

  export KUBECONFIG=%s
  export PATH=%s:$PATH
  kubectl get nodes
  curl -s '%s/api/v1/query?query=up'

Logs: %s
Ctrl-C stops everything.
`, h.AdminKubeconfig, h.ToolsDir(), h.PrometheusURL, filepath.Join(h.Dir, "logs"))
	<-ctx.Done()
	return nil
}
