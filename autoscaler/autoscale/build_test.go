package autoscale

import (
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
)

func TestParseTarget(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    autoscalingv2.CrossVersionObjectReference
		wantErr string
	}{
		{name: "deployment/web", args: []string{"deployment/web"}, want: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
		{name: "deploy web", args: []string{"deploy", "web"}, want: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
		{name: "deployments.apps", args: []string{"deployments.apps/web"}, want: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
		{name: "sts", args: []string{"sts/db"}, want: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db"}},
		{name: "statefulset", args: []string{"StatefulSet/db"}, want: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db"}},
		{name: "rs", args: []string{"rs/x"}, want: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "x"}},
		{name: "replicaset", args: []string{"replicaset", "x"}, want: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "x"}},
		{name: "no slash", args: []string{"web"}, wantErr: "expected TYPE/NAME or TYPE NAME"},
		{name: "unknown type", args: []string{"rc/web"}, wantErr: `target type "rc": expected deployment`},
		{name: "other group", args: []string{"deployment.extensions/web"}, wantErr: "target type"},
		{name: "empty name", args: []string{"deploy/"}, wantErr: "the name is empty"},
		{name: "three args", args: []string{"deploy", "a", "b"}, wantErr: "expected one target"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTarget(tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseTarget(%q) = %v, %v; want error containing %q", tt.args, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseTarget(%q) = %v, %v; want %v", tt.args, got, err, tt.want)
			}
		})
	}
}

var web = autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}

func cpu(p int32) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: "cpu", Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(p)}}}
}

func rps(avg string) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "rps"},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: qty(avg)}}}
}

func TestSpec(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		want    autoscalingv2.HorizontalPodAutoscalerSpec
		wantErr string
	}{{
		name: "min max cpu",
		opts: Options{Min: 2, Max: 10, CPUPercent: 60},
		want: autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: web, MinReplicas: ptr.To[int32](2), MaxReplicas: 10,
			Metrics: []autoscalingv2.MetricSpec{cpu(60)}},
	}, {
		name: "defaults leave min and metrics to the server, as kubectl",
		opts: Options{Min: -1, Max: 5, CPUPercent: -1},
		want: autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: web, MaxReplicas: 5},
	}, {
		name: "cpu first, then metrics in flag order",
		opts: Options{Min: 1, Max: 3, CPUPercent: 50, Metrics: []string{"pods:rps:avg=100", "pods:rps:avg=7"}},
		want: autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: web, MinReplicas: ptr.To[int32](1), MaxReplicas: 3,
			Metrics: []autoscalingv2.MetricSpec{cpu(50), rps("100"), rps("7")}},
	}, {
		name: "min equal to max",
		opts: Options{Min: 4, Max: 4, CPUPercent: -1},
		want: autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: web, MinReplicas: ptr.To[int32](4), MaxReplicas: 4},
	},
		{name: "min greater than max", opts: Options{Min: 11, Max: 10, CPUPercent: -1}, wantErr: "--min=11 is greater than --max=10"},
		{name: "max missing", opts: Options{Min: -1, Max: -1, CPUPercent: -1}, wantErr: "--max=MAXPODS is required"},
		{name: "bad metric", opts: Options{Min: -1, Max: 3, CPUPercent: -1, Metrics: []string{"pods:rps"}}, wantErr: `--metric "pods:rps"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Spec(web, tt.opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Spec = %v; want error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !apiequality.Semantic.DeepEqual(tt.want, got) {
				t.Errorf("(-want +got):\n%s", diff.Diff(tt.want, got))
			}
		})
	}
}

func TestObjects(t *testing.T) {
	spec := autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: web, MinReplicas: ptr.To[int32](2), MaxReplicas: 10,
		Metrics: []autoscalingv2.MetricSpec{cpu(60)}}
	tests := []struct {
		name       string
		opts       Options
		wantCRD    *v1alpha1.HorizontalAutoscaler
		wantNative *autoscalingv2.HorizontalPodAutoscaler
	}{{
		name: "named after the target",
		opts: Options{Namespace: "shop", Min: 2, Max: 10, CPUPercent: 60},
		wantCRD: &v1alpha1.HorizontalAutoscaler{
			TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling.tidal.dev/v1alpha1", Kind: "HorizontalAutoscaler"},
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
			Spec:       v1alpha1.HorizontalAutoscalerSpec{HorizontalPodAutoscalerSpec: spec}},
		wantNative: &autoscalingv2.HorizontalPodAutoscaler{
			TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"},
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
			Spec:       spec},
	}, {
		name: "--name",
		opts: Options{Namespace: "shop", Name: "web-hpa", Min: 2, Max: 10, CPUPercent: 60},
		wantCRD: &v1alpha1.HorizontalAutoscaler{
			TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling.tidal.dev/v1alpha1", Kind: "HorizontalAutoscaler"},
			ObjectMeta: metav1.ObjectMeta{Name: "web-hpa", Namespace: "shop"},
			Spec:       v1alpha1.HorizontalAutoscalerSpec{HorizontalPodAutoscalerSpec: spec}},
		wantNative: &autoscalingv2.HorizontalPodAutoscaler{
			TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"},
			ObjectMeta: metav1.ObjectMeta{Name: "web-hpa", Namespace: "shop"},
			Spec:       spec},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			crd, err := HorizontalAutoscaler(web, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if !apiequality.Semantic.DeepEqual(tt.wantCRD, crd) {
				t.Errorf("HorizontalAutoscaler (-want +got):\n%s", diff.Diff(tt.wantCRD, crd))
			}
			native, err := HorizontalPodAutoscaler(web, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if !apiequality.Semantic.DeepEqual(tt.wantNative, native) {
				t.Errorf("HorizontalPodAutoscaler (-want +got):\n%s", diff.Diff(tt.wantNative, native))
			}
		})
	}
	bad := Options{Min: 3, Max: 2, CPUPercent: -1}
	if _, err := HorizontalAutoscaler(web, bad); err == nil {
		t.Error("HorizontalAutoscaler accepted --min > --max")
	}
	if _, err := HorizontalPodAutoscaler(web, bad); err == nil {
		t.Error("HorizontalPodAutoscaler accepted --min > --max")
	}
}
