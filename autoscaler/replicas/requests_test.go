package replicas

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func reqs(milli int64) map[corev1.ResourceName]int64 {
	return map[corev1.ResourceName]int64{cpu: milli}
}

func TestRequests(t *testing.T) {
	base := Pod{
		Name:       "p",
		Containers: []Container{{Name: "app", Requests: reqs(300)}, {Name: "proxy", Requests: reqs(50)}},
		InitContainers: []InitContainer{
			{Container: Container{Name: "setup", Requests: reqs(1000)}},
			{Container: Container{Name: "logs", Requests: reqs(20)}, Sidecar: true},
		},
	}
	noReqInit := base
	noReqInit.InitContainers = []InitContainer{{Container: Container{Name: "setup"}}}
	noReqSidecar := base
	noReqSidecar.InitContainers = []InitContainer{{Container: Container{Name: "logs"}, Sidecar: true}}
	noReqContainer := base
	noReqContainer.Containers = []Container{{Name: "app", Requests: reqs(300)}, {Name: "proxy"}}
	podLevel := base
	podLevel.PodLevelRequests = map[corev1.ResourceName]int64{cpu: 2000}
	podLevelMemOnly := base
	podLevelMemOnly.PodLevelRequests = map[corev1.ResourceName]int64{corev1.ResourceMemory: 1 << 30}

	tests := []struct {
		name      string
		cfg       Config
		pod       Pod
		container string
		want      int64
		wantErr   string
	}{
		// 300 + 50 regular + 20 sidecar; the plain init container is excluded.
		{name: "containers plus sidecars", cfg: DefaultConfig(), pod: base, want: 370},
		{name: "plain init container without request is fine", cfg: DefaultConfig(), pod: noReqInit, want: 350},
		{name: "sidecar without request fails", cfg: DefaultConfig(), pod: noReqSidecar, wantErr: "missing request for cpu in container logs of Pod p"},
		{name: "container without request fails", cfg: DefaultConfig(), pod: noReqContainer, wantErr: "missing request for cpu in container proxy of Pod p"},
		{name: "named container", cfg: DefaultConfig(), pod: base, container: "proxy", want: 50},
		{name: "named container ignores others without request", cfg: DefaultConfig(), pod: noReqContainer, container: "app", want: 300},
		{name: "named sidecar", cfg: DefaultConfig(), pod: base, container: "logs", want: 20},
		{name: "named plain init container is not found", cfg: DefaultConfig(), pod: base, container: "setup", wantErr: "container setup not found in Pod p"},
		{name: "named container without request", cfg: DefaultConfig(), pod: noReqContainer, container: "proxy", wantErr: "missing request for cpu in container proxy of Pod p"},
		{name: "pod-level requests win", cfg: DefaultConfig(), pod: podLevel, want: 2000},
		{name: "named container wins over pod-level", cfg: DefaultConfig(), pod: podLevel, container: "app", want: 300},
		{name: "pod-level gate off uses containers", cfg: Config{PodLevelResources: false}, pod: podLevel, want: 370},
		{name: "pod-level set without the resource fails", cfg: DefaultConfig(), pod: podLevelMemOnly, wantErr: "missing pod-level request for cpu in Pod p"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.cfg.Requests([]Pod{tt.pod}, tt.container, cpu)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got["p"] != tt.want {
				t.Errorf("request = %d, want %d", got["p"], tt.want)
			}
		})
	}
}

func TestFromV1Pod(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	start := metav1.NewTime(testNow.Add(-time.Hour))
	del := metav1.NewTime(testNow)
	q := resource.MustParse
	base := func() *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web-1"},
			Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{cpu: q("250m"), corev1.ResourceMemory: q("64Mi")}}}},
				InitContainers: []corev1.Container{
					{Name: "setup", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{cpu: q("2")}}},
					{Name: "logs", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{cpu: q("100m")}}},
				},
			},
			Status: corev1.PodStatus{
				Phase:     corev1.PodRunning,
				StartTime: &start,
				Conditions: []corev1.PodCondition{
					{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
					{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: start},
					{Type: corev1.PodReady, Status: corev1.ConditionTrue},
				},
			},
		}
	}
	podLevel := base()
	podLevel.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{cpu: q("1")}}
	podLevel.Spec.Overhead = corev1.ResourceList{cpu: q("10m")}
	unsupportedPodLevel := base()
	unsupportedPodLevel.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{"example.com/gpu": q("1")}}
	deleted := base()
	deleted.DeletionTimestamp = &del

	tests := []struct {
		name           string
		pod            *corev1.Pod
		wantCPURequest int64 // whole-pod cpu request via Config.Requests
		wantPodLevel   bool
		wantDeleted    bool
	}{
		// 250m + sidecar 100m; the 2-core plain init container is excluded.
		{name: "containers and sidecar", pod: base(), wantCPURequest: 350},
		// pod-level 1 core plus 10m overhead, as component-helpers PodRequests computes.
		{name: "pod-level requests include overhead", pod: podLevel, wantCPURequest: 1010, wantPodLevel: true},
		{name: "unsupported pod-level resource is not pod-level", pod: unsupportedPodLevel, wantCPURequest: 350},
		{name: "deletion timestamp", pod: deleted, wantCPURequest: 350, wantDeleted: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := FromV1Pod(tt.pod)
			if p.Name != "web-1" || p.Phase != corev1.PodRunning || p.Deleted != tt.wantDeleted {
				t.Errorf("identity: %+v", p)
			}
			if p.StartTime == nil || !p.StartTime.Equal(start.Time) {
				t.Errorf("start time = %v", p.StartTime)
			}
			// the first Ready condition is the one used
			if p.Ready == nil || p.Ready.Status != corev1.ConditionFalse || !p.Ready.LastTransitionTime.Equal(start.Time) {
				t.Errorf("ready = %+v", p.Ready)
			}
			if len(p.InitContainers) != 2 || p.InitContainers[0].Sidecar || !p.InitContainers[1].Sidecar {
				t.Errorf("init containers = %+v", p.InitContainers)
			}
			if (p.PodLevelRequests != nil) != tt.wantPodLevel {
				t.Errorf("pod-level = %v, want set=%v", p.PodLevelRequests, tt.wantPodLevel)
			}
			got, err := DefaultConfig().Requests([]Pod{p}, "", cpu)
			if err != nil {
				t.Fatal(err)
			}
			if got["web-1"] != tt.wantCPURequest {
				t.Errorf("cpu request = %d, want %d", got["web-1"], tt.wantCPURequest)
			}
		})
	}
}
