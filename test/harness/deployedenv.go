package harness

import (
	"fmt"
	"math"
	"os"
	"path/filepath"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

// AutoscalerDeploymentFile is the autoscaler's Deployment as users install it.
const AutoscalerDeploymentFile = "manifests/autoscaler.yaml"

// AutoscalerEnv is the environment manifests/autoscaler.yaml gives the
// autoscaler (its GOMAXPROCS from the CPU request, its GODEBUG as written),
// as NAME=VALUE: every autoscaler the harness starts gets it, so that tests
// and benchmarks run the process as it is installed.
func AutoscalerEnv() ([]string, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	file := filepath.Join(root, AutoscalerDeploymentFile)
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var d appsv1.Deployment
	if err := yaml.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(d.Spec.Template.Spec.Containers) == 0 {
		return nil, fmt.Errorf("%s: no container", file)
	}
	env, err := containerEnv(d.Spec.Template.Spec.Containers[0])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return env, nil
}

// containerEnv is c's environment variables with the values the kubelet
// gives them: a value as written, and one taken from the container's own
// CPU request through the downward API as the quantity divided by the
// divisor, rounded up. Variables from other sources (fields, secrets,
// another container's resources) are left out: the manifest sets none.
func containerEnv(c corev1.Container) ([]string, error) {
	var env []string
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env = append(env, e.Name+"="+e.Value)
			continue
		}
		ref := e.ValueFrom.ResourceFieldRef
		if ref == nil || ref.ContainerName != "" && ref.ContainerName != c.Name {
			continue
		}
		if ref.Resource != "requests.cpu" {
			return nil, fmt.Errorf("env %s: resource %q: the harness computes only requests.cpu", e.Name, ref.Resource)
		}
		q := c.Resources.Requests[corev1.ResourceCPU]
		divisor := ref.Divisor
		if divisor.IsZero() {
			divisor = resource.MustParse("1")
		}
		// The kubelet's rounding (ExtractContainerResourceValue).
		v := int64(math.Ceil(float64(q.MilliValue()) / float64(divisor.MilliValue())))
		env = append(env, fmt.Sprintf("%s=%d", e.Name, v))
	}
	return env, nil
}
