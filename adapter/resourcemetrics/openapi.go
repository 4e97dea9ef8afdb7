package resourcemetrics

import (
	"strings"

	openapicommon "k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
	metricsv1 "k8s.io/metrics/pkg/apis/metrics/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	msopenapi "sigs.k8s.io/metrics-server/pkg/api/generated/openapi"
)

// GetOpenAPIDefinitions are the OpenAPI definitions of the metrics.k8s.io
// types, which the server's OpenAPI config must include.
var GetOpenAPIDefinitions openapicommon.GetOpenAPIDefinitions = withV1(msopenapi.GetOpenAPIDefinitions)

// withV1 adds metrics.k8s.io/v1's definitions to defs, which has only
// v1beta1's (metrics-server's generated code predates v1): the v1 types
// are v1beta1's field for field, so each v1beta1 definition is built again
// with its references renamed into v1.
func withV1(defs openapicommon.GetOpenAPIDefinitions) openapicommon.GetOpenAPIDefinitions {
	beta := prefix(metricsv1beta1.PodMetrics{}.OpenAPIModelName())
	v1 := prefix(metricsv1.PodMetrics{}.OpenAPIModelName())
	rename := func(name string) string {
		if strings.HasPrefix(name, beta) {
			return v1 + strings.TrimPrefix(name, beta)
		}
		return name
	}
	return func(ref openapicommon.ReferenceCallback) map[string]openapicommon.OpenAPIDefinition {
		out := defs(ref)
		renamed := defs(func(name string) spec.Ref { return ref(rename(name)) })
		for name, def := range renamed {
			if !strings.HasPrefix(name, beta) {
				continue
			}
			deps := make([]string, len(def.Dependencies))
			for i, d := range def.Dependencies {
				deps[i] = rename(d)
			}
			def.Dependencies = deps
			out[rename(name)] = def
		}
		return out
	}
}

// prefix is a model name up to and including its last ".".
func prefix(model string) string { return model[:strings.LastIndex(model, ".")+1] }
