package clustercache

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/autoscaler/replicas"
	"github.com/tidal-autoscaler/tidal/internal/heapbytes"
)

// fullPod is a pod as a cluster holds it: environment, volumes, probes,
// annotations, owner, managed fields and container statuses beside what
// the controller reads.
func fullPod(name string) *corev1.Pod {
	start := metav1.NewTime(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	req := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
	}
	var env []corev1.EnvVar
	for i := range 30 {
		env = append(env, corev1.EnvVar{Name: fmt.Sprintf("SETTING_%d", i), Value: fmt.Sprintf("value-of-setting-number-%d", i)})
	}
	container := func(n string) corev1.Container {
		return corev1.Container{
			Name: n, Image: "team/app:1.2.3", Args: []string{"--port=8080", "--log-level=info"},
			Env: env, Resources: req,
			Ports:          []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			VolumeMounts:   []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app"}, {Name: "token", MountPath: "/var/run/secrets"}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready"}}},
		}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "shop", UID: types.UID("uid-" + name), ResourceVersion: "42",
			Labels:          map[string]string{"app": "web", "pod-template-hash": "5d8f7"},
			Annotations:     map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-03-01T11:00:00Z", "prometheus.io/scrape": "true"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d8f7", UID: "rs"}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate}},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{container("app"), container("proxy")},
			InitContainers: []corev1.Container{container("migrate"), func() corev1.Container {
				c := container("log-shipper")
				c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
				return c
			}()},
			Volumes:  []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web"}}}}},
			NodeName: "node-1", ServiceAccountName: "web",
			Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, StartTime: &start, PodIP: "10.0.0.7",
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: start},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(start.Add(40 * time.Second))},
			},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, Image: "team/app:1.2.3", ImageID: "sha256:0123456789abcdef"}},
		},
	}
}

// The slim pod converts exactly as the full one (replicas.FromV1Pod, the
// controller's only reader of pod content besides labels), and keeps
// what the informer and the selectors need.
func TestSlimPodKeepsWhatTheControllerReads(t *testing.T) {
	tests := []struct {
		title  string
		mutate func(*corev1.Pod)
	}{
		{title: "running and ready, containers, a sidecar and overhead", mutate: func(*corev1.Pod) {}},
		{title: "pod-level requests", mutate: func(p *corev1.Pod) {
			p.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
		}},
		{title: "being deleted", mutate: func(p *corev1.Pod) {
			now := metav1.Now()
			p.DeletionTimestamp = &now
		}},
		{title: "pending, not started, no conditions", mutate: func(p *corev1.Pod) {
			p.Status = corev1.PodStatus{Phase: corev1.PodPending}
		}},
		{title: "unready", mutate: func(p *corev1.Pod) {
			p.Status.Conditions[1].Status = corev1.ConditionFalse
		}},
		{title: "failed", mutate: func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }},
		{title: "no init containers", mutate: func(p *corev1.Pod) { p.Spec.InitContainers = nil }},
	}
	for _, tt := range tests {
		t.Run(tt.title, func(t *testing.T) {
			full := fullPod("web-1")
			tt.mutate(full)
			want := replicas.FromV1Pod(full)
			wantMeta := full.ObjectMeta.DeepCopy()

			got, err := CacheTransform(full.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			slim := got.(*corev1.Pod)
			if got := replicas.FromV1Pod(slim); !reflect.DeepEqual(got, want) {
				t.Errorf("FromV1Pod differs after slimPod (-full +slim):\n%s", diff.Diff(want, got))
			}
			if slim.Name != wantMeta.Name || slim.Namespace != wantMeta.Namespace || slim.UID != wantMeta.UID ||
				slim.ResourceVersion != wantMeta.ResourceVersion || !labels.Equals(slim.Labels, wantMeta.Labels) {
				t.Errorf("metadata %+v, want name, namespace, uid, resourceVersion and labels of %+v", slim.ObjectMeta, wantMeta)
			}
			if slim.Annotations != nil || slim.ManagedFields != nil || slim.OwnerReferences != nil || slim.Spec.Volumes != nil ||
				slim.Spec.Containers[0].Env != nil || slim.Status.ContainerStatuses != nil || len(slim.Status.Conditions) > 1 {
				t.Errorf("slim pod kept more than it needs: %+v", slim)
			}
		})
	}
}

// Other objects of the factory (HorizontalPodAutoscalers) only lose their
// managed fields.
func TestCacheTransformStripsOthers(t *testing.T) {
	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{
		Name: "web", Annotations: map[string]string{"autoscaling.tidal.dev/history": "h"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
	}, Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 3}}
	got, err := CacheTransform(hpa.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	want := hpa.DeepCopy()
	want.ManagedFields = nil
	if !reflect.DeepEqual(want, got) {
		t.Errorf("(-want +got):\n%s", diff.Diff(want, got))
	}
}

// TestCustomResourceTransform: the HorizontalAutoscaler cache keeps every
// annotation but kubectl's last-applied copy, and no managed fields.
func TestCustomResourceTransform(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		want        map[string]string
	}{
		{name: "last-applied dropped, others kept",
			annotations: map[string]string{lastApplied: `{"spec":{}}`, "team": "shop"}, want: map[string]string{"team": "shop"}},
		{name: "only last-applied", annotations: map[string]string{lastApplied: `{}`}, want: nil},
		{name: "none", annotations: nil, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: tt.annotations,
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
			got, err := CustomResourceTransform(obj)
			if err != nil {
				t.Fatal(err)
			}
			m := got.(*metav1.PartialObjectMetadata)
			if !reflect.DeepEqual(m.Annotations, tt.want) || m.ManagedFields != nil {
				t.Errorf("annotations %v, managed fields %v; want %v, none", m.Annotations, m.ManagedFields, tt.want)
			}
		})
	}
}

// BenchmarkPodCacheBytes reports the heap a cached pod holds, as the
// informer keeps it (decoded, so that no two pods share memory), with
// and without slimPod.
func BenchmarkPodCacheBytes(b *testing.B) {
	data, err := json.Marshal(fullPod("web"))
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		transform func(any) (any, error)
	}{
		{"managed-fields-stripped", StripManagedFields},
		{"slim", CacheTransform},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var perPod float64
			for b.Loop() {
				perPod = heapbytes.PerObject(1000, func(int) any {
					p := &corev1.Pod{}
					if err := json.Unmarshal(data, p); err != nil {
						b.Fatal(err)
					}
					slim, _ := tc.transform(p)
					return slim
				})
			}
			b.ReportMetric(perPod, "bytes/pod")
		})
	}
}
