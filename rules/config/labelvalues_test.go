package config_test

import (
	"strings"
	"testing"

	"github.com/tidal-autoscaler/tidal/rules/config"
)

// TestLabelValuesByNameOnlyInDoubleQuotes: .LabelValuesByName holds values
// escaped for the inside of a PromQL "..." string (package promql's
// Escape), so a template that places one elsewhere is a problem at the
// query's file:line; inside "..." it loads, however it gets there.
func TestLabelValuesByNameOnlyInDoubleQuotes(t *testing.T) {
	const problem = "uses .LabelValuesByName outside a double-quoted string"
	custom := func(query string) string {
		return "rules:\n- seriesQuery: 'http_requests_total{namespace!=\"\",pod!=\"\"}'\n  resources: {template: <<.Resource>>}\n  metricsQuery: " + query + "\n"
	}
	external := func(query string) string {
		return "externalRules:\n- seriesQuery: 'queue_depth{queue!=\"\"}'\n  resources: {namespaced: false}\n  metricsQuery: " + query + "\n"
	}
	tests := []struct {
		name string
		file string
		// wantLine is the line of the problem; 0 wants none.
		wantLine int
	}{
		{"double-quoted regex match", custom(`'sum(<<.Series>>{pod=~"<<index .LabelValuesByName "pod">>"}) by (pod)'`), 0},
		{"double-quoted, a label the sample lacks", external(`'max(<<.Series>>{queue_name=~"<<index .LabelValuesByName "queue_name">>"}) by (queue_name)'`), 0},
		{"range, values in double quotes", custom(`'sum(<<.Series>>{<<range $k, $v := .LabelValuesByName>><<$k>>=~"<<$v>>",<<end>>}) by (<<.GroupBy>>)'`), 0},
		{"printf %q quotes it", custom(`'sum(<<.Series>>{pod=~<<printf "%q" (index .LabelValuesByName "pod")>>}) by (pod)'`), 0},
		{"single-quoted", custom(`"sum(<<.Series>>{pod=~'<<index .LabelValuesByName \"pod\">>'}) by (pod)"`), 4},
		{"backquoted", custom("'sum(<<.Series>>{pod=~`<<index .LabelValuesByName \"pod\">>`}) by (pod)'"), 4},
		{"a label the sample lacks, single-quoted", external(`"max(<<.Series>>{queue_name=~'<<index .LabelValuesByName \"queue_name\">>'}) by (queue_name)"`), 4},
		{"range, values single-quoted", custom(`"sum(<<.Series>>{<<range $k, $v := .LabelValuesByName>><<$k>>=~'<<$v>>',<<end>>}) by (<<.GroupBy>>)"`), 4},
		{"bare text", external(`'sum(<<.Series>>) by (queue) > <<index .LabelValuesByName "queue">>'`), 4},
		{"after a closed double-quoted string", custom(`'sum(<<.Series>>{pod=~"a\"b"} or <<.Series>>{pod=~''<<index .LabelValuesByName "pod">>''}) by (pod)'`), 4},
		{"resource rule's containerQuery", `resourceRules:
  cpu:
    containerQuery: "sum(rate(cpu{pod=~'<<index .LabelValuesByName \"pod\">>'}[1m])) by (<<.GroupBy>>)"
    nodeQuery: sum(rate(cpu{<<.LabelMatchers>>}[1m])) by (<<.GroupBy>>)
    resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}, node: {resource: node}}}
    containerLabel: container
  memory:
    containerQuery: sum(mem{<<.LabelMatchers>>}) by (<<.GroupBy>>)
    nodeQuery: sum(mem{<<.LabelMatchers>>}) by (<<.GroupBy>>)
    resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}, node: {resource: node}}}
    containerLabel: container
  window: 1m
`, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Parse("rules.yaml", []byte(tt.file))
			var got []config.Problem
			if probs, ok := err.(config.Problems); ok {
				for _, p := range probs {
					if strings.Contains(p.Message, problem) {
						got = append(got, p)
					}
				}
			} else if err != nil {
				t.Fatalf("err = %v", err)
			}
			switch {
			case tt.wantLine == 0 && err != nil:
				t.Errorf("problems:\n%v\nwant none", err)
			case tt.wantLine != 0 && (len(got) != 1 || got[0].Line != tt.wantLine || got[0].File != "rules.yaml"):
				t.Errorf("problems:\n%v\nwant one at rules.yaml:%d saying %q", err, tt.wantLine, problem)
			}
		})
	}
}
