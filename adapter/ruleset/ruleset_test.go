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
			name: "unknown field, unknown resource and no namespace label",
			yaml: `externalRules:
- seriesQuery: 'queue_messages{queue!=""}'
  resources:
    overrides:
      queue: {group: queues.io, resource: queues}
  metricsQuery: sum(<<.Series>>{<<.LabelMatchers>>}) by (queue)
  bogus: 1
`,
			want: []want{
				{4, "no label maps to namespaces"},
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
