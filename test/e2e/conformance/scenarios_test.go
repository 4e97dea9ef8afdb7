package conformance

import (
	"slices"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Metric spec helpers; values are quantities as strings.

func utilization(pct int32) autoscalingv2.MetricTarget {
	return autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(pct)}
}

func averageValue(v string) autoscalingv2.MetricTarget {
	return autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse(v))}
}

func value(v string) autoscalingv2.MetricTarget {
	return autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: ptr.To(resource.MustParse(v))}
}

func resourceMetric(name corev1.ResourceName, target autoscalingv2.MetricTarget) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType,
		Resource: &autoscalingv2.ResourceMetricSource{Name: name, Target: target}}
}

func containerMetric(name corev1.ResourceName, container string, target autoscalingv2.MetricTarget) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ContainerResourceMetricSourceType,
		ContainerResource: &autoscalingv2.ContainerResourceMetricSource{Name: name, Container: container, Target: target}}
}

func podsMetric(name string, target autoscalingv2.MetricTarget) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType,
		Pods: &autoscalingv2.PodsMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: name}, Target: target}}
}

// objectMetric is a metric of Service "front" (see twinMetrics.object).
func objectMetric(name string, target autoscalingv2.MetricTarget) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType,
		Object: &autoscalingv2.ObjectMetricSource{
			DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Kind: "Service", Name: "front"},
			Metric:          autoscalingv2.MetricIdentifier{Name: name}, Target: target,
		}}
}

func externalMetric(name string, selector map[string]string, target autoscalingv2.MetricTarget) autoscalingv2.MetricSpec {
	id := autoscalingv2.MetricIdentifier{Name: name}
	if selector != nil {
		id.Selector = &metav1.LabelSelector{MatchLabels: selector}
	}
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType,
		External: &autoscalingv2.ExternalMetricSource{Metric: id, Target: target}}
}

func hpaSpec(minReplicas, maxReplicas int32, metrics ...autoscalingv2.MetricSpec) autoscalingv2.HorizontalPodAutoscalerSpec {
	return autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr.To(minReplicas), MaxReplicas: maxReplicas, Metrics: metrics}
}

func withBehavior(s autoscalingv2.HorizontalPodAutoscalerSpec, b autoscalingv2.HorizontalPodAutoscalerBehavior) autoscalingv2.HorizontalPodAutoscalerSpec {
	s.Behavior = &b
	return s
}

func policy(t autoscalingv2.HPAScalingPolicyType, v, period int32) autoscalingv2.HPAScalingPolicy {
	return autoscalingv2.HPAScalingPolicy{Type: t, Value: v, PeriodSeconds: period}
}

func selectPolicy(p autoscalingv2.ScalingPolicySelect) *autoscalingv2.ScalingPolicySelect { return &p }

// Step helpers.

func cpuStep(name string, vals ...string) step {
	return step{name: name, set: func(m twinMetrics) { m.cpu(vals...) }}
}

func setStep(name string, set func(m twinMetrics)) step { return step{name: name, set: set} }

var cpu50 = resourceMetric(corev1.ResourceCPU, utilization(50))

// withSidecar adds a sidecar with the app's requests, and a plain init
// container with larger ones that must not count.
func withSidecar(p *corev1.PodSpec) {
	app := p.Containers[0]
	p.InitContainers = append(p.InitContainers,
		corev1.Container{Name: "setup", Image: "fake-setup:latest", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("64Mi")}}},
		corev1.Container{Name: "sidecar", Image: "fake-sidecar:latest", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), Resources: app.Resources})
}

// withPodLevelRequests gives the pod 400m of cpu for its one 100m
// container.
func withPodLevelRequests(p *corev1.PodSpec) {
	p.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("400m"), corev1.ResourceMemory: resource.MustParse("128Mi")}}
}

// scenarios are the conformance cases; each runs in its own namespace,
// in parallel with the others.
var scenarios = []scenario{
	// Resource, utilization and average value.
	{name: "cpu-util-up-down", replicas: 2, spec: hpaSpec(1, 6, cpu50), steps: []step{
		cpuStep("at target", "50m"), cpuStep("double", "100m"), cpuStep("at target", "50m"), cpuStep("idle", "10m"),
	}},
	{name: "cpu-util-tolerance", replicas: 4, spec: hpaSpec(1, 8, cpu50), steps: []step{
		cpuStep("108% within tolerance", "54m"), cpuStep("90% on the edge", "45m"), cpuStep("60% scales down", "30m"),
	}},
	{name: "cpu-util-mixed", replicas: 3, spec: hpaSpec(1, 6, resourceMetric(corev1.ResourceCPU, utilization(60))), steps: []step{
		cpuStep("average at target", "20m", "60m", "100m"), cpuStep("one pod hot", "20m", "60m", "160m"),
	}},
	{name: "cpu-average-value", replicas: 2, spec: hpaSpec(1, 6, resourceMetric(corev1.ResourceCPU, averageValue("80m"))), steps: []step{
		cpuStep("at target", "80m"), cpuStep("double", "160m"), cpuStep("half", "40m"),
	}},
	{name: "memory-util", replicas: 2, spec: hpaSpec(1, 6, resourceMetric(corev1.ResourceMemory, utilization(50))), steps: []step{
		setStep("at target", func(m twinMetrics) { m.memory("32Mi") }),
		setStep("double", func(m twinMetrics) { m.memory("64Mi") }),
		setStep("quarter", func(m twinMetrics) { m.memory("8Mi") }),
	}},
	{name: "memory-average-value", replicas: 2, spec: hpaSpec(1, 6, resourceMetric(corev1.ResourceMemory, averageValue("48Mi"))), steps: []step{
		setStep("at target", func(m twinMetrics) { m.memory("48Mi") }),
		setStep("double", func(m twinMetrics) { m.memory("96Mi") }),
	}},
	{name: "container-cpu-util", replicas: 2, spec: hpaSpec(1, 6, containerMetric(corev1.ResourceCPU, "app", utilization(50))), steps: []step{
		cpuStep("at target", "50m"), cpuStep("double", "100m"), cpuStep("idle", "20m"),
	}},
	{name: "container-missing", replicas: 2, spec: hpaSpec(1, 6, containerMetric(corev1.ResourceCPU, "sidecar", utilization(50))), steps: []step{
		cpuStep("no such container", "100m"),
	}},
	{name: "cpu-missing-pod", replicas: 3, spec: hpaSpec(1, 6, cpu50), steps: []step{
		cpuStep("one pod without sample, up", "100m", "", "100m"), cpuStep("one pod without sample, down", "10m", "", "10m"),
	}},
	{name: "cpu-unready-pod", replicas: 3, spec: hpaSpec(1, 6, cpu50), steps: []step{
		{name: "oldest pod unready, hot", set: func(m twinMetrics) { m.cpu("90m") }, act: markFirstPodUnready},
		cpuStep("cooler", "30m"),
	}},
	{name: "cpu-pending-pod", replicas: 2, spec: hpaSpec(1, 6, cpu50), steps: []step{
		{name: "a pending pod, hot", set: func(m twinMetrics) { m.cpu("80m") }, act: addPendingPod},
		cpuStep("idle", "20m"),
	}},
	// Requests: a sidecar (an init container that keeps running) counts, a
	// plain init container does not; pod-level requests replace the
	// containers' (PodLevelResources, on by default since 1.34).
	{name: "cpu-util-sidecar", replicas: 2, spec: hpaSpec(1, 6, cpu50), pod: withSidecar, steps: []step{
		setStep("90% of app and sidecar", func(m twinMetrics) { m.cpu("90m"); m.containerCPU("sidecar", "90m") }),
		setStep("20%", func(m twinMetrics) { m.cpu("20m"); m.containerCPU("sidecar", "20m") }),
	}},
	// From 4 replicas the pod-level reading (75%, ratio 1.5) scales to 6,
	// then to max 7, whatever the new pods' state when a controller
	// reconciles at 6: with k of the 2 new pods ready and sampled, 4..6
	// pods give 6 or 7, never another value. Reading the container's
	// request (300%) goes to 7 at once. From 2 replicas (3, 5, then 8)
	// the reconcile at 5 saw 6 or 8 by whether the fifth pod was ready
	// yet: timing, not a decision.
	{name: "cpu-util-pod-level", replicas: 4, spec: hpaSpec(1, 7, cpu50), pod: withPodLevelRequests, steps: []step{
		cpuStep("75% of the pod's 400m, 300% of the container's 100m", "300m"),
	}},
	{name: "cpu-no-metrics", replicas: 2, spec: hpaSpec(1, 6, cpu50), steps: []step{
		{name: "no PodMetrics"},
	}},

	// Pods metrics.
	// 3x: 2 -> 4 (legacy limit), then at 4 even with neither new pod
	// sampled (each counts 0) the ratio is 1.5, so max 6 follows whatever
	// the new pods' state (at 2.5x that case proposed 5 first).
	{name: "pods-average", replicas: 2, spec: hpaSpec(1, 6, podsMetric("qps", averageValue("10"))), steps: []step{
		setStep("at target", func(m twinMetrics) { m.pods("qps", "10") }),
		setStep("3x", func(m twinMetrics) { m.pods("qps", "30") }),
		setStep("low", func(m twinMetrics) { m.pods("qps", "4") }),
	}},
	{name: "pods-missing", replicas: 3, spec: hpaSpec(1, 6, podsMetric("qps", averageValue("10"))), steps: []step{
		setStep("one missing, up", func(m twinMetrics) { m.pods("qps", "20", "", "20") }),
		setStep("one missing, down", func(m twinMetrics) { m.pods("qps", "2", "", "2") }),
	}},
	{name: "pods-mixed-values", replicas: 3, spec: hpaSpec(1, 6, podsMetric("qps", averageValue("15"))), steps: []step{
		setStep("20/10/30", func(m twinMetrics) { m.pods("qps", "20", "10", "30") }),
	}},
	{name: "pods-pending-pod", replicas: 2, spec: hpaSpec(1, 6, podsMetric("qps", averageValue("10"))), steps: []step{
		{name: "a pending pod", set: func(m twinMetrics) { m.pods("qps", "16") }, act: addPendingPod},
	}},
	{name: "pods-no-metric", replicas: 2, spec: hpaSpec(1, 6, podsMetric("qps", averageValue("10"))), steps: []step{
		{name: "metric absent"},
	}},

	// Object metrics.
	// 3x from 2 replicas: the legacy limit stops at 4, and at 4 any 2 to 4
	// ready pods give 6 or more, so the next stage is max 6 whatever the
	// new pods' state (at 2.5x, a reconcile that saw only the 2 old pods
	// ready proposed 5 first: 2 4 5 6 against 2 4 6, timing).
	{name: "object-value", replicas: 2, spec: hpaSpec(1, 6, objectMetric("rps", value("100"))), steps: []step{
		setStep("at target", func(m twinMetrics) { m.object("rps", "100") }),
		setStep("3x", func(m twinMetrics) { m.object("rps", "300") }),
		setStep("low", func(m twinMetrics) { m.object("rps", "40") }),
	}},
	{name: "object-average-value", replicas: 2, spec: hpaSpec(1, 6, objectMetric("rps", averageValue("50"))), steps: []step{
		setStep("at target", func(m twinMetrics) { m.object("rps", "100") }),
		setStep("6 pods worth", func(m twinMetrics) { m.object("rps", "300") }),
		setStep("low", func(m twinMetrics) { m.object("rps", "60") }),
	}},
	{name: "object-missing", replicas: 2, spec: hpaSpec(1, 6, objectMetric("rps", value("100"))), steps: []step{
		{name: "metric absent"},
	}},

	// External metrics.
	{name: "external-value", replicas: 2, spec: hpaSpec(1, 6, externalMetric("queue", nil, value("10"))), steps: []step{
		setStep("sum at target", func(m twinMetrics) { m.external("queue", "5", "5") }),
		// 3x, for the reason given at object-value.
		setStep("sum 3x", func(m twinMetrics) { m.external("queue", "20", "10") }),
		setStep("sum low", func(m twinMetrics) { m.external("queue", "2", "1") }),
	}},
	{name: "external-average-selector", replicas: 2, spec: hpaSpec(1, 6, externalMetric("queue", map[string]string{"series": "a"}, averageValue("4"))), steps: []step{
		setStep("8 on the selected series", func(m twinMetrics) { m.external("queue", "8", "100") }),
		setStep("20", func(m twinMetrics) { m.external("queue", "20", "100") }),
		setStep("3", func(m twinMetrics) { m.external("queue", "3", "100") }),
	}},
	{name: "external-missing", replicas: 2, spec: hpaSpec(1, 6, externalMetric("queue", nil, value("10"))), steps: []step{
		{name: "metric absent"},
	}},

	// Several metrics.
	// From 3 replicas the pods metric (7.5 -> 8) reaches max 6 in one
	// rescale: from 2, the legacy limit made a second rescale whose
	// proposal depended on whether the metrics server's pod informer had
	// seen the new pods yet (timing, not a decision: missing pods are
	// their own scenarios above).
	{name: "multi-max", replicas: 3, spec: hpaSpec(1, 6, cpu50, podsMetric("qps", averageValue("10"))), steps: []step{
		setStep("pods metric wins", func(m twinMetrics) { m.cpu("50m"); m.pods("qps", "25") }),
		setStep("cpu wins", func(m twinMetrics) { m.cpu("75m"); m.pods("qps", "1") }),
	}},
	{name: "multi-one-failing-up", replicas: 2, spec: hpaSpec(1, 6, cpu50, objectMetric("rps", value("100"))), steps: []step{
		cpuStep("cpu high, object absent", "100m"),
	}},
	{name: "multi-one-failing-no-down", replicas: 4, spec: hpaSpec(1, 6, cpu50, externalMetric("queue", nil, value("10"))), steps: []step{
		cpuStep("cpu low, external absent", "10m"),
		setStep("external back", func(m twinMetrics) { m.external("queue", "5") }),
	}},

	// Clamping to [min, max].
	{name: "clamp-max", replicas: 2, spec: hpaSpec(1, 3, cpu50), steps: []step{cpuStep("hot", "200m")}},
	{name: "clamp-min", replicas: 3, spec: hpaSpec(3, 6, cpu50), steps: []step{cpuStep("idle", "10m")}},
	{name: "above-max", replicas: 5, spec: hpaSpec(1, 3, cpu50), steps: []step{cpuStep("at target", "50m")}},
	{name: "below-min", replicas: 1, spec: hpaSpec(3, 6, cpu50), steps: []step{cpuStep("at target", "50m")}},
	{name: "legacy-scale-up-limit", replicas: 1, spec: hpaSpec(1, 10, cpu50), steps: []step{cpuStep("10x", "500m")}},
	// The API's default scale-up policies (4 pods or 100% a 15 s period)
	// reached on consecutive reconciles: at 59% of a 50% target each
	// reconcile wants one or two more (2 3 4 5 6, then 7.08 -> 8). At 6
	// the limit is 8 only if the event three 5 s reconciles back has left
	// the 15 s period, as upstream's (intervals of a period plus the
	// reconcile's time) always has; a record dated by the reconcile's start
	// instead of its due instant kept it now and then (6 -> 7 -> 8), as
	// queue waits fell: autoscaler/controller's TestRecordsDatedWhenDue is
	// what fails without the dating, this checks the whole path.
	{name: "default-scale-up-limit", replicas: 1, spec: hpaSpec(1, 8, resourceMetric(corev1.ResourceMemory, utilization(50))), steps: []step{
		setStep("59% every reconcile", func(m twinMetrics) { m.memory("38Mi") }),
	}},
	{name: "paused-at-zero", replicas: 0, spec: hpaSpec(1, 6, cpu50), steps: []step{cpuStep("hot", "200m")}},

	// Behaviors.
	{name: "behavior-up-pods-policy", replicas: 1, spec: withBehavior(hpaSpec(1, 5, cpu50), autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp: &autoscalingv2.HPAScalingRules{Policies: []autoscalingv2.HPAScalingPolicy{policy(autoscalingv2.PodsScalingPolicy, 1, 10)}},
	}), steps: []step{cpuStep("hot", "200m")}},
	{name: "behavior-up-select-min", replicas: 2, spec: withBehavior(hpaSpec(1, 8, cpu50), autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp: &autoscalingv2.HPAScalingRules{
			Policies: []autoscalingv2.HPAScalingPolicy{
				policy(autoscalingv2.PercentScalingPolicy, 50, 10), policy(autoscalingv2.PodsScalingPolicy, 3, 10),
			},
			SelectPolicy: selectPolicy(autoscalingv2.MinChangePolicySelect),
		},
	}), steps: []step{cpuStep("hot", "200m")}},
	{name: "behavior-down-disabled", replicas: 4, spec: withBehavior(hpaSpec(1, 6, cpu50), autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleDown: &autoscalingv2.HPAScalingRules{SelectPolicy: selectPolicy(autoscalingv2.DisabledPolicySelect)},
	}), steps: []step{cpuStep("idle", "10m"), cpuStep("hot", "100m")}},
	{name: "behavior-up-disabled", replicas: 2, spec: withBehavior(hpaSpec(1, 6, cpu50), autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp: &autoscalingv2.HPAScalingRules{SelectPolicy: selectPolicy(autoscalingv2.DisabledPolicySelect)},
	}), steps: []step{cpuStep("hot", "200m"), cpuStep("idle", "10m")}},
	{name: "behavior-down-policy", replicas: 6, spec: withBehavior(hpaSpec(1, 6, cpu50), autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleDown: &autoscalingv2.HPAScalingRules{
			StabilizationWindowSeconds: ptr.To[int32](5),
			Policies:                   []autoscalingv2.HPAScalingPolicy{policy(autoscalingv2.PodsScalingPolicy, 2, 10)},
		},
	}), steps: []step{cpuStep("idle", "10m")}},
	{name: "behavior-up-stabilization", replicas: 2, spec: withBehavior(hpaSpec(1, 6, objectMetric("rps", averageValue("10"))), autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](10)},
	}), steps: []step{
		setStep("at target", func(m twinMetrics) { m.object("rps", "20") }),
		setStep("sustained 5 pods worth", func(m twinMetrics) { m.object("rps", "50") }),
	}},
	{name: "tolerance-up", replicas: 4, spec: withBehavior(hpaSpec(1, 8, externalMetric("queue", nil, averageValue("10"))), autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp: &autoscalingv2.HPAScalingRules{Tolerance: ptr.To(resource.MustParse("50m"))},
	}), steps: []step{
		setStep("1.1x, outside a 5% tolerance", func(m twinMetrics) { m.external("queue", "44") }),
	}},
	{name: "tolerance-down", replicas: 4, spec: withBehavior(hpaSpec(1, 8, externalMetric("queue", nil, averageValue("10"))), autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleDown: &autoscalingv2.HPAScalingRules{Tolerance: ptr.To(resource.MustParse("300m")), StabilizationWindowSeconds: ptr.To[int32](0)},
	}), steps: []step{
		setStep("0.75x, within a 30% tolerance", func(m twinMetrics) { m.external("queue", "30") }),
		setStep("0.5x", func(m twinMetrics) { m.external("queue", "20") }),
	}},

	// Scale to zero (HPAScaleToZero).
	{name: "zero-external", replicas: 2, spec: hpaSpec(0, 4, externalMetric("queue", nil, value("10"))), steps: []step{
		setStep("2x", func(m twinMetrics) { m.external("queue", "20") }),
		setStep("empty queue", func(m twinMetrics) { m.external("queue", "0") }),
		setStep("from zero", func(m twinMetrics) { m.external("queue", "25") }),
	}},
	{name: "zero-object", replicas: 2, spec: hpaSpec(0, 5, objectMetric("rps", averageValue("10"))), steps: []step{
		setStep("idle", func(m twinMetrics) { m.object("rps", "0") }),
		setStep("from zero", func(m twinMetrics) { m.object("rps", "35") }),
	}},

	// Readiness changing in the middle of a scenario.
	{name: "cpu-unready-then-ready", replicas: 3, spec: hpaSpec(1, 8, cpu50), steps: []step{
		{name: "oldest pod unready, hot", set: func(m twinMetrics) { m.cpu("90m") }, act: markFirstPodUnready},
		{name: "ready again", act: markFirstPodReady},
		cpuStep("cooler", "30m"),
	}},
	{name: "pods-unready-then-ready", replicas: 3, spec: hpaSpec(1, 8, podsMetric("qps", averageValue("10"))), steps: []step{
		{name: "oldest pod unready", set: func(m twinMetrics) { m.pods("qps", "18") }, act: markFirstPodUnready},
		{name: "ready again", act: markFirstPodReady},
	}},

	// Pods that are no longer counted: failed, or being deleted.
	// From 4: 160% gives 7 in one rescale (a failed or deleting pod counted
	// would give 8, or keep 4), then max 8 once a new pod is sampled. From
	// 2 the stage after the legacy limit's 4 was 5 or 7 by how many new
	// pods were ready: timing, not a decision.
	{name: "cpu-failed-and-deleting-pods", replicas: 4, spec: hpaSpec(1, 8, cpu50), steps: []step{
		{name: "a failed and a deleting pod, hot", set: func(m twinMetrics) { m.cpu("80m") }, act: both(addFailedPod, addDeletingPod)},
		cpuStep("idle", "10m"),
	}},
	// 18 a pod: 3 -> 6 (legacy limit), then at 6, with k of the 3 new pods
	// sampled, k = 0 keeps 6 (54/60 turns the direction) and k >= 1 gives
	// max 8: no intermediate stage that depends on timing (at 16, k = 1
	// proposed 7: 5 7 8 against 5 8).
	{name: "pods-failed-and-deleting-pods", replicas: 3, spec: hpaSpec(1, 8, podsMetric("qps", averageValue("10"))), steps: []step{
		{name: "a failed and a deleting pod", set: func(m twinMetrics) { m.pods("qps", "18") }, act: both(addFailedPod, addDeletingPod)},
		setStep("low", func(m twinMetrics) { m.pods("qps", "3") }),
	}},

	// Metrics that go away in the middle of a scenario.
	{name: "cpu-metrics-vanish", replicas: 3, spec: hpaSpec(1, 8, cpu50), steps: []step{
		cpuStep("at target", "50m"),
		setStep("every pod without metrics", func(m twinMetrics) { m.cpu() }),
		cpuStep("back, low", "10m"),
	}},
	{name: "object-fails-mid", replicas: 3, spec: hpaSpec(1, 8, cpu50, objectMetric("rps", value("100"))), steps: []step{
		setStep("both at target", func(m twinMetrics) { m.cpu("50m"); m.object("rps", "100") }),
		setStep("object gone, cpu low", func(m twinMetrics) { m.cpu("10m"); m.object("rps", "") }),
		setStep("object gone, cpu high", func(m twinMetrics) { m.cpu("90m") }),
	}},
	{name: "external-fails-mid", replicas: 3, spec: hpaSpec(1, 8, podsMetric("qps", averageValue("10")), externalMetric("queue", nil, averageValue("5"))), steps: []step{
		setStep("both at target", func(m twinMetrics) { m.pods("qps", "10"); m.external("queue", "15") }),
		setStep("external gone, pods low", func(m twinMetrics) { m.pods("qps", "2"); m.external("queue") }),
	}},

	// ContainerResource with an average value.
	{name: "container-cpu-average-value", replicas: 2, spec: hpaSpec(1, 6, containerMetric(corev1.ResourceCPU, "app", averageValue("80m"))), pod: withSidecar, steps: []step{
		setStep("at target, sidecar busy", func(m twinMetrics) { m.cpu("80m"); m.containerCPU("sidecar", "300m") }),
		setStep("double", func(m twinMetrics) { m.cpu("160m") }),
		setStep("half", func(m twinMetrics) { m.cpu("40m") }),
	}},

	// Other targets: a StatefulSet, and a custom resource's /scale.
	{name: "statefulset-cpu", replicas: 2, target: statefulSetTarget, spec: hpaSpec(1, 6, cpu50), steps: []step{
		cpuStep("at target", "50m"), cpuStep("double", "100m"), cpuStep("idle", "10m"),
	}},
	{name: "statefulset-pods-metric", replicas: 3, target: statefulSetTarget, spec: hpaSpec(1, 8, podsMetric("qps", averageValue("10"))), steps: []step{
		setStep("2x", func(m twinMetrics) { m.pods("qps", "20") }),
	}},
	{name: "scalable-cpu", replicas: 2, target: scalableTarget, spec: hpaSpec(1, 6, cpu50), steps: []step{
		cpuStep("at target", "50m"), cpuStep("double", "100m"), cpuStep("idle", "10m"),
	}},
	{name: "scalable-external-average", replicas: 2, target: scalableTarget, spec: hpaSpec(1, 8, externalMetric("queue", nil, averageValue("4"))), steps: []step{
		setStep("3 pods worth", func(m twinMetrics) { m.external("queue", "12") }),
		setStep("1 pod worth", func(m twinMetrics) { m.external("queue", "4") }),
	}},

	// Behaviors: short windows; Pods and Percent policies with each
	// selectPolicy; the flag's window as the scale-down default.
	{name: "behavior-down-select-max", replicas: 8, spec: withBehavior(hpaSpec(1, 8, cpu50), autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleDown: &autoscalingv2.HPAScalingRules{
			StabilizationWindowSeconds: ptr.To[int32](3),
			Policies: []autoscalingv2.HPAScalingPolicy{
				policy(autoscalingv2.PercentScalingPolicy, 25, 10), policy(autoscalingv2.PodsScalingPolicy, 3, 10),
			},
			SelectPolicy: selectPolicy(autoscalingv2.MaxChangePolicySelect),
		},
	}), steps: []step{cpuStep("idle", "5m")}},
	{name: "behavior-down-select-min", replicas: 8, spec: withBehavior(hpaSpec(1, 8, cpu50), autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleDown: &autoscalingv2.HPAScalingRules{
			StabilizationWindowSeconds: ptr.To[int32](3),
			Policies: []autoscalingv2.HPAScalingPolicy{
				policy(autoscalingv2.PercentScalingPolicy, 25, 10), policy(autoscalingv2.PodsScalingPolicy, 3, 10),
			},
			SelectPolicy: selectPolicy(autoscalingv2.MinChangePolicySelect),
		},
	}), steps: []step{cpuStep("idle", "5m")}},
	{name: "behavior-up-select-max-window", replicas: 2, spec: withBehavior(hpaSpec(1, 12, cpu50), autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp: &autoscalingv2.HPAScalingRules{
			StabilizationWindowSeconds: ptr.To[int32](4),
			Policies: []autoscalingv2.HPAScalingPolicy{
				policy(autoscalingv2.PercentScalingPolicy, 50, 10), policy(autoscalingv2.PodsScalingPolicy, 2, 10),
			},
			SelectPolicy: selectPolicy(autoscalingv2.MaxChangePolicySelect),
		},
	}), steps: []step{cpuStep("hot", "200m")}},
	{name: "behavior-default-down-window", replicas: 4, spec: withBehavior(hpaSpec(1, 8, cpu50), autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp: &autoscalingv2.HPAScalingRules{SelectPolicy: selectPolicy(autoscalingv2.MaxChangePolicySelect)},
	}), steps: []step{cpuStep("at target", "50m"), cpuStep("idle", "10m")}},
}

// TestConformance runs the profiles one after another (a profile's t.Run
// returns once its parallel scenarios have), beside TestRandomScenarios'
// scenarios on the base profile's control plane. All profiles at once, the
// twins' Deployments starting together (about 100 scenarios, 400
// Deployments) overloaded 2 cores and were not ready after 90 s; zero and
// tuned together, beside another package in CI, made zero's twins see new
// pods at different stages of readiness.
func TestConformance(t *testing.T) {
	t.Parallel()
	for _, p := range profiles {
		t.Run(p.name, func(t *testing.T) {
			for _, sc := range scenarios {
				if !p.runs(sc.name) {
					continue
				}
				t.Run(sc.name, func(t *testing.T) {
					t.Parallel()
					runScenario(t, p, sc)
				})
			}
		})
	}
}

// TestProfilesNameScenarios: a profile's list names scenarios that exist.
func TestProfilesNameScenarios(t *testing.T) {
	for _, p := range profiles {
		for _, name := range p.only {
			if !slices.ContainsFunc(scenarios, func(sc scenario) bool { return sc.name == name }) {
				t.Errorf("profile %s names scenario %q, which does not exist", p.name, name)
			}
		}
	}
}
