package v1alpha1

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// TestTidalSpecInSpec: spec.dryRun and spec.fallback are fields of spec,
// beside spec.maxReplicas, with encoding/json, sigs.k8s.io/yaml and the
// unstructured converter (the dynamic client's), and in a list's items.
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
	if err := yaml.UnmarshalStrict([]byte(manifest), &ha); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ha.Spec.TidalSpec, want) || !ha.Spec.DryRun || ha.Spec.Fallback.Replicas != 6 {
		t.Errorf("TidalSpec = %+v, want %+v", ha.Spec.TidalSpec, want)
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
	for _, k := range []string{"HorizontalPodAutoscalerSpec", "TidalSpec"} {
		if _, ok := spec[k]; ok {
			t.Errorf("%s written as a field: %s", k, raw)
		}
	}
	var decoded HorizontalAutoscaler
	if err := json.Unmarshal(raw, &decoded); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&decoded, &ha) {
		t.Errorf("after the JSON round trip:\n%+v\nwant\n%+v", decoded, ha)
	}

	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&ha)
	if err != nil {
		t.Fatal(err)
	}
	uspec := u["spec"].(map[string]any)
	if uspec["dryRun"] != true || uspec["maxReplicas"] != int64(10) || uspec["fallback"].(map[string]any)["replicas"] != int64(6) {
		t.Errorf("unstructured spec = %v", uspec)
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
	if !reflect.DeepEqual(listBack.Items[0].Spec.TidalSpec, want) {
		t.Errorf("list item TidalSpec = %+v", listBack.Items[0].Spec.TidalSpec)
	}

	if c := ha.DeepCopy(); c.Spec.Fallback == ha.Spec.Fallback || c.Spec.MinReplicas == ha.Spec.MinReplicas {
		t.Error("DeepCopy shares spec.fallback or spec.minReplicas")
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
	ha := HorizontalAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: HorizontalAutoscalerSpec{HorizontalPodAutoscalerSpec: spec}}
	raw, err := json.Marshal(ha)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(spec)
	if !strings.Contains(string(raw), `"spec":`+string(want)) {
		t.Errorf("written %s, want spec %s", raw, want)
	}
}

// TestNoCustomJSON: the types are encoded by reflection over their json
// tags alone, as every serializer path (apimachinery's, the unstructured
// converter, apply) expects of an API type.
func TestNoCustomJSON(t *testing.T) {
	marshaler := reflect.TypeFor[json.Marshaler]()
	unmarshaler := reflect.TypeFor[json.Unmarshaler]()
	for _, v := range []any{HorizontalAutoscaler{}, HorizontalAutoscalerSpec{}, TidalSpec{}, HorizontalAutoscalerStatus{}, HorizontalAutoscalerList{}} {
		typ := reflect.TypeOf(v)
		for _, tt := range []reflect.Type{typ, reflect.PointerTo(typ)} {
			if tt.Implements(marshaler) || tt.Implements(unmarshaler) {
				t.Errorf("%v has its own JSON encoding", tt)
			}
		}
	}
}

// TestFieldNamesAreCaseSensitive: as with the apiserver's serializer, a
// field spelled in another case is not read, by apimachinery's JSON
// decoding (utiljson, the codec factory the clients use) nor by the
// unstructured converter. (encoding/json alone would read it.)
func TestFieldNamesAreCaseSensitive(t *testing.T) {
	const doc = `{"apiVersion":"autoscaling.tidal.dev/v1alpha1","kind":"HorizontalAutoscaler","spec":{"DryRun":true,"MaxReplicas":3,"Fallback":{"replicas":2}}}`
	check := func(t *testing.T, ha *HorizontalAutoscaler) {
		t.Helper()
		if ha.Spec.DryRun || ha.Spec.MaxReplicas != 0 || ha.Spec.Fallback != nil {
			t.Errorf("read %+v", ha.Spec)
		}
	}
	t.Run("utiljson", func(t *testing.T) {
		var ha HorizontalAutoscaler
		if err := utiljson.Unmarshal([]byte(doc), &ha); err != nil {
			t.Fatal(err)
		}
		check(t, &ha)
	})
	t.Run("codecfactory", func(t *testing.T) {
		scheme := runtime.NewScheme()
		if err := AddToScheme(scheme); err != nil {
			t.Fatal(err)
		}
		obj, _, err := serializer.NewCodecFactory(scheme).UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		check(t, obj.(*HorizontalAutoscaler))
	})
	t.Run("unstructured", func(t *testing.T) {
		var u map[string]any
		if err := json.Unmarshal([]byte(doc), &u); err != nil {
			t.Fatal(err)
		}
		var ha HorizontalAutoscaler
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u, &ha); err != nil {
			t.Fatal(err)
		}
		check(t, &ha)
	})
}
