package v1alpha1

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// TestTidalSpecInSpec: spec.dryRun and spec.fallback are read into Tidal
// and written back inside spec, by encoding/json, sigs.k8s.io/yaml and the
// unstructured converter (the dynamic client's).
func TestTidalSpecInSpec(t *testing.T) {
	const manifest = `
apiVersion: autoscaling.tidal.dev/v1alpha1
kind: HorizontalAutoscaler
metadata: {name: web, namespace: default}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 2
  maxReplicas: 10
  dryRun: true
  fallback: {failureThreshold: 3, replicas: 6, behavior: currentReplicasIfHigher}
status:
  desiredReplicas: 4
  tidal: {metricFailures: 2}
`
	want := TidalSpec{DryRun: true, Fallback: &Fallback{FailureThreshold: 3, Replicas: 6, Behavior: FallbackCurrentReplicasIfHigher}}
	var ha HorizontalAutoscaler
	if err := yaml.Unmarshal([]byte(manifest), &ha); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ha.Tidal, want) {
		t.Errorf("Tidal = %+v, want %+v", ha.Tidal, want)
	}
	if ha.Spec.MaxReplicas != 10 || *ha.Spec.MinReplicas != 2 || ha.Spec.ScaleTargetRef.Name != "web" || ha.Name != "web" ||
		ha.Status.DesiredReplicas != 4 || ha.Status.Tidal.MetricFailures != 2 {
		t.Errorf("the rest was not read: %+v", ha)
	}

	raw, err := json.Marshal(&ha)
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := json.Unmarshal(raw, &generic); err != nil {
		t.Fatal(err)
	}
	spec := generic["spec"].(map[string]any)
	if spec["dryRun"] != true || spec["fallback"].(map[string]any)["behavior"] != "currentReplicasIfHigher" || spec["maxReplicas"] != float64(10) {
		t.Errorf("written spec = %v", spec)
	}
	if _, ok := generic["Tidal"]; ok {
		t.Errorf("Tidal written at the top: %s", raw)
	}

	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&ha)
	if err != nil {
		t.Fatal(err)
	}
	if u["spec"].(map[string]any)["dryRun"] != true {
		t.Errorf("unstructured spec = %v", u["spec"])
	}
	var back HorizontalAutoscaler
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, &ha) {
		t.Errorf("after the unstructured round trip:\n%+v\nwant\n%+v", back, ha)
	}

	// A list's items too.
	list := HorizontalAutoscalerList{Items: []HorizontalAutoscaler{ha}}
	raw, err = json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	var listBack HorizontalAutoscalerList
	if err := json.Unmarshal(raw, &listBack); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(listBack.Items[0].Tidal, want) {
		t.Errorf("list item Tidal = %+v", listBack.Items[0].Tidal)
	}
}

// TestNoTidalSpecWritesTheHPASpec: without tidal's fields, spec is written
// byte for byte as the autoscaling/v2 spec (nothing added, not even zero
// values).
func TestNoTidalSpecWritesTheHPASpec(t *testing.T) {
	spec := autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
		MinReplicas:    ptr.To[int32](1), MaxReplicas: 5,
	}
	ha := HorizontalAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: spec}
	raw, err := json.Marshal(ha)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(spec)
	if !strings.Contains(string(raw), `"spec":`+string(want)) {
		t.Errorf("written %s, want spec %s", raw, want)
	}
}

// TestFieldNamesAreCaseSensitive: as the apiserver's serializer, a field
// spelled in another case is not read.
func TestFieldNamesAreCaseSensitive(t *testing.T) {
	var ha HorizontalAutoscaler
	if err := json.Unmarshal([]byte(`{"spec":{"DryRun":true,"MaxReplicas":3}}`), &ha); err != nil {
		t.Fatal(err)
	}
	if ha.Tidal.DryRun || ha.Spec.MaxReplicas != 0 {
		t.Errorf("read %+v %+v", ha.Tidal, ha.Spec)
	}
}
