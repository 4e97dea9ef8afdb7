package explain

import (
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
)

// The fixture is a sync at 5 replicas: cpu at 113% of a 60% target
// proposes 10, rps at 33.9 of 80 proposes 3, the queue metric failed; the
// scale-up policy (4 pods per 15s) limits 10 to 9.

var (
	cpuSpec = autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](60)}}}
	rpsSpec = autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "rps"},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("80"))}}}
	queueSpec = autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "queue_length"},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("30"))}}}

	cpuStatus = autoscalingv2.MetricStatus{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{
		Name: corev1.ResourceCPU, Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr.To[int32](113), AverageValue: ptr.To(resource.MustParse("565m"))}}}
	rpsStatus = autoscalingv2.MetricStatus{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricStatus{
		Metric: autoscalingv2.MetricIdentifier{Name: "rps"}, Current: autoscalingv2.MetricValueStatus{AverageValue: ptr.To(resource.MustParse("33900m"))}}}

	queueError = "unable to get external metric shop/queue_length/nil: unable to fetch metrics from external metrics API: the server could not find the requested resource"
	cpuName    = "cpu resource utilization (percentage of request)"
	transition = metav1.NewTime(time.Date(2026, 5, 4, 10, 30, 0, 0, time.UTC))
)

func conditions() []autoscalingv2.HorizontalPodAutoscalerCondition {
	return []autoscalingv2.HorizontalPodAutoscalerCondition{
		{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionTrue, Reason: "SucceededRescale", Message: "the HPA controller was able to update the target scale to 9", LastTransitionTime: transition},
		{Type: autoscalingv2.ScalingActive, Status: corev1.ConditionTrue, Reason: "ValidMetricFound", Message: "the HPA was able to successfully calculate a replica count from " + cpuName, LastTransitionTime: transition},
		{Type: autoscalingv2.ScalingLimited, Status: corev1.ConditionTrue, Reason: "ScaleUpLimit", Message: "the desired replica count is increasing faster than the maximum scale rate", LastTransitionTime: transition},
		{Type: autoscalingv2.ScaledToZero, Status: corev1.ConditionFalse, Reason: "NotScaledToZero", Message: "the HPA controller did not scale the workload to zero", LastTransitionTime: transition},
	}
}

// web is the fixture's HorizontalAutoscaler, reconciled.
func web() *v1alpha1.HorizontalAutoscaler {
	return &v1alpha1.HorizontalAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", Generation: 1},
		Spec: v1alpha1.HorizontalAutoscalerSpec{HorizontalPodAutoscalerSpec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](2),
			MaxReplicas:    20,
			Metrics:        []autoscalingv2.MetricSpec{cpuSpec, rpsSpec, queueSpec},
		}},
		Status: v1alpha1.HorizontalAutoscalerStatus{
			HorizontalPodAutoscalerStatus: autoscalingv2.HorizontalPodAutoscalerStatus{
				ObservedGeneration: ptr.To[int64](1),
				CurrentReplicas:    5,
				DesiredReplicas:    9,
				LastScaleTime:      &transition,
				CurrentMetrics:     []autoscalingv2.MetricStatus{cpuStatus, rpsStatus, {}},
				Conditions:         conditions(),
			},
			Tidal: &v1alpha1.TidalStatus{
				Reference: "Deployment/web",
				Targets:   "cpu: 113%/60%, 33900m/80 + 1 more...",
				Decision: &v1alpha1.Decision{
					CurrentReplicas: 5,
					Proposals: []v1alpha1.MetricProposal{
						{Name: cpuName, Replicas: ptr.To[int32](10)},
						{Name: "pods metric rps", Replicas: ptr.To[int32](3)},
						{Name: "external metric queue_length(nil)", Error: queueError},
					},
					Winner:             cpuName,
					ProposedReplicas:   10,
					StabilizedReplicas: ptr.To[int32](10),
					DesiredReplicas:    9,
					Adjustments: []v1alpha1.Adjustment{{Reason: "ScaleUpLimit", From: 10, To: 9,
						Message: "the desired replica count is increasing faster than the maximum scale rate"}},
				},
			},
		},
	}
}

// webHPA is the fixture as an autoscaling/v2 HPA reconciled in native mode.
func webHPA() *autoscalingv2.HorizontalPodAutoscaler {
	ha := web()
	return &autoscalingv2.HorizontalPodAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: ha.ObjectMeta,
		Spec:       ha.Spec.HorizontalPodAutoscalerSpec,
		Status:     ha.Status.HorizontalPodAutoscalerStatus,
	}
}
