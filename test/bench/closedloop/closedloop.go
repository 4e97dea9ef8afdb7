// Package closedloop benchmarks the closed loop's step response (issue
// 21's "closed loop: load step to new replicas" row): how long after a
// step of the load a Deployment's spec.replicas reaches the new count,
// with Tidal's pipeline and with the upstream one, on one harness (etcd,
// kube-apiserver with the aggregator, the workload controllers, kwok,
// Prometheus scraping the harness exporter, and kube-controller-manager's
// HPA controller):
//
//   - Two identical Deployments of kwok pods, web-a and web-b. A balancer
//     spreads each one's demand (requests per second) evenly over its
//     ready pods, as a load balancer would: every ready pod has a request
//     counter in the harness exporter growing at its share.
//   - Side "tidal": `tidal adapter` serving custom.metrics.k8s.io and
//     `tidal autoscaler` (mode crd) with a HorizontalAutoscaler on web-a.
//   - Side "upstream": prometheus-adapter v0.12 (built by `make tools`
//     from test/bench/peer) serving custom.metrics.k8s.io and
//     kube-controller-manager's HPA controller with a native
//     HorizontalPodAutoscaler on web-b.
//   - Both: one rule file (the counter's rate over RATE_WINDOW as the Pods
//     metric http_requests_per_second), one Prometheus (so one scrape
//     interval), both controllers at --horizontal-pod-autoscaler-sync-period
//     SYNC_PERIOD, one autoscaler spec (AverageValue 100 per pod, default
//     behavior), each adapter and controller with its default flags
//     otherwise.
//
// Only one server can own custom.metrics.k8s.io through the aggregator, so
// the sides take turns, A B A B, ROUNDS times: a turn starts its side's
// adapter and points the APIServices at it (the other side's adapter is
// stopped, so no request can reach it), waits until the metric is served
// and steady (FROM pods at 100 requests/s each), creates its autoscaler
// object, waits until the controller has read the metric and keeps FROM
// replicas, then steps the demand to TO x 100 requests/s at a recorded
// instant and follows the Deployment with a watch until spec.replicas
// reaches TO, then until TO pods are Ready. It then resets: the autoscaler
// object is deleted (so the next turn starts without the controller's
// memory of this one), the demand goes back, the Deployment is scaled back
// to FROM.
//
// Where in the sync period the step lands decides much of the figure (a
// controller reads the metric once per period). A new object is reconciled
// on a beat set by its creation time (Tidal at once, then every period;
// kube-controller-manager one period after, then every period), so the
// step lands at the same fraction of a period after the creation on both
// sides of a round: (round - 0.5) / ROUNDS, which spreads the rounds over
// the period.
//
// Figures (samples, see test/bench/samples; row "closed-loop", sides tidal
// and upstream): step-to-replicas (s), from the step to the watch event
// showing spec.replicas >= TO; first-rescale (s), to the first change of
// spec.replicas; step-to-ready (s), to TO pods Ready; replicas-reached, the
// largest spec.replicas seen until then; bound (s), the row's bound: the
// scrape interval (read from Prometheus' configuration) + RATE_WINDOW +
// SYNC_PERIOD.
//
// Run (the harness binaries and prometheus-adapter come from `make tools`):
//
//	TIDAL_TOOLS_DIR=$(readlink -f _output/tools) go test -run '^$' -bench . -benchtime 1x -timeout 60m ./test/bench/closedloop/
//
// Knobs (environment): TIDAL_BENCH_FROM (3) and TIDAL_BENCH_TO (6), the
// replicas before and after the step (TO at most 10, so that from any
// count below TO the ratio leaves the 10% tolerance, and at most
// max(2 FROM, 4), what the default scale-up limits allow in one step);
// TIDAL_BENCH_RATE_WINDOW (1m); TIDAL_BENCH_SYNC_PERIOD (15s);
// TIDAL_BENCH_ROUNDS (1); TIDAL_BENCH_PEER (a prometheus-adapter binary,
// or "build" to build it from test/bench/peer; unset: the tools
// folder's); TIDAL_BENCH_SAMPLES (a file: every turn's figures as JSON
// lines).
//
// Figures depend on the machine and its load; nothing here asserts on
// time.
package closedloop

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"
)

// perPod is the requests per second each pod should serve: the
// autoscalers' AverageValue target, and the demand per replica.
const perPod = 100

// tolerance is both controllers' default
// --horizontal-pod-autoscaler-tolerance.
const tolerance = 0.1

// config is the benchmark's shape.
type config struct {
	// from and to are the replicas before and after the step.
	from, to int
	window   time.Duration
	sync     time.Duration
	rounds   int
	// peer is TIDAL_BENCH_PEER.
	peer string
}

func configFromEnv() (config, error) {
	c := config{
		from: envInt("TIDAL_BENCH_FROM", 3), to: envInt("TIDAL_BENCH_TO", 6),
		window: envDuration("TIDAL_BENCH_RATE_WINDOW", time.Minute),
		sync:   envDuration("TIDAL_BENCH_SYNC_PERIOD", 15*time.Second),
		rounds: envInt("TIDAL_BENCH_ROUNDS", 1),
		peer:   os.Getenv("TIDAL_BENCH_PEER"),
	}
	return c, c.validate()
}

// validate refuses steps whose new count a controller could miss or reach
// only over several periods for reasons other than the pipeline's delay:
// from any count k below TO the demand TO x perPod must leave the
// tolerance (TO/k > 1.1 for k = TO-1, so TO <= 10), and the default
// scale-up limit must allow TO in one step from FROM: max(2 x current, 4)
// without spec.behavior (upstream's normalizeDesiredReplicas), and the
// default policies with it (100% or 4 pods per 15 s, the larger) allow at
// least as much.
func (c config) validate() error {
	switch {
	case c.from < 1 || c.to <= c.from:
		return fmt.Errorf("TIDAL_BENCH_FROM=%d, TIDAL_BENCH_TO=%d: want 1 <= FROM < TO", c.from, c.to)
	case float64(c.to)/float64(c.to-1) <= 1+tolerance:
		return fmt.Errorf("TIDAL_BENCH_TO=%d: from %d replicas the step's demand is within the %g tolerance, so a controller may stop short of it; at most 10", c.to, c.to-1, tolerance)
	case c.to > max(2*c.from, 4):
		return fmt.Errorf("TIDAL_BENCH_TO=%d: the default scale-up limit allows at most %d from %d in one step", c.to, max(2*c.from, 4), c.from)
	case c.window < 2*time.Second || c.sync <= 0:
		return fmt.Errorf("rate window %s, sync period %s: want a window of at least 2 s and a positive period", c.window, c.sync)
	}
	return nil
}

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

// requestCounter is each pod's series; the rule turns it into metric.
const (
	requestCounter = "http_requests_total"
	metric         = "http_requests_per_second"
)

// rules is the rule file both adapters serve: the counter's rate over
// window, per pod.
func rules(window time.Duration) string {
	return fmt.Sprintf(`rules:
- seriesQuery: '%s{namespace!="",pod!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
      pod: {resource: pod}
  name:
    matches: ^(.*)_total$
    as: ${1}_per_second
  metricsQuery: sum by (<<.GroupBy>>) (rate(<<.Series>>{<<.LabelMatchers>>}[%s]))
`, requestCounter, model.Duration(window))
}

// phase is where in the sync period round's step lands, as a fraction of
// the period after the autoscaler object's creation: the middles of
// rounds equal slices of the period.
func phase(round, rounds int) float64 {
	return (float64(round) - 0.5) / float64(rounds)
}

// stepAt is the first instant created + (k + frac) x period, k >= 0 a
// whole number, not before earliest.
func stepAt(created, earliest time.Time, period time.Duration, frac float64) time.Time {
	first := created.Add(time.Duration(frac * float64(period)))
	if !first.Before(earliest) {
		return first
	}
	k := math.Ceil(float64(earliest.Sub(first)) / float64(period))
	return first.Add(time.Duration(k) * period)
}

// bound is the row's bound on the step response: one scrape, the rate
// window, one sync period.
func bound(scrape, window, sync time.Duration) time.Duration {
	return scrape + window + sync
}

// steady checks that a metric list read through the aggregator describes
// the steady state before a step: want pods, each at perPod within 3%
// (the rate over a window the demand has not changed in).
func steady(values []float64, want int) error {
	if len(values) != want {
		return fmt.Errorf("%d pods with a value, want %d", len(values), want)
	}
	for _, v := range values {
		if math.Abs(v-perPod) > 0.03*perPod {
			return fmt.Errorf("values %v, want %d each (within 3%%)", values, perPod)
		}
	}
	return nil
}

// scrapeInterval reads global.scrape_interval from the YAML of
// Prometheus' /api/v1/status/config answer.
func scrapeInterval(body []byte) (time.Duration, error) {
	var answer struct {
		Data struct {
			YAML string `json:"yaml"`
		} `json:"data"`
	}
	if err := yaml.Unmarshal(body, &answer); err != nil {
		return 0, err
	}
	var cfg struct {
		Global struct {
			ScrapeInterval string `json:"scrape_interval"`
		} `json:"global"`
	}
	if err := yaml.Unmarshal([]byte(answer.Data.YAML), &cfg); err != nil {
		return 0, err
	}
	d, err := model.ParseDuration(cfg.Global.ScrapeInterval)
	if err != nil {
		return 0, fmt.Errorf("global.scrape_interval %q: %w", cfg.Global.ScrapeInterval, err)
	}
	return time.Duration(d), nil
}
