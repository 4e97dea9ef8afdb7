package v1alpha1_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
	"sigs.k8s.io/yaml"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/autoscaler/source"
)

const (
	docFile = "../../../../docs/crd.md"
	crdPath = "../../../../manifests/crd/autoscaling.tidal.dev_horizontalautoscalers.yaml"
)

// yamlBlocks returns the ```yaml blocks of a Markdown file with the line
// each starts on.
func yamlBlocks(t *testing.T, file string) (blocks []string, lines []int) {
	t.Helper()
	raw, err := os.ReadFile(filepath.FromSlash(file))
	if err != nil {
		t.Fatal(err)
	}
	var cur *strings.Builder
	for i, line := range strings.Split(string(raw), "\n") {
		switch {
		case cur == nil && strings.TrimSpace(line) == "```yaml":
			cur = &strings.Builder{}
			lines = append(lines, i+2)
		case cur != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	if cur != nil {
		t.Fatalf("%s: a ```yaml block is not closed", file)
	}
	return blocks, lines
}

// crdValidator validates an object as the CRD's schema does: the OpenAPI
// schema (types, enums, bounds, patterns, required fields) and the CEL
// rules of x-kubernetes-validations. Defaults are not applied first; the
// rules hold for the objects as written.
type crdValidator struct {
	schema  map[string]any
	openapi *spec.Schema
}

func newCRDValidator(t *testing.T) crdValidator {
	t.Helper()
	raw, err := os.ReadFile(filepath.FromSlash(crdPath))
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				}
			}
		}
	}
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("%d versions in the CRD", len(crd.Spec.Versions))
	}
	s := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	openapi := &spec.Schema{}
	if err := json.Unmarshal(b, openapi); err != nil {
		t.Fatal(err)
	}
	return crdValidator{schema: s, openapi: openapi}
}

// validate returns every way obj (decoded from JSON) fails the schema.
func (v crdValidator) validate(obj map[string]any) []string {
	var problems []string
	if res := validate.NewSchemaValidator(v.openapi, nil, "", strfmt.Default).Validate(obj); res != nil {
		for _, err := range res.Errors {
			problems = append(problems, err.Error())
		}
	}
	return append(problems, celProblems(v.schema, integers(obj), "")...)
}

// celProblems evaluates the x-kubernetes-validations rules of node on
// value and of its properties and items on theirs.
func celProblems(node map[string]any, value any, path string) []string {
	var problems []string
	rules, _ := node["x-kubernetes-validations"].([]any)
	for _, r := range rules {
		rule := r.(map[string]any)
		ok, err := evalRule(rule["rule"].(string), value)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: rule %q: %v", path, rule["rule"], err))
		case !ok:
			problems = append(problems, fmt.Sprintf("%s%v: %v", path, rule["fieldPath"], rule["message"]))
		}
	}
	switch val := value.(type) {
	case map[string]any:
		props, _ := node["properties"].(map[string]any)
		for name, sub := range props {
			if child, ok := val[name]; ok {
				problems = append(problems, celProblems(sub.(map[string]any), child, path+"."+name)...)
			}
		}
	case []any:
		if items, ok := node["items"].(map[string]any); ok {
			for i, child := range val {
				problems = append(problems, celProblems(items, child, fmt.Sprintf("%s[%d]", path, i))...)
			}
		}
	}
	return problems
}

func evalRule(rule string, self any) (bool, error) {
	env, err := cel.NewEnv(cel.Variable("self", cel.DynType))
	if err != nil {
		return false, err
	}
	ast, iss := env.Compile(rule)
	if iss.Err() != nil {
		return false, iss.Err()
	}
	prg, err := env.Program(ast)
	if err != nil {
		return false, err
	}
	out, _, err := prg.Eval(map[string]any{"self": self})
	if err != nil {
		return false, err
	}
	ok, isBool := out.Value().(bool)
	if !isBool {
		return false, fmt.Errorf("not a boolean: %v", out)
	}
	return ok, nil
}

// integers turns JSON's whole float64 numbers into int64, as the
// apiserver gives integer fields to CEL.
func integers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = integers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = integers(e)
		}
	case float64:
		if x == math.Trunc(x) {
			return int64(x)
		}
	}
	return v
}

// TestDocExamples decodes every ```yaml block of docs/crd.md strictly
// into its kind's Go type; a HorizontalAutoscaler must also pass the
// CRD's schema and rules, an HPA's tidal annotations must read without a
// problem.
func TestDocExamples(t *testing.T) {
	blocks, lines := yamlBlocks(t, docFile)
	if len(blocks) < 8 {
		t.Fatalf("%d yaml blocks in %s", len(blocks), docFile)
	}
	v := newCRDValidator(t)
	for i, block := range blocks {
		t.Run(fmt.Sprintf("line %d", lines[i]), func(t *testing.T) {
			var meta struct{ APIVersion, Kind string }
			if err := yaml.Unmarshal([]byte(block), &meta); err != nil {
				t.Fatal(err)
			}
			switch meta.APIVersion + " " + meta.Kind {
			case v1alpha1.SchemeGroupVersion.String() + " " + v1alpha1.Kind:
				var ha v1alpha1.HorizontalAutoscaler
				if err := yaml.UnmarshalStrict([]byte(block), &ha); err != nil {
					t.Fatal(err)
				}
				var obj map[string]any
				if err := yaml.Unmarshal([]byte(block), &obj); err != nil {
					t.Fatal(err)
				}
				for _, p := range v.validate(obj) {
					t.Error(p)
				}
			case "autoscaling/v2 HorizontalPodAutoscaler":
				var hpa autoscalingv2.HorizontalPodAutoscaler
				if err := yaml.UnmarshalStrict([]byte(block), &hpa); err != nil {
					t.Fatal(err)
				}
				ext := source.ObjectOfHPA(&hpa).Extensions()
				for _, p := range []string{ext.DryRunProblem, ext.FallbackProblem, ext.PodSelectionProblem, ext.HoldProblem} {
					if p != "" {
						t.Error(p)
					}
				}
			default:
				t.Fatalf("apiVersion %q kind %q: every example is a whole HorizontalAutoscaler or HorizontalPodAutoscaler", meta.APIVersion, meta.Kind)
			}
		})
	}
}

// TestDocExamplesValidatorRejects checks that the validator of
// TestDocExamples catches what the apiserver would refuse, so that a
// passing example means something.
func TestDocExamplesValidatorRejects(t *testing.T) {
	v := newCRDValidator(t)
	const base = `apiVersion: autoscaling.tidal.dev/v1alpha1
kind: HorizontalAutoscaler
metadata: {name: web}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
`
	tests := []struct {
		name, spec, want string
	}{
		{name: "valid", spec: "  maxReplicas: 3\n"},
		{name: "min above max (CEL)", spec: "  minReplicas: 4\n  maxReplicas: 3\n", want: "maxReplicas must be greater than or equal to minReplicas"},
		{name: "zero without object or external (CEL)", spec: "  minReplicas: 0\n  maxReplicas: 3\n", want: "scaling to zero replicas"},
		{name: "fallback outside the range (CEL)", spec: "  maxReplicas: 3\n  fallback: {failureThreshold: 1, replicas: 5}\n", want: "fallback.replicas must be within"},
		{name: "source not matching type (CEL)", spec: "  maxReplicas: 3\n  metrics: [{type: Pods, resource: {name: cpu, target: {type: Utilization, averageUtilization: 50}}}]\n", want: "must populate exactly the metric source"},
		{name: "unknown fallback behavior (enum)", spec: "  maxReplicas: 3\n  fallback: {failureThreshold: 1, replicas: 2, behavior: sometimes}\n", want: "behavior"},
		{name: "max below 1 (minimum)", spec: "  maxReplicas: 0\n", want: "maxReplicas"},
		{name: "negative quantity (pattern)", spec: "  maxReplicas: 3\n  metrics: [{type: Pods, pods: {metric: {name: rps}, target: {type: AverageValue, averageValue: \"-1\"}}}]\n", want: "averageValue"},
		{name: "window too long (maximum)", spec: "  maxReplicas: 3\n  behavior: {scaleDown: {stabilizationWindowSeconds: 3601}}\n", want: "stabilizationWindowSeconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(base+tt.spec), &obj); err != nil {
				t.Fatal(err)
			}
			problems := strings.Join(v.validate(obj), "\n")
			if tt.want == "" && problems != "" {
				t.Errorf("problems:\n%s", problems)
			}
			if tt.want != "" && !regexp.MustCompile(regexp.QuoteMeta(tt.want)).MatchString(problems) {
				t.Errorf("problems %q do not contain %q", problems, tt.want)
			}
		})
	}
}
