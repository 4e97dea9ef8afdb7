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

	"go.yaml.in/yaml/v3"
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

// promConfig is the part of Prometheus's configuration the harness writes.
type promConfig struct {
	Global struct {
		ScrapeInterval     string `yaml:"scrape_interval"`
		ScrapeTimeout      string `yaml:"scrape_timeout"`
		EvaluationInterval string `yaml:"evaluation_interval"`
	} `yaml:"global"`
	ScrapeConfigs []promScrapeConfig `yaml:"scrape_configs"`
}

type promScrapeConfig struct {
	JobName        string `yaml:"job_name"`
	HonorLabels    bool   `yaml:"honor_labels"`
	ScrapeInterval string `yaml:"scrape_interval,omitempty"`
	ScrapeTimeout  string `yaml:"scrape_timeout,omitempty"`
	StaticConfigs  []struct {
		Targets []string `yaml:"targets"`
	} `yaml:"static_configs"`
}

// exporterJob is the harness exporter's scrape job.
const exporterJob = "tidal-harness-exporter"

// writePrometheusConfig writes prometheus.yml: the exporter every second,
// then the added jobs.
func (h *Harness) writePrometheusConfig() error {
	var c promConfig
	c.Global.ScrapeInterval, c.Global.ScrapeTimeout, c.Global.EvaluationInterval = "1s", "1s", "1s"
	job := func(name, target string) promScrapeConfig {
		j := promScrapeConfig{JobName: name, HonorLabels: true}
		j.StaticConfigs = append(j.StaticConfigs, struct {
			Targets []string `yaml:"targets"`
		}{[]string{target}})
		return j
	}
	c.ScrapeConfigs = append(c.ScrapeConfigs, job(exporterJob, h.Exporter.Addr()))
	h.mu.Lock()
	for _, s := range h.scrapeJobs {
		j := job(s.Name, s.Target)
		j.ScrapeInterval, j.ScrapeTimeout = s.Interval.String(), s.Timeout.String()
		c.ScrapeConfigs = append(c.ScrapeConfigs, j)
	}
	h.mu.Unlock()
	out, err := yaml.Marshal(&c)
	if err != nil {
		return err
	}
	return os.WriteFile(h.path("prometheus.yml"), out, 0o644)
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
				ScrapePool     string `json:"scrapePool"`
				ScrapeURL      string `json:"scrapeUrl"`
				ScrapeInterval string `json:"scrapeInterval"`
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
