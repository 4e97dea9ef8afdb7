package monitor

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var objectMetricNames = []string{
	"tidal_autoscaler_hpa_spec_min_replicas", "tidal_autoscaler_hpa_spec_max_replicas",
	"tidal_autoscaler_hpa_status_current_replicas", "tidal_autoscaler_hpa_status_desired_replicas",
	"tidal_autoscaler_hpa_spec_target_metric", "tidal_autoscaler_hpa_status_target_metric",
	"tidal_autoscaler_hpa_status_condition", "tidal_autoscaler_hpa_status_last_scale_time_seconds",
	"tidal_autoscaler_hpa_scale_events_total",
}

const objectHelp = `# HELP tidal_autoscaler_hpa_spec_min_replicas spec.minReplicas of each autoscaler (1 when unset).
# TYPE tidal_autoscaler_hpa_spec_min_replicas gauge
# HELP tidal_autoscaler_hpa_spec_max_replicas spec.maxReplicas of each autoscaler.
# TYPE tidal_autoscaler_hpa_spec_max_replicas gauge
# HELP tidal_autoscaler_hpa_status_current_replicas status.currentReplicas of each autoscaler after its last reconcile.
# TYPE tidal_autoscaler_hpa_status_current_replicas gauge
# HELP tidal_autoscaler_hpa_status_desired_replicas status.desiredReplicas of each autoscaler after its last reconcile.
# TYPE tidal_autoscaler_hpa_status_desired_replicas gauge
# HELP tidal_autoscaler_hpa_spec_target_metric Target of each of an autoscaler's metrics, by metric_name (the resource or metric name) and metric_target_type (value, average, utilization).
# TYPE tidal_autoscaler_hpa_spec_target_metric gauge
# HELP tidal_autoscaler_hpa_status_target_metric Current value of each of an autoscaler's metrics (status.currentMetrics), by metric_name and metric_target_type (value, average, utilization).
# TYPE tidal_autoscaler_hpa_status_target_metric gauge
# HELP tidal_autoscaler_hpa_status_condition Each condition of an autoscaler: 1 on the series whose status (true, false, unknown) it has, 0 on the other two.
# TYPE tidal_autoscaler_hpa_status_condition gauge
# HELP tidal_autoscaler_hpa_status_last_scale_time_seconds status.lastScaleTime of each autoscaler as Unix time (only autoscalers that have scaled).
# TYPE tidal_autoscaler_hpa_status_last_scale_time_seconds gauge
# HELP tidal_autoscaler_hpa_scale_events_total Writes of /scale by each autoscaler, by direction (up, down) and reason (metric_above_target, all_metrics_below_target, above_max_replicas, below_min_replicas, fallback).
# TYPE tidal_autoscaler_hpa_scale_events_total counter
`

func testSpec() *autoscalingv2.HorizontalPodAutoscalerSpec {
	return &autoscalingv2.HorizontalPodAutoscalerSpec{
		MinReplicas: ptr.To[int32](2), MaxReplicas: 10,
		Metrics: []autoscalingv2.MetricSpec{
			{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](80)}}},
			{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "http_requests_per_second"},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("500m"))}}},
			{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "queue_length"},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: ptr.To(resource.MustParse("30"))}}},
		},
	}
}

func testStatus() *autoscalingv2.HorizontalPodAutoscalerStatus {
	return &autoscalingv2.HorizontalPodAutoscalerStatus{
		CurrentReplicas: 3, DesiredReplicas: 4,
		LastScaleTime: &metav1.Time{Time: time.Unix(1700000000, 0)},
		CurrentMetrics: []autoscalingv2.MetricStatus{
			{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{
				Name: corev1.ResourceCPU, Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr.To[int32](95), AverageValue: ptr.To(resource.MustParse("190m"))}}},
			{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricStatus{
				Metric:  autoscalingv2.MetricIdentifier{Name: "http_requests_per_second"},
				Current: autoscalingv2.MetricValueStatus{AverageValue: ptr.To(resource.MustParse("250m"))}}},
			{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricStatus{
				Metric:  autoscalingv2.MetricIdentifier{Name: "queue_length"},
				Current: autoscalingv2.MetricValueStatus{Value: ptr.To(resource.MustParse("12"))}}},
		},
		Conditions: []autoscalingv2.HorizontalPodAutoscalerCondition{
			{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionTrue},
			{Type: autoscalingv2.ScalingActive, Status: corev1.ConditionTrue},
			{Type: autoscalingv2.ScalingLimited, Status: corev1.ConditionFalse},
		},
	}
}

func newTestMonitor(t *testing.T) (*Monitor, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := New(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

func compare(t *testing.T, reg *prometheus.Registry, series string) {
	t.Helper()
	if err := testutil.GatherAndCompare(reg, strings.NewReader(objectHelp+series), objectMetricNames...); err != nil {
		t.Error(err)
	}
}

// TestObserveAutoscalerSetUpdateDelete sets an object's series, updates
// them (a metric, a condition and the last scale time gone, values
// changed), counts scale events, and deletes the object: no series stay.
func TestObserveAutoscalerSetUpdateDelete(t *testing.T) {
	m, reg := newTestMonitor(t)

	m.ObserveAutoscaler("ns", "web", testSpec(), testStatus())
	m.ObserveAutoscaler("other", "api", &autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 3}, &autoscalingv2.HorizontalPodAutoscalerStatus{CurrentReplicas: 1, DesiredReplicas: 1})
	m.ObserveScale("ns", "web", DirectionUp, ScaleReasonMetric)
	m.ObserveScale("ns", "web", DirectionUp, ScaleReasonMetric)
	m.ObserveScale("ns", "web", DirectionDown, ScaleReasonAllBelowTarget)
	compare(t, reg, `tidal_autoscaler_hpa_spec_min_replicas{hpa_name="api",namespace="other"} 1
tidal_autoscaler_hpa_spec_min_replicas{hpa_name="web",namespace="ns"} 2
tidal_autoscaler_hpa_spec_max_replicas{hpa_name="api",namespace="other"} 3
tidal_autoscaler_hpa_spec_max_replicas{hpa_name="web",namespace="ns"} 10
tidal_autoscaler_hpa_status_current_replicas{hpa_name="api",namespace="other"} 1
tidal_autoscaler_hpa_status_current_replicas{hpa_name="web",namespace="ns"} 3
tidal_autoscaler_hpa_status_desired_replicas{hpa_name="api",namespace="other"} 1
tidal_autoscaler_hpa_status_desired_replicas{hpa_name="web",namespace="ns"} 4
tidal_autoscaler_hpa_spec_target_metric{hpa_name="web",metric_name="cpu",metric_target_type="utilization",namespace="ns"} 80
tidal_autoscaler_hpa_spec_target_metric{hpa_name="web",metric_name="http_requests_per_second",metric_target_type="average",namespace="ns"} 0.5
tidal_autoscaler_hpa_spec_target_metric{hpa_name="web",metric_name="queue_length",metric_target_type="value",namespace="ns"} 30
tidal_autoscaler_hpa_status_target_metric{hpa_name="web",metric_name="cpu",metric_target_type="average",namespace="ns"} 0.19
tidal_autoscaler_hpa_status_target_metric{hpa_name="web",metric_name="cpu",metric_target_type="utilization",namespace="ns"} 95
tidal_autoscaler_hpa_status_target_metric{hpa_name="web",metric_name="http_requests_per_second",metric_target_type="average",namespace="ns"} 0.25
tidal_autoscaler_hpa_status_target_metric{hpa_name="web",metric_name="queue_length",metric_target_type="value",namespace="ns"} 12
tidal_autoscaler_hpa_status_condition{condition="AbleToScale",hpa_name="web",namespace="ns",status="false"} 0
tidal_autoscaler_hpa_status_condition{condition="AbleToScale",hpa_name="web",namespace="ns",status="true"} 1
tidal_autoscaler_hpa_status_condition{condition="AbleToScale",hpa_name="web",namespace="ns",status="unknown"} 0
tidal_autoscaler_hpa_status_condition{condition="ScalingActive",hpa_name="web",namespace="ns",status="false"} 0
tidal_autoscaler_hpa_status_condition{condition="ScalingActive",hpa_name="web",namespace="ns",status="true"} 1
tidal_autoscaler_hpa_status_condition{condition="ScalingActive",hpa_name="web",namespace="ns",status="unknown"} 0
tidal_autoscaler_hpa_status_condition{condition="ScalingLimited",hpa_name="web",namespace="ns",status="false"} 1
tidal_autoscaler_hpa_status_condition{condition="ScalingLimited",hpa_name="web",namespace="ns",status="true"} 0
tidal_autoscaler_hpa_status_condition{condition="ScalingLimited",hpa_name="web",namespace="ns",status="unknown"} 0
tidal_autoscaler_hpa_status_last_scale_time_seconds{hpa_name="web",namespace="ns"} 1.7e+09
tidal_autoscaler_hpa_scale_events_total{direction="down",hpa_name="web",namespace="ns",reason="all_metrics_below_target"} 1
tidal_autoscaler_hpa_scale_events_total{direction="up",hpa_name="web",namespace="ns",reason="metric_above_target"} 2
`)

	// Update: the External metric and ScalingLimited leave, ScalingActive
	// turns False, the counts and the cpu reading change, no last scale
	// time (a recreated object).
	spec, st := testSpec(), testStatus()
	spec.Metrics = spec.Metrics[:2]
	st.CurrentMetrics = st.CurrentMetrics[:2]
	st.CurrentMetrics[0].Resource.Current = autoscalingv2.MetricValueStatus{AverageUtilization: ptr.To[int32](40)}
	st.Conditions = []autoscalingv2.HorizontalPodAutoscalerCondition{
		{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionTrue},
		{Type: autoscalingv2.ScalingActive, Status: corev1.ConditionFalse},
	}
	st.CurrentReplicas, st.DesiredReplicas, st.LastScaleTime = 4, 2, nil
	spec.MinReplicas = nil
	m.ObserveAutoscaler("ns", "web", spec, st)
	compare(t, reg, `tidal_autoscaler_hpa_spec_min_replicas{hpa_name="api",namespace="other"} 1
tidal_autoscaler_hpa_spec_min_replicas{hpa_name="web",namespace="ns"} 1
tidal_autoscaler_hpa_spec_max_replicas{hpa_name="api",namespace="other"} 3
tidal_autoscaler_hpa_spec_max_replicas{hpa_name="web",namespace="ns"} 10
tidal_autoscaler_hpa_status_current_replicas{hpa_name="api",namespace="other"} 1
tidal_autoscaler_hpa_status_current_replicas{hpa_name="web",namespace="ns"} 4
tidal_autoscaler_hpa_status_desired_replicas{hpa_name="api",namespace="other"} 1
tidal_autoscaler_hpa_status_desired_replicas{hpa_name="web",namespace="ns"} 2
tidal_autoscaler_hpa_spec_target_metric{hpa_name="web",metric_name="cpu",metric_target_type="utilization",namespace="ns"} 80
tidal_autoscaler_hpa_spec_target_metric{hpa_name="web",metric_name="http_requests_per_second",metric_target_type="average",namespace="ns"} 0.5
tidal_autoscaler_hpa_status_target_metric{hpa_name="web",metric_name="cpu",metric_target_type="utilization",namespace="ns"} 40
tidal_autoscaler_hpa_status_target_metric{hpa_name="web",metric_name="http_requests_per_second",metric_target_type="average",namespace="ns"} 0.25
tidal_autoscaler_hpa_status_condition{condition="AbleToScale",hpa_name="web",namespace="ns",status="false"} 0
tidal_autoscaler_hpa_status_condition{condition="AbleToScale",hpa_name="web",namespace="ns",status="true"} 1
tidal_autoscaler_hpa_status_condition{condition="AbleToScale",hpa_name="web",namespace="ns",status="unknown"} 0
tidal_autoscaler_hpa_status_condition{condition="ScalingActive",hpa_name="web",namespace="ns",status="false"} 1
tidal_autoscaler_hpa_status_condition{condition="ScalingActive",hpa_name="web",namespace="ns",status="true"} 0
tidal_autoscaler_hpa_status_condition{condition="ScalingActive",hpa_name="web",namespace="ns",status="unknown"} 0
tidal_autoscaler_hpa_scale_events_total{direction="down",hpa_name="web",namespace="ns",reason="all_metrics_below_target"} 1
tidal_autoscaler_hpa_scale_events_total{direction="up",hpa_name="web",namespace="ns",reason="metric_above_target"} 2
`)

	// Delete: every series of ns/web goes, other/api stays.
	m.ObserveDesiredReplicas("ns", "web", 2)
	m.Forget("ns", "web")
	compare(t, reg, `tidal_autoscaler_hpa_spec_min_replicas{hpa_name="api",namespace="other"} 1
tidal_autoscaler_hpa_spec_max_replicas{hpa_name="api",namespace="other"} 3
tidal_autoscaler_hpa_status_current_replicas{hpa_name="api",namespace="other"} 1
tidal_autoscaler_hpa_status_desired_replicas{hpa_name="api",namespace="other"} 1
`)
	if n := testutil.CollectAndCount(m.desiredReplicas); n != 0 {
		t.Errorf("tidal_autoscaler_desired_replicas has %d series after Forget, want 0", n)
	}
	m.Forget("other", "api")
	if n, err := testutil.GatherAndCount(reg, objectMetricNames...); err != nil || n != 0 {
		t.Errorf("%d tidal_autoscaler_hpa_* series after deleting every object (%v), want 0", n, err)
	}
}

// TestObserveAutoscalerSeriesPerObject is the cardinality docs/operations.md
// states: 4 + 1 (last scale time) + one per target and per current value
// + 3 per condition, plus the scale event counters.
func TestObserveAutoscalerSeriesPerObject(t *testing.T) {
	m, reg := newTestMonitor(t)
	m.ObserveAutoscaler("ns", "web", testSpec(), testStatus())
	n, err := testutil.GatherAndCount(reg, objectMetricNames...)
	if err != nil {
		t.Fatal(err)
	}
	// 4 replica gauges, 1 last scale time, 3 targets, 4 current values
	// (cpu has utilization and average), 3 conditions x 3 statuses.
	if want := 4 + 1 + 3 + 4 + 9; n != want {
		t.Errorf("%d series for one object with 3 metrics, want %d", n, want)
	}
}

// TestLeader is tidal_autoscaler_leader: 0 until the controller runs.
func TestLeader(t *testing.T) {
	m, _ := newTestMonitor(t)
	const head = "# HELP tidal_autoscaler_leader 1 while this replica leads and runs the controller, else 0 (a standby waiting for the lease).\n# TYPE tidal_autoscaler_leader gauge\n"
	if err := testutil.CollectAndCompare(m.leader, strings.NewReader(head+"tidal_autoscaler_leader 0\n")); err != nil {
		t.Error(err)
	}
	m.SetLeading(true)
	if err := testutil.CollectAndCompare(m.leader, strings.NewReader(head+"tidal_autoscaler_leader 1\n")); err != nil {
		t.Error(err)
	}
}
