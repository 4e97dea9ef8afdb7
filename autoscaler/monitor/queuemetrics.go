package monitor

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// queueMetrics exports the work queue's metrics under the names client-go
// gives them in kube-controller-manager (workqueue_depth{name=...} and so
// on), so the dashboards and alerts written for upstream's HPA queue read
// tidal's too. A depth that stays above zero means the workers cannot
// reconcile every autoscaler once per sync period.
type queueMetrics struct {
	depth, unfinished, longest *prometheus.GaugeVec
	adds, retries              *prometheus.CounterVec
	latency, workDuration      *prometheus.HistogramVec
}

var _ workqueue.MetricsProvider = (*queueMetrics)(nil)

func newQueueMetrics() *queueMetrics {
	const sub = "workqueue"
	buckets := prometheus.ExponentialBuckets(10e-9, 10, 12) // client-go's: 10ns to ~3h
	label := []string{"name"}
	return &queueMetrics{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: sub, Name: "depth",
			Help: "Current depth of workqueue."}, label),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: sub, Name: "adds_total",
			Help: "Total number of adds handled by workqueue."}, label),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: sub, Name: "queue_duration_seconds",
			Help: "How long in seconds an item stays in workqueue before being requested.", Buckets: buckets}, label),
		workDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: sub, Name: "work_duration_seconds",
			Help: "How long in seconds processing an item from workqueue takes.", Buckets: buckets}, label),
		unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: sub, Name: "unfinished_work_seconds",
			Help: "How many seconds of work has been done that is in progress and hasn't been observed by work_duration."}, label),
		longest: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: sub, Name: "longest_running_processor_seconds",
			Help: "How many seconds has the longest running processor for workqueue been running."}, label),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: sub, Name: "retries_total",
			Help: "Total number of retries handled by workqueue."}, label),
	}
}

func (m *queueMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.depth, m.adds, m.latency, m.workDuration, m.unfinished, m.longest, m.retries}
}

func (m *queueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return m.depth.WithLabelValues(name)
}
func (m *queueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return m.adds.WithLabelValues(name)
}
func (m *queueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return m.latency.WithLabelValues(name)
}
func (m *queueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return m.workDuration.WithLabelValues(name)
}
func (m *queueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return m.unfinished.WithLabelValues(name)
}
func (m *queueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return m.longest.WithLabelValues(name)
}
func (m *queueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return m.retries.WithLabelValues(name)
}
