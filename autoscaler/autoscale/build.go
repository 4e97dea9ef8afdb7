package autoscale

import (
	"errors"
	"fmt"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
)

// Options are the values that decide the object, as the flags give them.
// Min, Max and CPUPercent are -1 when unset, as kubectl's.
type Options struct {
	Namespace  string
	Name       string
	Min        int32
	Max        int32
	CPUPercent int32
	Metrics    []string
}

// kinds maps the accepted target types (kubectl's names and short names)
// to apps/v1 kinds.
var kinds = map[string]string{
	"deployment": "Deployment", "deployments": "Deployment", "deploy": "Deployment",
	"statefulset": "StatefulSet", "statefulsets": "StatefulSet", "sts": "StatefulSet",
	"replicaset": "ReplicaSet", "replicasets": "ReplicaSet", "rs": "ReplicaSet",
}

// ParseTarget resolves TYPE/NAME or TYPE NAME (args) to an apps/v1 scale
// target reference.
func ParseTarget(args []string) (autoscalingv2.CrossVersionObjectReference, error) {
	var typ, name string
	switch len(args) {
	case 1:
		var ok bool
		if typ, name, ok = strings.Cut(args[0], "/"); !ok {
			return autoscalingv2.CrossVersionObjectReference{}, fmt.Errorf("target %q: expected TYPE/NAME or TYPE NAME, e.g. deployment/web", args[0])
		}
	case 2:
		typ, name = args[0], args[1]
	default:
		return autoscalingv2.CrossVersionObjectReference{}, errors.New("expected one target: TYPE/NAME or TYPE NAME, e.g. deployment/web")
	}
	// deployment.apps and deployments.v1.apps, as kubectl accepts them.
	base, group, _ := strings.Cut(strings.ToLower(typ), ".")
	kind, ok := kinds[base]
	if !ok || (group != "" && group != "apps" && group != "v1.apps") {
		return autoscalingv2.CrossVersionObjectReference{}, fmt.Errorf("target type %q: expected deployment (deploy), statefulset (sts) or replicaset (rs)", typ)
	}
	if name == "" {
		return autoscalingv2.CrossVersionObjectReference{}, fmt.Errorf("target %q: the name is empty", strings.Join(args, " "))
	}
	return autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: kind, Name: name}, nil
}

// Spec builds the autoscaling/v2 spec both objects share: kubectl's
// --min/--max/--cpu-percent handling, then the --metric entries in order.
func Spec(target autoscalingv2.CrossVersionObjectReference, o Options) (autoscalingv2.HorizontalPodAutoscalerSpec, error) {
	if o.Max < 1 {
		return autoscalingv2.HorizontalPodAutoscalerSpec{}, errors.New("--max=MAXPODS is required and must be at least 1")
	}
	if o.Min > o.Max {
		return autoscalingv2.HorizontalPodAutoscalerSpec{}, fmt.Errorf("--min=%d is greater than --max=%d: --max must be greater than or equal to --min", o.Min, o.Max)
	}
	spec := autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: target, MaxReplicas: o.Max}
	if o.Min > 0 {
		m := o.Min
		spec.MinReplicas = &m
	}
	if o.CPUPercent > 0 {
		p := o.CPUPercent
		spec.Metrics = append(spec.Metrics, autoscalingv2.MetricSpec{
			Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &p}},
		})
	}
	for _, s := range o.Metrics {
		m, err := ParseMetric(s)
		if err != nil {
			return autoscalingv2.HorizontalPodAutoscalerSpec{}, err
		}
		spec.Metrics = append(spec.Metrics, m)
	}
	return spec, nil
}

func objectMeta(target autoscalingv2.CrossVersionObjectReference, o Options) metav1.ObjectMeta {
	name := o.Name
	if name == "" {
		name = target.Name
	}
	return metav1.ObjectMeta{Name: name, Namespace: o.Namespace}
}

// HorizontalAutoscaler builds tidal's HorizontalAutoscaler for target.
func HorizontalAutoscaler(target autoscalingv2.CrossVersionObjectReference, o Options) (*v1alpha1.HorizontalAutoscaler, error) {
	spec, err := Spec(target, o)
	if err != nil {
		return nil, err
	}
	return &v1alpha1.HorizontalAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: objectMeta(target, o),
		Spec:       v1alpha1.HorizontalAutoscalerSpec{HorizontalPodAutoscalerSpec: spec},
	}, nil
}

// HorizontalPodAutoscaler builds an autoscaling/v2 HorizontalPodAutoscaler
// for target (--native).
func HorizontalPodAutoscaler(target autoscalingv2.CrossVersionObjectReference, o Options) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	spec, err := Spec(target, o)
	if err != nil {
		return nil, err
	}
	return &autoscalingv2.HorizontalPodAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: autoscalingv2.SchemeGroupVersion.String(), Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: objectMeta(target, o),
		Spec:       spec,
	}, nil
}
