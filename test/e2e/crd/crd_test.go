// Package crd applies manifests/crd to a real kube-apiserver and checks
// what the apiserver does with it: defaults, CEL validation, the status
// subresource and the printer columns; and what it answers to the
// autoscaler's status writes, in crd and native mode.
package crd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/test/harness"
)

var env struct {
	h   *harness.Harness
	dyn dynamic.Interface
	err error
}

// TestMain starts one apiserver (no controllers) and applies the CRD.
func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	h, err := harness.Start(ctx, harness.Options{})
	if err == nil {
		env.h = h
		env.err = setup(ctx, h)
	} else {
		env.err = err
	}
	cancel()
	code := m.Run()
	if h != nil {
		if err := h.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop harness:", err)
		}
	}
	os.Exit(code)
}

func setup(ctx context.Context, h *harness.Harness) error {
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	if _, err := h.ApplyCRDs(ctx, filepath.Join(root, "manifests", "crd")); err != nil {
		return err
	}
	if env.dyn, err = dynamic.NewForConfig(h.Admin); err != nil {
		return err
	}
	return h.EnsureNamespace(ctx, "crd")
}

func client(t *testing.T) dynamic.ResourceInterface {
	t.Helper()
	if env.err != nil {
		t.Fatalf("environment: %v", env.err)
	}
	return env.dyn.Resource(v1alpha1.GroupVersionResource).Namespace("crd")
}

func object(t *testing.T, yamlish string) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := json.Unmarshal([]byte(yamlish), &obj.Object); err != nil {
		t.Fatal(err)
	}
	obj.SetAPIVersion(v1alpha1.SchemeGroupVersion.String())
	obj.SetKind(v1alpha1.Kind)
	return obj
}

// TestDefaults checks that the apiserver applies the defaults an
// autoscaling/v2 HPA gets: minReplicas 1, a cpu 80% metric, and the
// behavior rules of a direction that is given without them.
func TestDefaults(t *testing.T) {
	c := client(t)
	obj := object(t, `{"metadata":{"name":"defaults"},"spec":{
		"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},
		"maxReplicas":5,
		"behavior":{"scaleUp":{"stabilizationWindowSeconds":30},"scaleDown":{"selectPolicy":"Min"}}}}`)
	got, err := c.Create(context.Background(), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := got.Object["spec"].(map[string]any)
	checks := []struct {
		path []string
		want string
	}{
		{[]string{"minReplicas"}, `1`},
		{[]string{"metrics"}, `[{"resource":{"name":"cpu","target":{"averageUtilization":80,"type":"Utilization"}},"type":"Resource"}]`},
		{[]string{"behavior", "scaleUp"}, `{"policies":[{"periodSeconds":15,"type":"Pods","value":4},{"periodSeconds":15,"type":"Percent","value":100}],"selectPolicy":"Max","stabilizationWindowSeconds":30}`},
		{[]string{"behavior", "scaleDown"}, `{"policies":[{"periodSeconds":15,"type":"Percent","value":100}],"selectPolicy":"Min"}`},
	}
	for _, ck := range checks {
		v, found, err := unstructured.NestedFieldNoCopy(spec, ck.path...)
		if err != nil || !found {
			t.Errorf("spec.%s: not set (%v)", strings.Join(ck.path, "."), err)
			continue
		}
		data, _ := json.Marshal(v)
		if string(data) != ck.want {
			t.Errorf("spec.%s = %s, want %s", strings.Join(ck.path, "."), data, ck.want)
		}
	}
}

// TestTidalSpecFields: spec.dryRun and spec.fallback are kept (not
// pruned), fallback.behavior defaults to static, and the typed object reads
// them into spec (Spec.TidalSpec).
func TestTidalSpecFields(t *testing.T) {
	c := client(t)
	obj := object(t, `{"metadata":{"name":"tidal-spec"},"spec":{
		"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},
		"maxReplicas":5,"dryRun":true,"fallback":{"failureThreshold":2,"replicas":3}}}`)
	got, err := c.Create(context.Background(), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(got.Object)
	if err != nil {
		t.Fatal(err)
	}
	var ha v1alpha1.HorizontalAutoscaler
	if err := json.Unmarshal(data, &ha); err != nil {
		t.Fatal(err)
	}
	want := v1alpha1.TidalSpec{DryRun: true, Fallback: &v1alpha1.Fallback{FailureThreshold: 2, Replicas: 3, Behavior: v1alpha1.FallbackStatic}}
	if ha.Spec.DryRun != want.DryRun || ha.Spec.Fallback == nil || *ha.Spec.Fallback != *want.Fallback || ha.Spec.MaxReplicas != 5 {
		t.Errorf("spec read as %+v (fallback %+v), want %+v (fallback %+v); stored %s", ha.Spec.TidalSpec, ha.Spec.Fallback, want, want.Fallback, data)
	}
}

// TestPodSelectionAndHoldFields: spec.scaleDownPodSelection and
// spec.holdScaleDownDuringRollout are kept (not pruned) and read into
// Spec.TidalSpec.
func TestPodSelectionAndHoldFields(t *testing.T) {
	c := client(t)
	obj := object(t, `{"metadata":{"name":"pod-selection"},"spec":{
		"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},
		"maxReplicas":5,"scaleDownPodSelection":{"metric":{"type":"Pods","name":"rps"}},"holdScaleDownDuringRollout":true}}`)
	got, err := c.Create(context.Background(), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(got.Object)
	if err != nil {
		t.Fatal(err)
	}
	var ha v1alpha1.HorizontalAutoscaler
	if err := json.Unmarshal(data, &ha); err != nil {
		t.Fatal(err)
	}
	if p := ha.Spec.ScaleDownPodSelection; p == nil || p.Metric.Type != "Pods" || p.Metric.Name != "rps" || !ha.Spec.HoldScaleDownDuringRollout {
		t.Errorf("spec read as %+v; stored %s", ha.Spec.TidalSpec, data)
	}
}

// TestValidation checks that the CEL rules reject what the apiserver
// rejects for an HPA, with clear messages.
func TestValidation(t *testing.T) {
	c := client(t)
	tests := []struct {
		name, spec string
		// want are substrings of the error; empty: accepted.
		want []string
	}{
		{
			name: "min greater than max",
			spec: `{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"minReplicas":5,"maxReplicas":2}`,
			want: []string{"spec.maxReplicas", "maxReplicas must be greater than or equal to minReplicas"},
		},
		{
			name: "min equal to max",
			spec: `{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"minReplicas":2,"maxReplicas":2}`,
		},
		{
			name: "scale to zero without an object or external metric",
			spec: `{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"minReplicas":0,"maxReplicas":2}`,
			want: []string{"spec.metrics", "Object or External metric"},
		},
		{
			name: "scale to zero with an external metric",
			spec: `{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"minReplicas":0,"maxReplicas":2,
				"metrics":[{"type":"External","external":{"metric":{"name":"q"},"target":{"type":"Value","value":"1"}}}]}`,
		},
		{
			name: "metric type without its source",
			spec: `{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"maxReplicas":2,
				"metrics":[{"type":"Pods","resource":{"name":"cpu","target":{"type":"Utilization","averageUtilization":50}}}]}`,
			want: []string{"must populate exactly the metric source that type names"},
		},
		{
			name: "stabilization window too long",
			spec: `{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"maxReplicas":2,
				"behavior":{"scaleDown":{"stabilizationWindowSeconds":3601}}}`,
			want: []string{"stabilizationWindowSeconds", "3600"},
		},
		{
			name: "negative tolerance",
			spec: `{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"maxReplicas":2,
				"behavior":{"scaleUp":{"tolerance":"-0.05"}}}`,
			want: []string{"spec.behavior.scaleUp.tolerance", "should match"},
		},
		{
			name: "negative integer tolerance",
			spec: `{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"maxReplicas":2,
				"behavior":{"scaleDown":{"tolerance":-1}}}`,
			want: []string{"spec.behavior.scaleDown.tolerance", "should be greater than or equal to 0"},
		},
		{
			name: "zero tolerance, an integer",
			spec: `{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"maxReplicas":2,
				"behavior":{"scaleDown":{"tolerance":0},"scaleUp":{"tolerance":"50m"}}}`,
		},
		{
			name: "zero target value",
			spec: `{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"maxReplicas":2,
				"metrics":[{"type":"External","external":{"metric":{"name":"q"},"target":{"type":"Value","value":"0"}}}]}`,
			want: []string{"spec.metrics[0].external.target.value", "should match"},
		},
		{
			name: "negative integer averageValue",
			spec: `{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"maxReplicas":2,
				"metrics":[{"type":"Pods","pods":{"metric":{"name":"rps"},"target":{"type":"AverageValue","averageValue":-3}}}]}`,
			want: []string{"spec.metrics[0].pods.target.averageValue", "should be greater than or equal to 1"},
		},
		{
			name: "pods metric without averageValue",
			spec: `{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"maxReplicas":2,
				"metrics":[{"type":"Pods","pods":{"metric":{"name":"rps"},"target":{"type":"Value","value":"3"}}}]}`,
			want: []string{"must specify a positive target averageValue"},
		},
		{
			name: "resource metric with utilization and value",
			spec: `{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"maxReplicas":2,
				"metrics":[{"type":"Resource","resource":{"name":"cpu","target":{"type":"Utilization","averageUtilization":50,"averageValue":"100m"}}}]}`,
			want: []string{"may not set both a target raw value and a target utilization"},
		},
		{
			name: "object metric without a target value",
			spec: `{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"maxReplicas":2,
				"metrics":[{"type":"Object","object":{"describedObject":{"apiVersion":"v1","kind":"Service","name":"web"},"metric":{"name":"rps"},"target":{"type":"Value"}}}]}`,
			want: []string{"must set either a target value or averageValue"},
		},
		{
			name: "metric name with a slash",
			spec: `{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"maxReplicas":2,
				"metrics":[{"type":"External","external":{"metric":{"name":"queue/depth"},"target":{"type":"AverageValue","averageValue":"5"}}}]}`,
			want: []string{"spec.metrics[0].external.metric.name", "should match"},
		},
		// Tidal's own spec fields (v1alpha1.TidalSpec).
		{
			name: "dry run and a fallback",
			spec: `{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"minReplicas":2,"maxReplicas":10,
				"dryRun":true,"fallback":{"failureThreshold":3,"replicas":10,"behavior":"currentReplicasIfHigher"}}`,
		},
		{
			name: "dryRun not a boolean",
			spec: `{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"maxReplicas":2,"dryRun":"yes"}`,
			want: []string{"spec.dryRun", "must be of type boolean"},
		},
		{
			name: "fallback replicas negative",
			spec: `{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"minReplicas":0,"maxReplicas":2,
				"metrics":[{"type":"External","external":{"metric":{"name":"q"},"target":{"type":"Value","value":"1"}}}],
				"fallback":{"failureThreshold":3,"replicas":-1}}`,
			want: []string{"spec.fallback.replicas", "greater than or equal to 0"},
		},
		{
			name: "fallback failureThreshold below 1",
			spec: `{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"maxReplicas":2,"fallback":{"failureThreshold":0,"replicas":1}}`,
			want: []string{"spec.fallback.failureThreshold", "greater than or equal to 1"},
		},
		{
			name: "fallback unknown behavior",
			spec: `{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"maxReplicas":2,"fallback":{"failureThreshold":1,"replicas":1,"behavior":"max"}}`,
			want: []string{"spec.fallback.behavior", "Unsupported value", "currentReplicasIfLower"},
		},
		{
			name: "fallback without replicas",
			spec: `{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"maxReplicas":2,"fallback":{"failureThreshold":1}}`,
			want: []string{"spec.fallback.replicas", "Required value"},
		},
		{
			name: "fallback replicas above maxReplicas",
			spec: `{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"maxReplicas":4,"fallback":{"failureThreshold":1,"replicas":5}}`,
			want: []string{"spec.fallback.replicas", "fallback.replicas must be within [minReplicas, maxReplicas]"},
		},
		{
			name: "fallback replicas below minReplicas",
			spec: `{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"minReplicas":3,"maxReplicas":4,"fallback":{"failureThreshold":1,"replicas":2}}`,
			want: []string{"spec.fallback.replicas", "fallback.replicas must be within [minReplicas, maxReplicas]"},
		},
		{
			name: "fallback currentReplicas does not use replicas",
			spec: `{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"maxReplicas":4,"fallback":{"failureThreshold":1,"replicas":50,"behavior":"currentReplicas"}}`,
		},
		// spec.scaleDownPodSelection and spec.holdScaleDownDuringRollout.
		{
			name: "pod selection by a Resource metric and a rollout hold",
			spec: `{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"maxReplicas":4,
				"scaleDownPodSelection":{"metric":{"type":"Resource","name":"cpu"}},"holdScaleDownDuringRollout":true}`,
		},
		{
			name: "pod selection by a Pods metric",
			spec: `{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"maxReplicas":4,
				"scaleDownPodSelection":{"metric":{"type":"Pods","name":"rps"}}}`,
		},
		{
			name: "pod selection by an External metric",
			spec: `{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"maxReplicas":4,
				"scaleDownPodSelection":{"metric":{"type":"External","name":"queue"}}}`,
			want: []string{"spec.scaleDownPodSelection.metric.type", "Unsupported value", `"Resource", "Pods"`},
		},
		{
			name: "pod selection without a metric name",
			spec: `{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"maxReplicas":4,
				"scaleDownPodSelection":{"metric":{"type":"Resource","name":""}}}`,
			want: []string{"spec.scaleDownPodSelection.metric.name", "at least 1 chars long"},
		},
		{
			name: "pod selection without a metric",
			spec: `{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"maxReplicas":4,"scaleDownPodSelection":{}}`,
			want: []string{"spec.scaleDownPodSelection.metric", "Required value"},
		},
		{
			name: "holdScaleDownDuringRollout not a boolean",
			spec: `{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"maxReplicas":4,"holdScaleDownDuringRollout":"yes"}`,
			want: []string{"spec.holdScaleDownDuringRollout", "must be of type boolean"},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := object(t, fmt.Sprintf(`{"metadata":{"name":"validation-%d"},"spec":%s}`, i, tt.spec))
			_, err := c.Create(context.Background(), obj, metav1.CreateOptions{})
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestStatusSubresource checks that status is written only through
// /status, and spec not through it.
func TestStatusSubresource(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	obj := object(t, `{"metadata":{"name":"status","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}","team":"shop"}},"spec":{
		"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"maxReplicas":5},
		"status":{"desiredReplicas":9}}`)
	got, err := c.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(got.Object, "status", "desiredReplicas"); found {
		t.Error("status was accepted on create")
	}
	_ = unstructured.SetNestedField(got.Object, map[string]any{
		"desiredReplicas": int64(3), "currentReplicas": int64(2),
		"tidal": map[string]any{"reference": "Deployment/web", "targets": "cpu: 50%/80%"},
	}, "status")
	_ = unstructured.SetNestedField(got.Object, int64(7), "spec", "maxReplicas")
	// The autoscaler's cache drops the last-applied annotation
	// (clustercache.CustomResourceTransform): a status update without it
	// must keep it.
	got.SetAnnotations(map[string]string{"team": "shop"})
	updated, err := c.UpdateStatus(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkInt(t, updated, "status.desiredReplicas", 3)
	checkInt(t, updated, "spec.maxReplicas", 5) // unchanged
	if a := updated.GetAnnotations(); a["kubectl.kubernetes.io/last-applied-configuration"] != "{}" || a["team"] != "shop" {
		t.Errorf("annotations after a status update without last-applied: %v, want both kept", a)
	}
	if updated.GetGeneration() != got.GetGeneration() {
		t.Errorf("a status update bumped metadata.generation from %d to %d", got.GetGeneration(), updated.GetGeneration())
	}
}

// checkInt fails t unless obj's integer field at path (dotted) is want.
func checkInt(t *testing.T, obj *unstructured.Unstructured, path string, want int64) {
	t.Helper()
	if v, _, _ := unstructured.NestedInt64(obj.Object, strings.Split(path, ".")...); v != want {
		t.Errorf("%s = %d after the status write, want %d", path, v, want)
	}
}

// TestPrinterColumns checks `kubectl get` prints the columns as kubectl get
// hpa does, through the real kubectl.
func TestPrinterColumns(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	obj := object(t, `{"metadata":{"name":"printed"},"spec":{
		"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"minReplicas":2,"maxReplicas":5}}`)
	got, err := c.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(got.Object, map[string]any{
		"desiredReplicas": int64(3), "currentReplicas": int64(3),
		"tidal": map[string]any{"reference": "Deployment/web", "targets": "cpu: 50%/80%"},
	}, "status")
	if _, err := c.UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubectl := filepath.Join(env.h.ToolsDir(), "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		t.Skipf("no kubectl in the tools folder: %v", err)
	}
	out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig="+env.h.AdminKubeconfig, "-n", "crd", "get", "ha", "printed").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get ha: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		t.Fatalf("kubectl get printed %d lines:\n%s", len(lines), out)
	}
	header, row := strings.Fields(lines[0]), strings.Fields(lines[1])
	wantHeader := []string{"NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"}
	if strings.Join(header, " ") != strings.Join(wantHeader, " ") {
		t.Errorf("header %q, want %q", header, wantHeader)
	}
	// TARGETS holds spaces ("cpu: 50%/80%"), so check the row as text.
	for _, want := range []string{"printed", "Deployment/web", "cpu: 50%/80%", "2", "5", "3"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("row %q lacks %q", lines[1], want)
		}
	}
	if len(row) < 7 {
		t.Errorf("row %q has fewer than 7 fields", lines[1])
	}
	// The category makes `kubectl get tidal` list them too.
	out, err = exec.CommandContext(ctx, kubectl, "--kubeconfig="+env.h.AdminKubeconfig, "-n", "crd", "get", "tidal", "-o", "name").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "horizontalautoscaler.autoscaling.tidal.dev/printed") {
		t.Errorf("kubectl get tidal: %v\n%s", err, out)
	}
}
