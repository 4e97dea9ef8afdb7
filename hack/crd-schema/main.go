// Command crd-schema adds to the HorizontalAutoscaler CRD what controller-gen
// cannot derive: the spec reuses the autoscaling/v2 Go types, whose
// validation lives in the apiserver's code rather than in markers, so the
// bounds, enums, defaults and rules the apiserver applies to a
// HorizontalPodAutoscaler are added here, at their place in the schema.
//
// Usage: go run ./hack/crd-schema FILE (rewrites FILE in place).
// hack/update-codegen.sh runs it after controller-gen.
package main

import (
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"
)

// A patch merges fields into the schema node at path. Path elements are
// property names; "[]" steps into a list's items.
type patch struct {
	path   string
	fields map[string]any
}

func scalingRulesPatches(dir string, defaults map[string]any) []patch {
	base := "spec.behavior." + dir
	return []patch{
		{base, map[string]any{"default": defaults}},
		{base + ".stabilizationWindowSeconds", map[string]any{"minimum": 0, "maximum": 3600}},
		{base + ".selectPolicy", map[string]any{"enum": []any{"Max", "Min", "Disabled"}}},
		{base + ".policies", map[string]any{"minItems": 1}},
		{base + ".policies.[].type", map[string]any{"enum": []any{"Pods", "Percent"}}},
		{base + ".policies.[].value", map[string]any{"minimum": 1}},
		{base + ".policies.[].periodSeconds", map[string]any{"minimum": 1, "maximum": 1800}},
		{base + ".tolerance", quantityRule(false)},
	}
}

// Quantity patterns: the suffix of resource.Quantity's (controller-gen
// writes it on every quantity), after a mantissa that is not negative, or
// (positive) not negative and not zero. Patterns and minimum rather than
// CEL rules: any CEL rule on an int-or-string (a string of unbounded
// length) in the unbounded metrics list exceeds the apiserver's cost
// budget, and the quantity library's sign() is not in every apiserver.
const (
	quantitySuffix  = `(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`
	nonNegative     = `^\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))` + quantitySuffix
	positive        = `^\+?(([0-9]*[1-9][0-9]*(\.[0-9]*)?)|([0-9]*\.[0-9]*[1-9][0-9]*))` + quantitySuffix
	pathSegmentName = `^([^/%.][^/%]*|\.[^/%.][^/%]*|\.\.[^/%]+)$`
)

// quantityRule checks an int-or-string quantity: the pattern a string,
// minimum an integer.
func quantityRule(mustBePositive bool) map[string]any {
	if mustBePositive {
		return map[string]any{"pattern": positive, "minimum": 1}
	}
	return map[string]any{"pattern": nonNegative, "minimum": 0}
}

// rule is one CEL rule with its message, on the node it is patched into.
func rule(cel, message string) map[string]any {
	return map[string]any{"rule": cel, "message": message}
}

// targetPatches are the apiserver's validateMetricTarget and the per-source
// target checks (validation.go in pkg/apis/autoscaling/validation), with
// its messages.
func targetPatches(source string) []patch {
	base := "spec.metrics.[]." + source + ".target"
	ps := []patch{
		{base + ".type", map[string]any{"enum": []any{"Utilization", "Value", "AverageValue"}}},
		{base + ".value", quantityRule(true)},
		{base + ".averageValue", quantityRule(true)},
		{base + ".averageUtilization", map[string]any{"minimum": 1}},
	}
	var rules []any
	switch source {
	case "resource", "containerResource":
		rules = []any{
			rule("has(self.averageUtilization) || has(self.averageValue)", "must set either a target raw value or a target utilization"),
			rule("!has(self.averageUtilization) || !has(self.averageValue)", "may not set both a target raw value and a target utilization"),
		}
	case "pods":
		rules = []any{rule("has(self.averageValue)", "must specify a positive target averageValue")}
	case "object":
		rules = []any{rule("has(self.value) || has(self.averageValue)", "must set either a target value or averageValue")}
	case "external":
		rules = []any{
			rule("has(self.value) || has(self.averageValue)", "must set either a target value for metric or a per-pod target"),
			rule("!has(self.value) || !has(self.averageValue)", "may not set both a target value for metric and a per-pod target"),
		}
	}
	ps = append(ps, patch{base, map[string]any{"x-kubernetes-validations": rules}})
	switch source {
	case "resource":
		ps = append(ps, patch{"spec.metrics.[].resource.name", map[string]any{"minLength": 1}})
	case "containerResource":
		ps = append(ps,
			patch{"spec.metrics.[].containerResource.name", map[string]any{"minLength": 1}},
			// ValidateDNS1123Label, as a container's name.
			patch{"spec.metrics.[].containerResource.container", map[string]any{
				"minLength": 1, "maxLength": 63, "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
			}})
	default:
		// validateMetricIdentifier: a name, usable as a path segment (not
		// "." or "..", no "/" or "%").
		ps = append(ps, patch{"spec.metrics.[]." + source + ".metric.name", map[string]any{
			"minLength": 1, "pattern": pathSegmentName,
		}})
	}
	return ps
}

func patches() []patch {
	ps := []patch{
		// apiserver validation of autoscaling/v2 with the HPAScaleToZero gate
		// on (beta, default on in v1.37): minReplicas >= 0, maxReplicas >= 1.
		// Defaulting: minReplicas 1.
		{"spec.minReplicas", map[string]any{"minimum": 0, "default": 1}},
		{"spec.maxReplicas", map[string]any{"minimum": 1}},
		// Defaulting: no metrics means 80% average cpu utilization. A CRD
		// default applies only when the field is absent; the controller
		// applies the same default to an explicit empty list.
		{"spec.metrics", map[string]any{
			"default": []any{map[string]any{
				"type": "Resource",
				"resource": map[string]any{
					"name":   "cpu",
					"target": map[string]any{"type": "Utilization", "averageUtilization": 80},
				},
			}},
		}},
		{"spec.metrics.[].type", map[string]any{"enum": []any{"Object", "Pods", "Resource", "ContainerResource", "External"}}},
		{"spec.metrics.[]", map[string]any{"x-kubernetes-validations": []any{rule(
			"(self.type == 'Object') == has(self.object) && (self.type == 'Pods') == has(self.pods) && "+
				"(self.type == 'Resource') == has(self.resource) && (self.type == 'ContainerResource') == has(self.containerResource) && "+
				"(self.type == 'External') == has(self.external)",
			"must populate exactly the metric source that type names")}}},
		{"spec.scaleTargetRef.kind", map[string]any{"minLength": 1}},
		{"spec.scaleTargetRef.name", map[string]any{"minLength": 1}},
		// Defaulting when behavior is set: each missing direction gets its
		// default rules. scaleDown's window stays unset: the controller's
		// --horizontal-pod-autoscaler-downscale-stabilization applies.
		{"spec.behavior.scaleUp.selectPolicy", map[string]any{"default": "Max"}},
		{"spec.behavior.scaleDown.selectPolicy", map[string]any{"default": "Max"}},
		{"spec.behavior.scaleUp.stabilizationWindowSeconds", map[string]any{"default": 0}},
		{"spec.behavior.scaleUp.policies", map[string]any{"default": []any{
			map[string]any{"type": "Pods", "value": 4, "periodSeconds": 15},
			map[string]any{"type": "Percent", "value": 100, "periodSeconds": 15},
		}}},
		{"spec.behavior.scaleDown.policies", map[string]any{"default": []any{
			map[string]any{"type": "Percent", "value": 100, "periodSeconds": 15},
		}}},
	}
	ps = append(ps, scalingRulesPatches("scaleUp", map[string]any{
		"selectPolicy":               "Max",
		"stabilizationWindowSeconds": 0,
		"policies": []any{
			map[string]any{"type": "Pods", "value": 4, "periodSeconds": 15},
			map[string]any{"type": "Percent", "value": 100, "periodSeconds": 15},
		},
	})...)
	ps = append(ps, scalingRulesPatches("scaleDown", map[string]any{
		"selectPolicy": "Max",
		"policies":     []any{map[string]any{"type": "Percent", "value": 100, "periodSeconds": 15}},
	})...)
	for _, src := range []string{"resource", "containerResource", "pods", "object", "external"} {
		ps = append(ps, targetPatches(src)...)
	}
	// Tidal's own spec fields (v1alpha1.TidalSpec: spec.dryRun,
	// spec.fallback) and their rule are the Go type's, with markers:
	// controller-gen writes them.
	//
	// minReplicas 0 (scale to zero) needs an Object or External metric.
	ps = append(ps, patch{"spec", map[string]any{"x-kubernetes-validations": []any{map[string]any{
		"rule":      "!has(self.minReplicas) || self.minReplicas != 0 || (has(self.metrics) && self.metrics.exists(m, m.type == 'Object' || m.type == 'External'))",
		"message":   "must specify at least one Object or External metric to support scaling to zero replicas",
		"fieldPath": ".metrics",
	}}}})
	return ps
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crd-schema FILE")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintf(os.Stderr, "crd-schema: %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func run(file string) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	header := ""
	if strings.HasPrefix(string(raw), "---\n") {
		header = "---\n"
	}
	var crd map[string]any
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		return err
	}
	versions, _ := dig(crd, "spec", "versions").([]any)
	if len(versions) == 0 {
		return fmt.Errorf("no spec.versions")
	}
	for _, v := range versions {
		root, ok := dig(v, "schema", "openAPIV3Schema").(map[string]any)
		if !ok {
			return fmt.Errorf("a version has no schema.openAPIV3Schema")
		}
		for _, p := range patches() {
			node, err := schemaAt(root, p.path)
			if err != nil {
				return err
			}
			for k, val := range p.fields {
				switch k {
				case "x-kubernetes-validations":
					existing, _ := node[k].([]any)
					val = append(existing, val.([]any)...)
				}
				node[k] = val
			}
		}
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		return err
	}
	return os.WriteFile(file, append([]byte(header), out...), 0o644)
}

func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// schemaAt finds the schema node of a dotted path such as
// "spec.metrics.[].type".
func schemaAt(root map[string]any, path string) (map[string]any, error) {
	node := root
	for _, el := range strings.Split(path, ".") {
		var next any
		if el == "[]" {
			next = node["items"]
		} else {
			next = dig(node, "properties", el)
		}
		m, ok := next.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("schema path %q: no %q", path, el)
		}
		node = m
	}
	return node, nil
}
