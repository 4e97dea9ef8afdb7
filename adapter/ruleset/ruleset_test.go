package ruleset_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tidal-autoscaler/tidal/adapter/internal/promtest"
	"github.com/tidal-autoscaler/tidal/adapter/prom"
	"github.com/tidal-autoscaler/tidal/adapter/ruleset"
	"github.com/tidal-autoscaler/tidal/rules/config"
)

// TestLoadReportsEveryProblem: Load reports the parser's problems and the
// naming checks' together, each at its file:line, as `tidal rules check`
// does, so a bad file is fixed in one round at start-up or reload.
func TestLoadReportsEveryProblem(t *testing.T) {
	type want struct {
		line int
		text string
	}
	tests := []struct {
		name string
		yaml string
		want []want
	}{
		{
			name: "bad regex and two labels for one resource",
			yaml: `rules:
- seriesQuery: 'http_requests_total{pod!=""}'
  seriesFilters:
  - is: "^http_(.*"
  resources:
    overrides:
      namespace: {resource: namespace}
      pod: {resource: pod}
      kubernetes_pod_name: {resource: pods}
  metricsQuery: sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)
`,
			want: []want{
				{4, "seriesFilters[0].is is not a valid regular expression"},
				{9, `labels "pod" and "kubernetes_pod_name" both map to pods`},
			},
		},
		{
			name: "unknown field and unknown resource (no namespace label is only a warning)",
			yaml: `externalRules:
- seriesQuery: 'queue_messages{queue!=""}'
  resources:
    overrides:
      queue: {group: queues.io, resource: queues}
  metricsQuery: sum(<<.Series>>{<<.LabelMatchers>>}) by (queue)
  bogus: 1
`,
			want: []want{
				{5, `unknown resource "queues" in group "queues.io"`},
				{7, "bogus"},
			},
		},
		{
			name: "clean file compiles",
			yaml: good,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const path = "/etc/tidal/rules.yaml"
			set, err := ruleset.Load(path, []byte(tt.yaml), promtest.Mapper(), backends(t))
			if len(tt.want) == 0 {
				if err != nil || set == nil {
					t.Fatalf("Load() = %v, %v; want a Set", set, err)
				}
				return
			}
			var probs config.Problems
			if !errors.As(err, &probs) {
				t.Fatalf("Load() error = %v, want config.Problems", err)
			}
			if len(probs) != len(tt.want) {
				t.Errorf("%d problems, want %d:\n%v", len(probs), len(tt.want), probs)
			}
			for _, w := range tt.want {
				if !hasProblem(probs, fmt.Sprintf("%s:%d:", path, w.line), w.text) {
					t.Errorf("no problem at %s:%d mentioning %q in:\n%v", path, w.line, w.text, probs)
				}
			}
		})
	}
}

func hasProblem(probs config.Problems, prefix, text string) bool {
	for _, p := range probs {
		if s := p.String(); strings.HasPrefix(s, prefix) && strings.Contains(s, text) {
			return true
		}
	}
	return false
}

// backends builds the file's backends on a Prometheus that is never asked.
func backends(t *testing.T) ruleset.BackendsFunc {
	t.Helper()
	def, err := prom.New(prom.Options{Name: prom.DefaultBackend, URL: mustURL(t, "http://prometheus.invalid:9090")})
	if err != nil {
		t.Fatal(err)
	}
	return func(named []config.Backend) (*prom.Backends, error) {
		return prom.NewBackends(def, prom.Options{}, named)
	}
}

// A rule prometheus-adapter loads but cannot answer loads with a warning,
// and only what it cannot answer is left out: the external rule of
// prometheus-adapter's docs/sample-config.yaml that no label can limit to a
// namespace, and a custom rule mapping a pod and a node but no namespace
// (its nodes are served, its pods are not).
func TestLoadWarnsAndLeavesOutWhatCannotAnswer(t *testing.T) {
	const path = "/etc/tidal/rules.yaml"
	const file = `rules:
- seriesQuery: 'node_temp{node!=""}'
  resources:
    overrides:
      node: {resource: node}
      pod: {resource: pod}
  metricsQuery: max(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)
externalRules:
- seriesQuery: '{__name__="queue_consumer_lag",name!=""}'
  metricsQuery: sum(<<.Series>>{<<.LabelMatchers>>}) by (name)
- seriesQuery: '{__name__="queue_depth",topic!=""}'
  metricsQuery: sum(<<.Series>>{<<.LabelMatchers>>}) by (name)
  resources:
    namespaced: false
`
	set, err := ruleset.Load(path, []byte(file), promtest.Mapper(), backends(t))
	if err != nil {
		t.Fatalf("Load() = %v, want the file loaded with warnings", err)
	}
	t.Run("warnings name the rules", func(t *testing.T) {
		for _, w := range []struct {
			line int
			text string
		}{
			{4, "rules[0].resources maps pods but no label maps to namespaces"},
			{9, "externalRules[0]: namespaced is true (the default) but no label maps to namespaces"},
		} {
			if !hasProblem(set.Warnings, fmt.Sprintf("%s:%d:", path, w.line), "warning: "+w.text) {
				t.Errorf("no warning at %s:%d mentioning %q in:\n%v", path, w.line, w.text, set.Warnings)
			}
		}
		if len(set.Warnings) != 2 {
			t.Errorf("%d warnings, want 2:\n%v", len(set.Warnings), set.Warnings)
		}
	})
	t.Run("the external rule that cannot answer is left out", func(t *testing.T) {
		if len(set.External) != 1 || set.External[0].ID != "externalRules[1]" {
			ids := []string{}
			for _, r := range set.External {
				ids = append(ids, r.ID)
			}
			t.Errorf("external rules %v, want [externalRules[1]]", ids)
		}
	})
	t.Run("the custom rule serves its cluster-scoped resources only", func(t *testing.T) {
		if len(set.Custom) != 1 {
			t.Fatalf("%d custom rules, want 1", len(set.Custom))
		}
		got, namespaced := set.Custom[0].Resources.ResourcesForSeries([]string{"node", "pod", "instance"})
		if len(got) != 1 || got[0].Resource != "nodes" || namespaced {
			t.Errorf("ResourcesForSeries = %v (namespaced %v), want [nodes] and not namespaced", got, namespaced)
		}
	})
}
