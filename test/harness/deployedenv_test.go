package harness

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestContainerEnv: the values the kubelet gives a plain variable (as
// written) and a CPU request through the downward API (rounded up to the
// divisor).
func TestContainerEnv(t *testing.T) {
	ref := func(container, res, divisor string) *corev1.EnvVarSource {
		s := &corev1.ResourceFieldSelector{ContainerName: container, Resource: res}
		if divisor != "" {
			s.Divisor = resource.MustParse(divisor)
		}
		return &corev1.EnvVarSource{ResourceFieldRef: s}
	}
	for _, tc := range []struct {
		name    string
		request string
		from    *corev1.EnvVarSource
		want    []string
		wantErr bool
	}{
		{"50m rounds up to 1", "50m", ref("", "requests.cpu", "1"), []string{"GOMAXPROCS=1"}, false},
		{"1500m rounds up to 2", "1500m", ref("", "requests.cpu", "1"), []string{"GOMAXPROCS=2"}, false},
		{"a whole core", "2", ref("", "requests.cpu", "1"), []string{"GOMAXPROCS=2"}, false},
		{"no divisor is 1", "250m", ref("", "requests.cpu", ""), []string{"GOMAXPROCS=1"}, false},
		{"divisor in millicores", "250m", ref("", "requests.cpu", "1m"), []string{"GOMAXPROCS=250"}, false},
		{"no request gives 0, which Go ignores", "", ref("", "requests.cpu", "1"), []string{"GOMAXPROCS=0"}, false},
		{"this container named", "50m", ref("c", "requests.cpu", "1"), []string{"GOMAXPROCS=1"}, false},
		{"another container's is left out", "50m", ref("other", "requests.cpu", "1"), nil, false},
		{"a plain value as written", "50m", nil, []string{"GOMAXPROCS=7"}, false},
		{"memory is refused", "50m", ref("", "limits.memory", "1"), nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := corev1.Container{Name: "c", Env: []corev1.EnvVar{{Name: "GOMAXPROCS", Value: "7", ValueFrom: tc.from}}}
			if tc.from == nil {
				c.Env[0].ValueFrom = nil
			}
			if tc.request != "" {
				c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(tc.request)}
			}
			got, err := containerEnv(c)
			if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
				t.Errorf("containerEnv = %q, %v; want %q (error %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// TestAutoscalerEnv: the installed Deployment's autoscaler gets one
// GOMAXPROCS, its CPU request rounded up, and the GODEBUG that keeps Go's
// monitor thread at its slowest poll.
func TestAutoscalerEnv(t *testing.T) {
	env, err := AutoscalerEnv()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"GOMAXPROCS=1", "GODEBUG=schedtrace=2147483647"}
	if !slices.Equal(env, want) {
		t.Errorf("AutoscalerEnv() = %q, want %q (manifests/autoscaler.yaml: GOMAXPROCS from a 50m request, GODEBUG as written)", env, want)
	}
}
