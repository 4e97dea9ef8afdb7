// Package monitor is the autoscaler's own metrics, the equivalent of
// upstream's horizontal_pod_autoscaler_controller_* metrics under
// tidal_autoscaler_*, and its work queue's metrics under the names client-go
// gives them in kube-controller-manager, and the per-object
// tidal_autoscaler_hpa_* series (objects.go) that mirror kube-state-metrics'
// kube_horizontalpodautoscaler_*. All are client_golang collectors,
// registered with the Registerer given to New, except the per-object
// gauges when New is given an ObjectSeries to keep them in (Handler serves
// both).
package monitor

import (
	"strconv"
	"sync/atomic"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/client-go/util/workqueue"

	"github.com/prometheus/client_golang/prometheus"
)

// Label values of action and error, as upstream's HPA controller monitor uses them.
const (
	ActionScaleUp   = "scale_up"
	ActionScaleDown = "scale_down"
	ActionNone      = "none"

	ErrorSpec     = "spec"
	ErrorInternal = "internal"
	ErrorNone     = "none"
)

// Label values of reason on status_writes_total: why a status write was
// made (see StatusWritten). fields and values are told apart only with
// --status-metrics-min-interval set; without it a changed status is
// counted as changed.
const (
	// WriteChanged: the status changed (the interval is not set).
	WriteChanged = "changed"
	// WriteFields: a field other than the metrics' current values changed
	// (replicas, desired count, conditions, a metric's kinds, the first
	// status).
	WriteFields = "fields"
	// WriteHistory: the status is unchanged, or changed in metric values
	// only, and the stored history had to be written now.
	WriteHistory = "history"
	// WriteValues: only status.currentMetrics values changed.
	WriteValues = "values"
)

// Monitor is the controller's own metrics, the equivalent of upstream's
// horizontal_pod_autoscaler_controller_* metrics under
// tidal_autoscaler_*.
type Monitor struct {
	reconciliations           *prometheus.CounterVec
	reconciliationDuration    *prometheus.HistogramVec
	metricComputations        *prometheus.CounterVec
	metricComputationDuration *prometheus.HistogramVec
	autoscalers               prometheus.Gauge
	desiredReplicas           *prometheus.GaugeVec
	dryRunDesiredReplicas     *prometheus.GaugeVec
	fallbackActive            *prometheus.GaugeVec
	shadowSyncs               *prometheus.CounterVec
	leader                    prometheus.Gauge
	// statusWrites counts the status writes made, by reason;
	// statusWritesDeferred those left out by --status-metrics-min-interval.
	statusWrites         *prometheus.CounterVec
	statusWritesDeferred prometheus.Counter
	// reconcileGap reports what gap returns (0 while it is nil: no
	// controller runs).
	reconcileGap prometheus.GaugeFunc
	gap          gaugeSource[time.Duration]
	// offBeat reports what offBeatCount returns (0 while it is nil).
	offBeat      prometheus.GaugeFunc
	offBeatCount gaugeSource[int]
	// objects are the per-object tidal_autoscaler_hpa_* series (objects.go).
	objects *objectMetrics
	// queue is the work queue's metrics provider.
	queue *queueMetrics
}

// New creates the metrics and registers them with reg (nil: not
// registered, e.g. in tests that do not look at them). The per-object
// tidal_autoscaler_hpa_* gauges go to objects when it is not nil, and are
// not registered: its caller serves them (Handler), far more cheaply than
// a registry does; else they are registered with reg too.
func New(reg prometheus.Registerer, objects *ObjectSeries) (*Monitor, error) {
	const ns, sub = "tidal", "autoscaler"
	buckets := prometheus.ExponentialBuckets(0.001, 2, 15)
	m := &Monitor{
		reconciliations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "reconciliations_total",
			Help: "Number of reconciliations. action is scale_up, scale_down or none; error is spec, internal or none (the first error of the reconciliation).",
		}, []string{"action", "error"}),
		reconciliationDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "reconciliation_duration_seconds",
			Help:    "Time one reconciliation takes, by action and error as in reconciliations_total.",
			Buckets: buckets,
		}, []string{"action", "error"}),
		metricComputations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "metric_computation_total",
			Help: "Number of metric computations, by action, error and metric_type (spec.metrics[*].type).",
		}, []string{"action", "error", "metric_type"}),
		metricComputationDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "metric_computation_duration_seconds",
			Help:    "Time one metric computation takes, by action, error and metric_type.",
			Buckets: buckets,
		}, []string{"action", "error", "metric_type"}),
		autoscalers: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "autoscalers",
			Help: "Number of autoscaler objects the controller knows.",
		}),
		desiredReplicas: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "desired_replicas",
			Help: "Desired replica count of each autoscaler.",
		}, []string{"namespace", "hpa_name"}),
		dryRunDesiredReplicas: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "dry_run_desired_replicas",
			Help: "Replica count each autoscaler in dry run would have written to /scale (only autoscalers in dry run).",
		}, []string{"namespace", "hpa_name"}),
		fallbackActive: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "fallback_active",
			Help: "1 while an autoscaler's fallback count applies (every metric failed in failureThreshold consecutive syncs), else 0 (only autoscalers with a fallback).",
		}, []string{"namespace", "hpa_name"}),
		shadowSyncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "shadow_syncs_total",
			Help: "Syncs of each autoscaler in dry run beside an HPA on the same workload, by whether its decision agreed with the HPA's (only such autoscalers).",
		}, []string{"namespace", "hpa_name", "agree"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "leader",
			Help: "1 while this replica leads and runs the controller, else 0 (a standby waiting for the lease).",
		}),
		statusWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "status_writes_total",
			Help: "Status writes made, by reason: history (the stored stabilization history had to be written; the status was unchanged, or changed in values only), " +
				"and with --status-metrics-min-interval set fields (a field other than status.currentMetrics values changed) and values (those values alone changed), " +
				"else changed (the status changed).",
		}, []string{"reason"}),
		statusWritesDeferred: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "status_writes_deferred_total",
			Help: "Status writes not made because only status.currentMetrics values changed within --status-metrics-min-interval of the autoscaler's last status write.",
		}),
		objects: newObjectMetrics(ns, sub, objects),
		queue:   newQueueMetrics(),
	}
	m.reconcileGap = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: ns, Subsystem: sub, Name: "reconcile_gap_max_seconds",
		Help: "Longest time between two consecutive reconciles of any one autoscaler, among those that ended in the last sync period, " +
			"and since the last reconcile of every autoscaler known (0 on a replica that does not reconcile).",
	}, m.reconcileGapSeconds)
	m.offBeat = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: ns, Subsystem: sub, Name: "autoscalers_off_beat",
		Help: "Autoscalers whose namespace's autoscalers share a PodMetrics list but whose next reconcile is not on the namespace's beat " +
			"(just created, or back from a wait in the queue of more than half a sync period): each lists PodMetrics on its own until it joins " +
			"the beat, within ten sync periods (0 on a replica that does not reconcile).",
	}, m.offBeatValue)
	if reg == nil {
		return m, nil
	}
	cs := []prometheus.Collector{m.reconciliations, m.reconciliationDuration, m.metricComputations,
		m.metricComputationDuration, m.autoscalers, m.desiredReplicas, m.dryRunDesiredReplicas, m.fallbackActive, m.shadowSyncs, m.leader,
		m.statusWrites, m.statusWritesDeferred, m.reconcileGap, m.offBeat, m.objects.scaleEvents}
	if objects == nil {
		cs = append(cs, m.objects.series)
	}
	for _, c := range append(cs, m.queue.collectors()...) {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Queue is the work queue's metrics provider (workqueue_* metrics).
func (m *Monitor) Queue() workqueue.MetricsProvider { return m.queue }

// ObserveReconciliation records one reconciliation.
func (m *Monitor) ObserveReconciliation(action, errLabel string, d time.Duration) {
	m.reconciliations.WithLabelValues(action, errLabel).Inc()
	m.reconciliationDuration.WithLabelValues(action, errLabel).Observe(d.Seconds())
}

// ObserveMetricComputation records the computation of one metric of type t.
func (m *Monitor) ObserveMetricComputation(action, errLabel string, d time.Duration, t autoscalingv2.MetricSourceType) {
	m.metricComputations.WithLabelValues(action, errLabel, string(t)).Inc()
	m.metricComputationDuration.WithLabelValues(action, errLabel, string(t)).Observe(d.Seconds())
}

// AutoscalerAdded and AutoscalerDeleted count the known autoscalers.
func (m *Monitor) AutoscalerAdded()   { m.autoscalers.Inc() }
func (m *Monitor) AutoscalerDeleted() { m.autoscalers.Dec() }

// ObserveDesiredReplicas records an autoscaler's desired replica count.
func (m *Monitor) ObserveDesiredReplicas(namespace, name string, n int32) {
	m.desiredReplicas.WithLabelValues(namespace, name).Set(float64(n))
}

// ObserveDryRun records the count an autoscaler in dry run would have
// written; n < 0 drops the series (the autoscaler is not in dry run).
func (m *Monitor) ObserveDryRun(namespace, name string, n int32) {
	if n < 0 {
		m.dryRunDesiredReplicas.DeleteLabelValues(namespace, name)
		return
	}
	m.dryRunDesiredReplicas.WithLabelValues(namespace, name).Set(float64(n))
}

// ObserveFallback records whether an autoscaler's fallback applies;
// configured false drops the series (it has no fallback).
func (m *Monitor) ObserveFallback(namespace, name string, configured, active bool) {
	if !configured {
		m.fallbackActive.DeleteLabelValues(namespace, name)
		return
	}
	v := 0.0
	if active {
		v = 1
	}
	m.fallbackActive.WithLabelValues(namespace, name).Set(v)
}

// SetLeading records whether this replica runs the controller.
func (m *Monitor) SetLeading(leading bool) {
	v := 0.0
	if leading {
		v = 1
	}
	m.leader.Set(v)
}

// StatusWritten counts a status write made, for reason (WriteChanged,
// WriteFields, WriteHistory or WriteValues).
func (m *Monitor) StatusWritten(reason string) { m.statusWrites.WithLabelValues(reason).Inc() }

// StatusWriteDeferred counts a status write left out because only
// currentMetrics values changed (--status-metrics-min-interval).
func (m *Monitor) StatusWriteDeferred() { m.statusWritesDeferred.Inc() }

// SetReconcileGap makes gap the source of reconcile_gap_max_seconds; nil
// reports 0 (no controller runs).
func (m *Monitor) SetReconcileGap(gap func() time.Duration) { m.gap.set(gap) }

func (m *Monitor) reconcileGapSeconds() float64 {
	return m.gap.value(func(d time.Duration) float64 { return d.Seconds() })
}

// SetOffBeat makes count the source of autoscalers_off_beat; nil reports
// 0 (no controller runs).
func (m *Monitor) SetOffBeat(count func() int) { m.offBeatCount.set(count) }

func (m *Monitor) offBeatValue() float64 {
	return m.offBeatCount.value(func(n int) float64 { return float64(n) })
}

// gaugeSource is what a gauge of the running controller reads: set while
// one runs, nil (the gauge reads 0) while none does.
type gaugeSource[T any] struct{ f atomic.Pointer[func() T] }

func (s *gaugeSource[T]) set(f func() T) {
	if f == nil {
		s.f.Store(nil)
		return
	}
	s.f.Store(&f)
}

// value is the source's value as float, 0 while there is none.
func (s *gaugeSource[T]) value(float func(T) float64) float64 {
	f := s.f.Load()
	if f == nil {
		return 0
	}
	return float((*f)())
}

// Forget drops the per-object series of a deleted autoscaler.
func (m *Monitor) Forget(namespace, name string) {
	m.objects.forget(namespace, name)
	m.desiredReplicas.DeleteLabelValues(namespace, name)
	m.dryRunDesiredReplicas.DeleteLabelValues(namespace, name)
	m.fallbackActive.DeleteLabelValues(namespace, name)
	m.shadowSyncs.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "hpa_name": name})
}

// ShadowSyncs is the shadow_syncs_total counter of one autoscaler, for
// tests.
func (m *Monitor) ShadowSyncs(namespace, name, agree string) prometheus.Counter {
	return m.shadowSyncs.WithLabelValues(namespace, name, agree)
}

// ObserveShadow counts one sync of a dry run compared with an HPA's
// decision.
func (m *Monitor) ObserveShadow(namespace, name string, agree bool) {
	m.shadowSyncs.WithLabelValues(namespace, name, strconv.FormatBool(agree)).Inc()
}
