package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tidal-autoscaler/tidal/test/harness"
)

// tidalScrapeInterval is how often Prometheus scrapes the Tidal components
// and kube-apiserver; the dashboard's $__rate_interval follows from it.
const tidalScrapeInterval = 5

// ScrapeTarget is one job Prometheus adds for the dashboard.
type ScrapeTarget struct {
	// Job is the job label: the Service name, as the chart's
	// ServiceMonitor sets it.
	Job  string
	Addr string
	// Labels are the target labels a ServiceMonitor would add.
	Labels map[string]string
	// CAFile verifies the server; empty skips verification (Tidal's
	// components serve /metrics with a self-signed certificate unless
	// given one, as in the harness).
	CAFile string
}

// ScrapeJobs renders the scrape_configs entries for targets: HTTPS with
// the client certificate, honor_labels as the chart's ServiceMonitors set
// it (the autoscaler's series keep their own namespace label).
func ScrapeJobs(targets []ScrapeTarget, certFile, keyFile string) string {
	var b strings.Builder
	for _, t := range targets {
		fmt.Fprintf(&b, "- job_name: %q\n  scheme: https\n  metrics_path: /metrics\n", t.Job)
		fmt.Fprintf(&b, "  scrape_interval: %ds\n  scrape_timeout: %ds\n  honor_labels: true\n", tidalScrapeInterval, tidalScrapeInterval-1)
		fmt.Fprintf(&b, "  tls_config:\n    cert_file: %q\n    key_file: %q\n", certFile, keyFile)
		if t.CAFile != "" {
			fmt.Fprintf(&b, "    ca_file: %q\n", t.CAFile)
		} else {
			b.WriteString("    insecure_skip_verify: true\n")
		}
		fmt.Fprintf(&b, "  static_configs:\n  - targets: [%q]\n", t.Addr)
		if len(t.Labels) > 0 {
			b.WriteString("    labels:\n")
			for _, k := range sortedKeys(t.Labels) {
				fmt.Fprintf(&b, "      %s: %q\n", k, t.Labels[k])
			}
		}
	}
	return b.String()
}

// scrapeTidal adds the adapter, the autoscaler and kube-apiserver to the
// harness Prometheus's configuration and restarts it (same port and data)
// to load it.
func scrapeTidal(ctx context.Context, h *harness.Harness, adapterPort, autoscalerPort int) error {
	dir := filepath.Join(h.Dir, "sandbox-scrape")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tc := h.Admin.TLSClientConfig
	if len(tc.CertData) == 0 || len(tc.KeyData) == 0 || len(tc.CAData) == 0 {
		return fmt.Errorf("the harness admin kubeconfig %s has no embedded client certificate, key and CA: Prometheus cannot scrape with it", h.AdminKubeconfig)
	}
	cert, key, ca := filepath.Join(dir, "admin.crt"), filepath.Join(dir, "admin.key"), filepath.Join(dir, "ca.crt")
	for f, data := range map[string][]byte{cert: tc.CertData, key: tc.KeyData, ca: tc.CAData} {
		if err := os.WriteFile(f, data, 0o600); err != nil {
			return err
		}
	}
	apiserver := strings.TrimPrefix(h.APIServerURL, "https://")
	jobs := ScrapeJobs([]ScrapeTarget{
		{Job: "tidal-adapter", Addr: fmt.Sprintf("127.0.0.1:%d", adapterPort),
			Labels: map[string]string{"namespace": "tidal-system", "service": "tidal-adapter", "endpoint": "https", "container": "adapter"}},
		{Job: "tidal-autoscaler", Addr: fmt.Sprintf("127.0.0.1:%d", autoscalerPort),
			Labels: map[string]string{"namespace": "tidal-system", "service": "tidal-autoscaler", "endpoint": "https", "container": "autoscaler"}},
		{Job: "apiserver", Addr: apiserver, CAFile: ca,
			Labels: map[string]string{"namespace": "default", "service": "kubernetes", "endpoint": "https"}},
	}, cert, key)
	config := filepath.Join(h.Dir, "prometheus.yml")
	old, err := os.ReadFile(config)
	if err != nil {
		return fmt.Errorf("the harness Prometheus configuration: %w", err)
	}
	if !strings.HasSuffix(strings.TrimSpace(string(old)), "]") || !strings.Contains(string(old), "scrape_configs:") {
		return fmt.Errorf("%s does not end with its scrape_configs list as the sandbox expects; add the jobs by hand:\n%s", config, jobs)
	}
	if err := os.WriteFile(config, []byte(strings.TrimRight(string(old), "\n")+"\n"+jobs), 0o644); err != nil {
		return err
	}
	return h.RestartPrometheus(ctx)
}
