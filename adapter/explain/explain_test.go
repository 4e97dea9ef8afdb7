package explain_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidal-autoscaler/tidal/adapter/explain"
	"github.com/tidal-autoscaler/tidal/adapter/internal/promtest"
)

const rules = `
rules:
- seriesQuery: '{__name__=~"^http_.*",namespace!=""}'
  seriesFilters:
  - isNot: "_bucket$"
  resources:
    overrides:
      namespace: {resource: namespace}
      pod: {resource: pod}
  name: {matches: "^(.*)_total$", as: "${1}_per_second"}
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)'
- seriesQuery: 'http_requests_total{namespace!=""}'
  resources: {template: "<<.Resource>>"}
  name: {matches: "^(.*)_total$", as: "${1}_per_second"}
  metricsQuery: 'max(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
- seriesQuery: 'broken_total'
  resources: {template: "<<.Resource>>"}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
externalRules:
- seriesQuery: '{__name__=~"queue_.*"}'
  resources:
    namespaced: false
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (queue)'
- seriesQuery: 'jobs_pending{namespace!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>})'
`

func fakeProm(t *testing.T) *promtest.Server {
	p := promtest.New(t)
	p.SetSeries(`{__name__=~"^http_.*",namespace!=""}`,
		map[string]string{"__name__": "http_requests_total", "namespace": "default", "pod": "web-1"},
		map[string]string{"__name__": "http_request_duration_seconds_bucket", "namespace": "default", "pod": "web-1", "le": "0.1"},
		map[string]string{"__name__": "http_inflight", "namespace": "default", "pod": "web-1"},
		map[string]string{"__name__": "http_build_info_total", "namespace": "default", "version": "1"},
	)
	p.SetSeries(`http_requests_total{namespace!=""}`,
		map[string]string{"__name__": "http_requests_total", "namespace": "default", "pod": "web-1"},
	)
	p.FailSeries(`broken_total`, true)
	p.SetSeries(`{__name__=~"queue_.*"}`,
		map[string]string{"__name__": "queue_depth", "queue": "orders"},
	)
	p.SetSeries(`jobs_pending{namespace!=""}`,
		map[string]string{"__name__": "jobs_pending", "namespace": "batch"},
	)
	p.OnQuery(func(q string) promtest.Response {
		return promtest.Response{Vector: []promtest.Sample{{Labels: map[string]string{"pod": "web-1"}, Value: 2.5, Time: 1700000000}}}
	})
	return p
}

func TestExplain(t *testing.T) {
	discoveryLines := []string{
		`rules[0] (custom.metrics.k8s.io): seriesQuery {__name__=~"^http_.*",namespace!=""} on backend "default": 4 series shapes`,
		`  metric http_requests_per_second (custom.metrics.k8s.io) for namespaces (label namespace, cluster-scoped), pods (label pod, namespaced) from series http_requests_total`,
		`  skipped series http_request_duration_seconds_bucket {le, namespace, pod}: seriesFilters[0] (isNot: "_bucket$") matches the series name`,
		`  skipped series http_inflight {namespace, pod}: name.matches "^(.*)_total$" does not match the series name`,
		`  metric http_build_info_per_second (custom.metrics.k8s.io) for namespaces (label namespace, cluster-scoped) from series http_build_info_total`,
		`rules[1] (custom.metrics.k8s.io): seriesQuery http_requests_total{namespace!=""} on backend "default": 1 series shapes`,
		`  skipped series http_requests_total {namespace, pod}: namespaces/http_requests_per_second is served by rules[0] from series "http_requests_total"; pods/http_requests_per_second is served by rules[0] from series "http_requests_total" (the first rule in the file, then the first series, wins)`,
		`rules[2] (custom.metrics.k8s.io): seriesQuery broken_total on backend "default": FAILED: `,
		`externalRules[0] (external.metrics.k8s.io): seriesQuery {__name__=~"queue_.*"} on backend "default": 1 series shapes`,
		`  metric queue_depth (external.metrics.k8s.io, not namespaced) from series queue_depth`,
		`  metric jobs_pending (external.metrics.k8s.io, namespaced) from series jobs_pending`,
		`served: 3 custom metrics, 2 external metrics`,
	}
	for _, tc := range []struct {
		name string
		// rules and prom default to the rules above and fakeProm.
		rules   string
		prom    func(*testing.T) *promtest.Server
		args    []string
		want    []string
		notWant []string
		wantErr string
	}{
		{
			name: "discovery only: served metrics and skipped series with reasons",
			want: discoveryLines,
		},
		{
			name:  "template: job maps to batch/v1 jobs, as in prometheus-adapter; instance to nothing",
			rules: goRules,
			prom:  goProm,
			want: []string{
				`  metric go_goroutines (custom.metrics.k8s.io) for jobs.batch (label job, namespaced) from series go_goroutines`,
				`  skipped series go_info {instance, version}: no label maps to a resource (labels: instance, version); add an override or a template naming one of them`,
				`  metric go_threads (custom.metrics.k8s.io) for namespaces (label namespace, cluster-scoped), pods (label pod, namespaced) from series go_threads`,
			},
		},
		{
			name: "one pod",
			args: []string{"--resource", "pods", "--namespace", "default", "--name", "web-1", "--metric", "http_requests_per_second"},
			want: append(append([]string(nil), discoveryLines...),
				`request: pods/http_requests_per_second served by rules[0] from series http_requests_total (resource label "pod")`,
				`promql: sum(rate(http_requests_total{namespace="default",pod="web-1"}[2m])) by (pod)`,
				`result: 1 samples`,
				`  web-1 = 2.5`,
			),
		},
		{
			name: "several pods with a metric selector",
			args: []string{"--resource", "pod", "--namespace", "default", "--name", "web-1", "--name", "web-2", "--metric", "http_requests_per_second", "--metric-selector", "code in (500,503),method!=GET", "--no-query"},
			want: []string{
				`promql: sum(rate(http_requests_total{code=~"500|503",method!="GET",namespace="default",pod=~"web-1|web-2"}[2m])) by (pod)`,
			},
			notWant: []string{"result:"},
		},
		{
			name: "namespace metric is cluster-scoped in the request",
			args: []string{"--resource", "namespaces", "--namespace", "default", "--name", "default", "--metric", "http_build_info_per_second", "--no-query"},
			want: []string{`promql: sum(rate(http_build_info_total{namespace="default"}[2m])) by (namespace)`},
		},
		{
			name:    "metric served for another resource",
			args:    []string{"--resource", "pods", "--namespace", "default", "--name", "web-1", "--metric", "http_build_info_per_second"},
			wantErr: "metric http_build_info_per_second is not served for pods, only for namespaces",
		},
		{
			name:    "metric never discovered",
			args:    []string{"--resource", "pods", "--namespace", "default", "--name", "web-1", "--metric", "http_inflight"},
			wantErr: "metric http_inflight is not served for pods: no rule's discovery found a series for it",
		},
		{
			name:    "selector the adapter cannot express",
			args:    []string{"--resource", "pods", "--namespace", "default", "--name", "web-1", "--metric", "http_requests_per_second", "--metric-selector", "size>3", "--no-query"},
			wantErr: "rules[0]: rendering the query",
		},
		{
			name: "external metric not namespaced",
			args: []string{"--external", "queue_depth", "--namespace", "shop", "--metric-selector", "queue=orders", "--no-query"},
			want: []string{
				`request: external metric queue_depth served by externalRules[0] from series queue_depth`,
				`promql: sum(queue_depth{queue="orders"}) by (queue)`,
			},
		},
		{
			name: "external metric namespaced",
			args: []string{"--external", "jobs_pending", "--namespace", "batch", "--no-query"},
			want: []string{`promql: sum(jobs_pending{namespace="batch"})`},
		},
		{
			name:    "a delegate needs the credentials of a kubeconfig",
			args:    []string{"--delegate-external-metrics", "https://keda.svc:443"},
			wantErr: "--delegate-external-metrics and --delegate-custom-metrics need --kubeconfig",
		},
		{
			name:    "selector needs a cluster",
			args:    []string{"--resource", "pods", "--namespace", "default", "--selector", "app=web", "--metric", "http_requests_per_second"},
			wantErr: "--selector needs --kubeconfig",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.rules == "" {
				tc.rules = rules
			}
			if tc.prom == nil {
				tc.prom = fakeProm
			}
			file := filepath.Join(t.TempDir(), "rules.yaml")
			if err := os.WriteFile(file, []byte(tc.rules), 0o600); err != nil {
				t.Fatal(err)
			}
			p := tc.prom(t)
			var out bytes.Buffer
			cmd := explain.NewCommand()
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(append([]string{"--config", file, "--prometheus-url", p.URL}, tc.args...))
			err := cmd.ExecuteContext(context.Background())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q; output:\n%s", err, tc.wantErr, out.String())
				}
				return
			}
			if err != nil {
				t.Fatalf("explain: %v; output:\n%s", err, out.String())
			}
			lines := strings.Split(out.String(), "\n")
			for _, w := range tc.want {
				if !hasLine(lines, w) {
					t.Errorf("output lacks line %q; got:\n%s", w, out.String())
				}
			}
			for _, nw := range tc.notWant {
				if strings.Contains(out.String(), nw) {
					t.Errorf("output has %q; got:\n%s", nw, out.String())
				}
			}
		})
	}
}

// hasLine reports whether a line equals want, or starts with it when
// want ends in ": " (an error message follows).
func hasLine(lines []string, want string) bool {
	for _, l := range lines {
		if l == want || (strings.HasSuffix(want, ": ") && strings.HasPrefix(l, want)) {
			return true
		}
	}
	return false
}

const goRules = `
rules:
- seriesQuery: '{__name__=~"go_.*"}'
  resources: {template: "<<.Resource>>"}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
`

func goProm(t *testing.T) *promtest.Server {
	p := promtest.New(t)
	p.SetSeries(`{__name__=~"go_.*"}`,
		map[string]string{"__name__": "go_goroutines", "job": "app", "instance": "10.0.0.1:8080"},
		map[string]string{"__name__": "go_info", "instance": "10.0.0.1:8080", "version": "go1.26"},
		map[string]string{"__name__": "go_threads", "pod": "web-1", "namespace": "default"},
	)
	return p
}
