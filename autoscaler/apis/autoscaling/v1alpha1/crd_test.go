package v1alpha1

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

const crdFile = "../../../../manifests/crd/autoscaling.tidal.dev_horizontalautoscalers.yaml"

func loadCRD(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.FromSlash(crdFile))
	if err != nil {
		t.Fatalf("%v (run hack/update-codegen.sh)", err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

// at follows a dotted path of map keys; "0" indexes a list.
func at(t *testing.T, v any, path string) any {
	t.Helper()
	for _, k := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			if k != "0" || len(x) == 0 {
				t.Fatalf("%s: cannot index a list with %q", path, k)
			}
			v = x[0]
		default:
			t.Fatalf("%s: no %q", path, k)
		}
	}
	return v
}

// schema returns the schema node of a spec field path such as
// "behavior.scaleUp.policies.[].periodSeconds".
func specSchema(t *testing.T, crd map[string]any, path string) map[string]any {
	t.Helper()
	node := at(t, crd, "spec.versions.0.schema.openAPIV3Schema.properties.spec").(map[string]any)
	if path == "" {
		return node
	}
	for _, el := range strings.Split(path, ".") {
		if el == "[]" {
			node = node["items"].(map[string]any)
			continue
		}
		next, ok := at(t, node, "properties."+el).(map[string]any)
		if !ok {
			t.Fatalf("spec.%s: no schema", path)
		}
		node = next
	}
	return node
}

func TestCRD(t *testing.T) {
	crd := loadCRD(t)
	if got := at(t, crd, "spec.group"); got != GroupName {
		t.Errorf("group = %v", got)
	}
	if got := at(t, crd, "spec.names.kind"); got != Kind {
		t.Errorf("kind = %v", got)
	}
	if got := at(t, crd, "spec.scope"); got != "Namespaced" {
		t.Errorf("scope = %v", got)
	}
	if got := at(t, crd, "spec.names.shortNames"); !reflect.DeepEqual(got, []any{"ha"}) {
		t.Errorf("shortNames = %v", got)
	}
	subs := at(t, crd, "spec.versions.0.subresources").(map[string]any)
	if _, ok := subs["status"]; !ok {
		t.Error("no status subresource")
	}
	if _, ok := subs["scale"]; ok {
		t.Error("a scale subresource: HPAs have none")
	}
	var columns []string
	for _, c := range at(t, crd, "spec.versions.0.additionalPrinterColumns").([]any) {
		columns = append(columns, c.(map[string]any)["name"].(string))
	}
	if want := []string{"Reference", "Targets", "MinPods", "MaxPods", "Replicas", "Age"}; !reflect.DeepEqual(columns, want) {
		t.Errorf("printer columns = %v, want %v", columns, want)
	}

	tests := []struct {
		name  string
		path  string
		key   string
		want  any
		exact bool
	}{
		{name: "maxReplicas at least 1", path: "maxReplicas", key: "minimum", want: float64(1)},
		{name: "minReplicas not negative", path: "minReplicas", key: "minimum", want: float64(0)},
		{name: "minReplicas defaults to 1", path: "minReplicas", key: "default", want: float64(1)},
		{name: "up window bounds", path: "behavior.scaleUp.stabilizationWindowSeconds", key: "maximum", want: float64(3600)},
		{name: "down window bounds", path: "behavior.scaleDown.stabilizationWindowSeconds", key: "minimum", want: float64(0)},
		{name: "period at least 1", path: "behavior.scaleUp.policies.[].periodSeconds", key: "minimum", want: float64(1)},
		{name: "period at most 1800", path: "behavior.scaleDown.policies.[].periodSeconds", key: "maximum", want: float64(1800)},
		{name: "policy value positive", path: "behavior.scaleDown.policies.[].value", key: "minimum", want: float64(1)},
		{name: "at least one policy", path: "behavior.scaleUp.policies", key: "minItems", want: float64(1)},
		{name: "select policies", path: "behavior.scaleDown.selectPolicy", key: "enum", want: []any{"Max", "Min", "Disabled"}},
		{name: "metric types", path: "metrics.[].type", key: "enum", want: []any{"Object", "Pods", "Resource", "ContainerResource", "External"}},
		{name: "default metric is 80% cpu", path: "metrics", key: "default", want: []any{map[string]any{"type": "Resource",
			"resource": map[string]any{"name": "cpu", "target": map[string]any{"type": "Utilization", "averageUtilization": float64(80)}}}}},
		{name: "dryRun is a boolean", path: "dryRun", key: "type", want: "boolean"},
		{name: "fallback threshold at least 1", path: "fallback.failureThreshold", key: "minimum", want: float64(1)},
		{name: "fallback replicas not negative", path: "fallback.replicas", key: "minimum", want: float64(0)},
		{name: "fallback behaviors", path: "fallback.behavior", key: "enum", want: []any{"static", "currentReplicas", "currentReplicasIfHigher", "currentReplicasIfLower"}},
		{name: "fallback behavior defaults to static", path: "fallback.behavior", key: "default", want: "static"},
		{name: "fallback needs threshold and replicas", path: "fallback", key: "required", want: []any{"failureThreshold", "replicas"}},
		{name: "default scale-up policies", path: "behavior.scaleUp.policies", key: "default", want: []any{
			map[string]any{"type": "Pods", "value": float64(4), "periodSeconds": float64(15)},
			map[string]any{"type": "Percent", "value": float64(100), "periodSeconds": float64(15)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := specSchema(t, crd, tt.path)[tt.key]; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("spec.%s %s = %v, want %v", tt.path, tt.key, got, tt.want)
			}
		})
	}

	rules := func(path string) string {
		var out []string
		for _, r := range specSchema(t, crd, path)["x-kubernetes-validations"].([]any) {
			out = append(out, r.(map[string]any)["rule"].(string))
		}
		return strings.Join(out, "\n")
	}
	for _, tt := range []struct{ path, want string }{
		{"", "self.minReplicas <= self.maxReplicas"},
		{"", "m.type == 'Object' || m.type == 'External'"},
		{"metrics.[]", "(self.type == 'Resource') == has(self.resource)"},
		{"", "self.fallback.replicas <= self.maxReplicas"},
	} {
		if got := rules(tt.path); !strings.Contains(got, tt.want) {
			t.Errorf("spec.%s rules %q do not contain %q", tt.path, got, tt.want)
		}
	}
}

// TestHPAManifestConverts checks that an autoscaling/v2 HPA becomes a
// HorizontalAutoscaler by changing apiVersion and kind only.
func TestHPAManifestConverts(t *testing.T) {
	const hpa = `
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web, namespace: default}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 2
  maxReplicas: 10
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 60}}
  behavior:
    scaleDown:
      stabilizationWindowSeconds: 60
      policies: [{type: Percent, value: 50, periodSeconds: 30}]
status:
  currentReplicas: 3
  desiredReplicas: 4
`
	var native autoscalingv2.HorizontalPodAutoscaler
	if err := yaml.UnmarshalStrict([]byte(hpa), &native); err != nil {
		t.Fatal(err)
	}
	converted := strings.NewReplacer("autoscaling/v2", "autoscaling.tidal.dev/v1alpha1", "HorizontalPodAutoscaler", "HorizontalAutoscaler").Replace(hpa)
	var ha HorizontalAutoscaler
	if err := yaml.UnmarshalStrict([]byte(converted), &ha); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ha.Spec.HorizontalPodAutoscalerSpec, native.Spec) || ha.Spec.TidalSpec != (TidalSpec{}) ||
		!reflect.DeepEqual(ha.Status.HorizontalPodAutoscalerStatus, native.Status) {
		t.Errorf("converted spec/status differ:\n%+v\n%+v", ha.Spec, native.Spec)
	}
	// And the spec serializes as an HPA's.
	if a, b := mustJSON(t, ha.Spec), mustJSON(t, native.Spec); a != b {
		t.Errorf("spec JSON %s, want %s", a, b)
	}
	// And the status serializes as an HPA's, tidal's block aside.
	a, _ := json.Marshal(ha.Status)
	b, _ := json.Marshal(native.Status)
	if string(a) != string(b) {
		t.Errorf("status JSON %s, want %s", a, b)
	}
	if ha.DeepCopy().Spec.Behavior == ha.Spec.Behavior {
		t.Error("DeepCopy shares spec.behavior")
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// TestStatusSchemaKeepsTheStatus: kube-apiserver stores a status as it is
// written: the CRD's status schema has a property for every field of the
// type (pruning drops none) and no defaults. The autoscaler relies on it:
// it keeps the object a status write stored without reading it back (see
// autoscaler/source's echoes).
func TestStatusSchemaKeepsTheStatus(t *testing.T) {
	status := at(t, loadCRD(t), "spec.versions.0.schema.openAPIV3Schema.properties.status").(map[string]any)
	var walk func(path string, typ reflect.Type, schema map[string]any)
	walk = func(path string, typ reflect.Type, schema map[string]any) {
		if _, ok := schema["default"]; ok {
			t.Errorf("status%s has a default in the CRD", path)
		}
		for typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		switch {
		case typ == reflect.TypeFor[metav1.Time]() || typ == reflect.TypeFor[resource.Quantity]():
			return // a string
		case typ.Kind() == reflect.Slice:
			items, ok := schema["items"].(map[string]any)
			if !ok {
				t.Errorf("status%s: no items in the CRD", path)
				return
			}
			walk(path+"[]", typ.Elem(), items)
		case typ.Kind() == reflect.Map:
			if _, ok := schema["additionalProperties"]; !ok {
				t.Errorf("status%s: a map without additionalProperties in the CRD", path)
			}
		case typ.Kind() == reflect.Struct:
			props, _ := schema["properties"].(map[string]any)
			for i := range typ.NumField() {
				f := typ.Field(i)
				name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
				if name == "-" || !f.IsExported() {
					continue
				}
				if name == "" && strings.Contains(opts, "inline") {
					walk(path, f.Type, schema)
					continue
				}
				sub, ok := props[name].(map[string]any)
				if !ok {
					t.Errorf("status%s.%s: no property in the CRD; kube-apiserver would prune it", path, name)
					continue
				}
				walk(path+"."+name, f.Type, sub)
			}
		}
	}
	walk("", reflect.TypeFor[HorizontalAutoscalerStatus](), status)
}
