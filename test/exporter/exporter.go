// Package exporter serves Prometheus series whose values a test or the sandbox
// controls: per-pod cAdvisor-style container series and app counters/gauges.
//
// Counters are driven by a rate: SetCounterRate makes a counter grow at that
// many units per second from now on, so Prometheus' rate() over it returns the
// rate the test chose, the way a real workload's counters behave.
package exporter

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Names of the cAdvisor series that resource rules query.
const (
	ContainerCPU    = "container_cpu_usage_seconds_total"
	ContainerMemory = "container_memory_working_set_bytes"
)

// ResourceRules are resourceRules (metrics.k8s.io) over the exporter's
// container series and node series of the same shape
// (node_cpu_usage_seconds_total, node_memory_working_set_bytes), with a
// 30s window, as the adapter's e2e tests and benchmark serve them. The
// container queries do not exclude the pause container: the adapter must.
const ResourceRules = `resourceRules:
  cpu:
    containerQuery: 'sum by (<<.GroupBy>>) (rate(container_cpu_usage_seconds_total{<<.LabelMatchers>>}[30s]))'
    nodeQuery: 'sum by (<<.GroupBy>>) (rate(node_cpu_usage_seconds_total{<<.LabelMatchers>>}[30s]))'
    resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}, node: {resource: node}}}
    containerLabel: container
  memory:
    containerQuery: 'sum by (<<.GroupBy>>) (container_memory_working_set_bytes{<<.LabelMatchers>>})'
    nodeQuery: 'sum by (<<.GroupBy>>) (node_memory_working_set_bytes{<<.LabelMatchers>>})'
    resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}, node: {resource: node}}}
    containerLabel: container
  window: 30s
`

// Labels of one series.
type Labels map[string]string

type kind int

const (
	counter kind = iota
	gauge
)

type series struct {
	name   string
	kind   kind
	labels Labels
	// For counters: value at since, growing at rate per second.
	value float64
	rate  float64
	since time.Time
}

func (s *series) valueAt(now time.Time) float64 {
	if s.kind == gauge {
		return s.value
	}
	return s.value + s.rate*now.Sub(s.since).Seconds()
}

// Exporter holds the series. The zero value is not usable; use New.
type Exporter struct {
	mu     sync.Mutex
	series map[string]*series
	now    func() time.Time

	srv  *http.Server
	addr string
}

// New returns an exporter with no series.
func New() *Exporter {
	return &Exporter{series: map[string]*series{}, now: time.Now}
}

func key(name string, l Labels) string {
	names := make([]string, 0, len(l))
	for k := range l {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(name)
	for _, k := range names {
		fmt.Fprintf(&b, "\xff%s\xff%s", k, l[k])
	}
	return b.String()
}

func copyLabels(l Labels) Labels {
	out := make(Labels, len(l))
	for k, v := range l {
		out[k] = v
	}
	return out
}

// SetCounterRate makes counter NAME{labels} grow at perSecond from now on,
// keeping the value it reached so far (counters never go down).
func (e *Exporter) SetCounterRate(name string, labels Labels, perSecond float64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	k := key(name, labels)
	s, ok := e.series[k]
	if !ok {
		e.series[k] = &series{name: name, kind: counter, labels: copyLabels(labels), rate: perSecond, since: now}
		return
	}
	s.value = s.valueAt(now)
	s.rate = perSecond
	s.since = now
}

// SetGauge sets gauge NAME{labels} to value.
func (e *Exporter) SetGauge(name string, labels Labels, value float64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	k := key(name, labels)
	e.series[k] = &series{name: name, kind: gauge, labels: copyLabels(labels), value: value}
}

// Delete removes series NAME{labels}, as when a pod goes away.
func (e *Exporter) Delete(name string, labels Labels) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.series, key(name, labels))
}

// DeletePod removes every series carrying namespace=ns and pod=pod.
func (e *Exporter) DeletePod(namespace, pod string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k, s := range e.series {
		if s.labels["namespace"] == namespace && s.labels["pod"] == pod {
			delete(e.series, k)
		}
	}
}

// SetPodCPU makes the container's CPU counter grow at cores CPU-seconds per second.
func (e *Exporter) SetPodCPU(namespace, pod, container string, cores float64) {
	e.SetCounterRate(ContainerCPU, Labels{"namespace": namespace, "pod": pod, "container": container}, cores)
}

// SetPodMemory sets the container's working set in bytes.
func (e *Exporter) SetPodMemory(namespace, pod, container string, bytes float64) {
	e.SetGauge(ContainerMemory, Labels{"namespace": namespace, "pod": pod, "container": container}, bytes)
}

// Describe sends nothing: the series set changes while the exporter runs,
// which makes this an unchecked collector.
func (e *Exporter) Describe(chan<- *prometheus.Desc) {}

// Collect renders the current value of every series.
func (e *Exporter) Collect(ch chan<- prometheus.Metric) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	for _, s := range e.series {
		names := make([]string, 0, len(s.labels))
		values := make([]string, 0, len(s.labels))
		for k, v := range s.labels {
			names = append(names, k)
			values = append(values, v)
		}
		vt := prometheus.GaugeValue
		if s.kind == counter {
			vt = prometheus.CounterValue
		}
		desc := prometheus.NewDesc(s.name, "Series set by the Tidal test exporter.", names, nil)
		m, err := prometheus.NewConstMetric(desc, vt, s.valueAt(now), values...)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(desc, err)
			continue
		}
		ch <- m
	}
}

// Handler serves the series in the Prometheus text format.
func (e *Exporter) Handler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(e)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Start serves /metrics on addr (e.g. "127.0.0.1:0") until Stop.
func (e *Exporter) Start(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("exporter listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", e.Handler())
	e.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	e.addr = l.Addr().String()
	// Serve returns ErrServerClosed on Stop; any other failure shows up as
	// failed scrapes in Prometheus, which is where tests look.
	go func() { _ = e.srv.Serve(l) }()
	return nil
}

// Addr is host:port the exporter listens on, once started.
func (e *Exporter) Addr() string { return e.addr }

// Stop closes the server.
func (e *Exporter) Stop(ctx context.Context) error {
	if e.srv == nil {
		return nil
	}
	return e.srv.Shutdown(ctx)
}
