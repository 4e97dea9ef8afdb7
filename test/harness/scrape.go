package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"
)

// ScrapeJob is a Prometheus scrape job beside the harness exporter's, for
// a target the exporter's 1 s interval and timeout cannot carry (a million
// series take longer than a second to expose and ingest).
type ScrapeJob struct {
	// Name is the job's name: its series get job=Name.
	Name string
	// Target is the HOST:PORT Prometheus scrapes (/metrics, plain HTTP).
	Target string
	// Interval and Timeout are the job's scrape_interval and
	// scrape_timeout; Timeout must not exceed Interval.
	Interval, Timeout time.Duration
}

// exporterJob is the harness exporter's scrape job.
const exporterJob = "tidal-harness-exporter"

// writePrometheusConfig writes prometheus.yml: the exporter every second,
// then the added jobs. The file ends with the scrape_configs list (the
// sandbox appends its own jobs to it).
func (h *Harness) writePrometheusConfig() error {
	var b strings.Builder
	b.WriteString("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nscrape_configs:\n")
	job := func(name, target, interval, timeout string) {
		fmt.Fprintf(&b, "- job_name: %q\n  honor_labels: true\n", name)
		if interval != "" {
			fmt.Fprintf(&b, "  scrape_interval: %s\n  scrape_timeout: %s\n", interval, timeout)
		}
		fmt.Fprintf(&b, "  static_configs:\n  - targets: [%q]\n", target)
	}
	job(exporterJob, h.Exporter.Addr(), "", "")
	h.mu.Lock()
	for _, s := range h.scrapeJobs {
		job(s.Name, s.Target, s.Interval.String(), s.Timeout.String())
	}
	h.mu.Unlock()
	return os.WriteFile(h.path("prometheus.yml"), []byte(b.String()), 0o644)
}

// AddScrapeJob adds j to Prometheus's configuration, or replaces the job
// of the same name, and reloads it (SIGHUP): it returns once Prometheus
// runs the new configuration.
func (h *Harness) AddScrapeJob(ctx context.Context, j ScrapeJob) error {
	if j.Name == "" || j.Name == exporterJob || j.Target == "" || j.Interval <= 0 || j.Timeout <= 0 || j.Timeout > j.Interval {
		return fmt.Errorf("scrape job %+v: want a name other than %s, a target, and 0 < timeout <= interval", j, exporterJob)
	}
	h.mu.Lock()
	p, url := h.prometheus, h.PrometheusURL
	if p == nil {
		h.mu.Unlock()
		return fmt.Errorf("scrape job %s: Prometheus is not running (Options.Prometheus)", j.Name)
	}
	h.scrapeJobs = slices.DeleteFunc(h.scrapeJobs, func(o ScrapeJob) bool { return o.Name == j.Name })
	h.scrapeJobs = append(h.scrapeJobs, j)
	h.mu.Unlock()
	if err := h.writePrometheusConfig(); err != nil {
		return err
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		return fmt.Errorf("reload Prometheus: %w", err)
	}
	return WaitReady(ctx, nil, "Prometheus scraping "+j.Target+" as job "+j.Name, time.Minute, func(ctx context.Context) error {
		return activeTarget(ctx, url, j)
	})
}

// activeTarget succeeds when Prometheus's active targets include j's.
func activeTarget(ctx context.Context, base string, j ScrapeJob) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/targets?state=active", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			ActiveTargets []struct {
				ScrapePool string `json:"scrapePool"`
				ScrapeURL  string `json:"scrapeUrl"`
			} `json:"activeTargets"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return err
	}
	for _, t := range r.Data.ActiveTargets {
		if t.ScrapePool == j.Name && strings.Contains(t.ScrapeURL, "//"+j.Target+"/") {
			return nil
		}
	}
	return fmt.Errorf("job %s with target %s not among %d active targets yet", j.Name, j.Target, len(r.Data.ActiveTargets))
}
