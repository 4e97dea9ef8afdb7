package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/tidal-autoscaler/tidal/rules/config"
	"github.com/tidal-autoscaler/tidal/rules/internal/wants"
)

// The documentation examples of prometheus-adapter, written down under
// testdata/good, load with no problem and mean what they say.
func TestGoodFiles(t *testing.T) {
	tests := []struct {
		file          string
		rules         int
		externalRules int
		resourceRules bool
		backends      int
	}{
		{"default-config.yaml", 6, 0, false, 0},
		{"sample-config.yaml", 4, 2, false, 0},
		{"walkthrough.yaml", 2, 0, false, 0},
		{"external-rules.yaml", 0, 3, false, 0},
		{"resource-rules.yaml", 0, 0, true, 0},
		{"helm-style.yaml", 3, 1, true, 0},
		{"tidal-extensions.yaml", 1, 1, false, 2},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			cfg, err := config.Load(filepath.Join("..", "testdata", "good", tt.file))
			if err != nil {
				t.Fatalf("problems:\n%v", err)
			}
			if len(cfg.Rules) != tt.rules || len(cfg.ExternalRules) != tt.externalRules || (cfg.ResourceRules != nil) != tt.resourceRules || len(cfg.Backends) != tt.backends {
				t.Errorf("got %d rules, %d external rules, resource rules %v, %d backends; want %d, %d, %v, %d",
					len(cfg.Rules), len(cfg.ExternalRules), cfg.ResourceRules != nil, len(cfg.Backends),
					tt.rules, tt.externalRules, tt.resourceRules, tt.backends)
			}
		})
	}
}

// Every file under testdata/bad says, in `# want` comments, which problems
// it must produce at which line; config reports all of them at once.
func TestBadFiles(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "testdata", "bad", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, file string }{}
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), "naming-") {
			continue // needs naming.Check; tested there
		}
		tests = append(tests, struct{ name, file string }{filepath.Base(f), f})
	}
	if len(tests) < 5 {
		t.Fatalf("only %d bad files found", len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := os.ReadFile(tt.file)
			if err != nil {
				t.Fatal(err)
			}
			_, err = config.Parse(tt.file, data)
			probs, ok := err.(config.Problems)
			if !ok || len(probs) == 0 {
				t.Fatalf("Parse error = %v, want Problems", err)
			}
			wants.Check(t, tt.file, data, probs)
		})
	}
}

// What the walkthrough rule decodes to, field by field.
func TestParseWalkthrough(t *testing.T) {
	cfg, err := config.Load("../testdata/good/walkthrough.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Rules[0]
	checks := []struct {
		name      string
		got, want any
	}{
		{"seriesQuery", r.SeriesQuery, `http_requests_total{kubernetes_namespace!="",kubernetes_pod_name!=""}`},
		{"override namespace", r.Resources.Overrides["kubernetes_namespace"].Resource, "namespace"},
		{"override pod", r.Resources.Overrides["kubernetes_pod_name"].Resource, "pod"},
		{"name.matches", r.Name.Matches, "^(.*)_total"},
		{"name.as", r.Name.As, "${1}_per_second"},
		{"metricsQuery", r.MetricsQuery, `sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)`},
		{"namespaced default", r.Resources.IsNamespaced(), true},
		{"position of the rule", r.Pos.Of(""), config.Pos{Line: 5, Column: 3}},
		{"position of seriesQuery", r.Pos.Of("seriesQuery"), config.Pos{Line: 5, Column: 16}},
		{"position of name.as", r.Name.Pos.Of("as"), config.Pos{Line: 12, Column: 9}},
		{"position of an override label", r.Resources.Overrides["kubernetes_pod_name"].Pos.Of(""), config.Pos{Line: 9, Column: 7}},
		{"file", cfg.File, "../testdata/good/walkthrough.yaml"},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if c.got != c.want {
				t.Errorf("got %v, want %v", c.got, c.want)
			}
		})
	}
}

func TestParseValues(t *testing.T) {
	tests := []struct {
		name  string
		yaml  string
		check func(t *testing.T, cfg *config.Config)
	}{
		{
			name: "empty file is an empty config",
			yaml: "",
			check: func(t *testing.T, cfg *config.Config) {
				if len(cfg.Rules)+len(cfg.ExternalRules) != 0 || cfg.ResourceRules != nil {
					t.Errorf("config = %+v", cfg)
				}
			},
		},
		{
			name: "comments only",
			yaml: "# nothing yet\n",
			check: func(t *testing.T, cfg *config.Config) {
				if cfg == nil {
					t.Error("nil config")
				}
			},
		},
		{
			name: "YAML 1.1 booleans, as prometheus-adapter's yaml.v2 reads them",
			yaml: "externalRules:\n- seriesQuery: up\n  metricsQuery: sum(<<.Series>>{<<.LabelMatchers>>})\n  resources: {namespaced: off}\n",
			check: func(t *testing.T, cfg *config.Config) {
				if cfg.ExternalRules[0].Resources.IsNamespaced() {
					t.Error("namespaced: off read as true")
				}
			},
		},
		{
			name: "window duration",
			yaml: "resourceRules:\n  window: 1h30m\n  cpu: {containerQuery: 'x{<<.LabelMatchers>>}', nodeQuery: 'y{<<.LabelMatchers>>}', containerLabel: container, resources: {template: <<.Resource>>}}\n  memory: {containerQuery: 'x{<<.LabelMatchers>>}', nodeQuery: 'y{<<.LabelMatchers>>}', containerLabel: container, resources: {template: <<.Resource>>}}\n",
			check: func(t *testing.T, cfg *config.Config) {
				if cfg.ResourceRules.Window != model.Duration(90*time.Minute) {
					t.Errorf("window = %v", cfg.ResourceRules.Window)
				}
			},
		},
		{
			name: "a number where a string is expected is its text, as in yaml.v2",
			yaml: "rules:\n- seriesQuery: up\n  name: {matches: 123, as: 0x1F}\n  resources: {template: <<.Resource>>}\n  metricsQuery: sum(<<.Series>>{<<.LabelMatchers>>})\n",
			check: func(t *testing.T, cfg *config.Config) {
				if n := cfg.Rules[0].Name; n.Matches != "123" || n.As != "0x1F" {
					t.Errorf("name = %+v", n)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Parse("test.yaml", []byte(tt.yaml))
			if err != nil {
				t.Fatalf("problems:\n%v", err)
			}
			tt.check(t, cfg)
		})
	}
}

func TestParseMergeKeys(t *testing.T) {
	const file = `rules:
- &base
  seriesQuery: 'up{namespace!=""}'
  resources: {template: <<.Resource>>}
  metricsQuery: sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)
- <<: *base
  metricsQuery: max(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)
- <<: [*base]
  name: {as: up_total}
`
	cfg, err := config.Parse("merge.yaml", []byte(file))
	if err != nil {
		t.Fatalf("problems:\n%v", err)
	}
	tests := []struct {
		name      string
		got, want string
	}{
		{"alias keeps the series query", cfg.Rules[1].SeriesQuery, `up{namespace!=""}`},
		{"explicit key wins over merged", cfg.Rules[1].MetricsQuery, `max(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)`},
		{"merge list", cfg.Rules[2].Resources.Template, `<<.Resource>>`},
		{"own key next to merge list", cfg.Rules[2].Name.As, "up_total"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := config.Load("../testdata/does-not-exist.yaml")
	probs, ok := err.(config.Problems)
	if !ok || len(probs) != 1 || !strings.Contains(probs[0].Message, "cannot read the rule file") {
		t.Fatalf("error = %v", err)
	}
	if got := probs[0].String(); !strings.HasPrefix(got, "../testdata/does-not-exist.yaml: cannot read") {
		t.Errorf("String() = %q, want the file without a line", got)
	}
}

func TestProblemsFormat(t *testing.T) {
	probs := config.Problems{
		{File: "b.yaml", Line: 3, Column: 5, Message: "second"},
		{File: "a.yaml", Line: 10, Column: 1, Message: "third"},
		{File: "a.yaml", Line: 2, Column: 7, Message: "first"},
	}
	probs.Sort()
	tests := []struct {
		name, got, want string
	}{
		{"one problem per line, sorted by file and line", probs.Error(), "a.yaml:2:7: first\na.yaml:10:1: third\nb.yaml:3:5: second"},
		{"no line", config.Problem{File: "x.yaml", Message: "m"}.String(), "x.yaml: m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
	if (config.Problems{}).Err() != nil {
		t.Error("empty Problems.Err() is not nil")
	}
}

// Validate works on configs built in code too.
func TestValidateBuiltConfig(t *testing.T) {
	cfg := &config.Config{
		File: "built",
		Rules: []config.Rule{{
			SeriesQuery:  `up{namespace!=""}`,
			Resources:    config.ResourceMapping{Template: "<<.Resource>>"},
			Name:         config.NameMapping{Matches: "^(a)(b)$"},
			MetricsQuery: `sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)`,
			Backend:      "nope",
		}},
	}
	probs := config.Validate(cfg)
	tests := []struct{ name, want string }{
		{"ambiguous name", "rules[0].name.matches has 2 capture groups"},
		{"unknown backend", `rules[0].backend: unknown backend "nope"; define it under backends`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, p := range probs {
				if strings.Contains(p.Message, tt.want) {
					return
				}
			}
			t.Errorf("no problem containing %q in:\n%v", tt.want, probs)
		})
	}
	if len(probs) != len(tests) {
		t.Errorf("got %d problems, want %d:\n%v", len(probs), len(tests), probs)
	}
}

func TestExpandRefs(t *testing.T) {
	tests := []struct {
		name     string
		template string
		want     []config.ExpandRef
	}{
		{"number", "$1", []config.ExpandRef{{Name: "1", Num: 1}}},
		{"braced number then text", "${1}_per_second", []config.ExpandRef{{Name: "1", Num: 1, Braced: true}}},
		{"unbraced number swallows the suffix", "$1_per_second", []config.ExpandRef{{Name: "1_per_second", Num: -1}}},
		{"named", "${base}_x$other", []config.ExpandRef{{Name: "base", Num: -1, Braced: true}, {Name: "other", Num: -1}}},
		{"dollar escape", "$$1", nil},
		{"lone dollar", "a$-b$", nil},
		{"unclosed brace is literal", "${1", nil},
		{"leading zero is a name", "$01", []config.ExpandRef{{Name: "01", Num: -1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := config.ExpandRefs(tt.template)
			if len(got) != len(tt.want) {
				t.Fatalf("ExpandRefs(%q) = %+v, want %+v", tt.template, got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("ref %d = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

// Inputs that could make a naive decoder loop or crash give problems.
func TestParseHostileYAML(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"mapping merged into itself", "rules:\n- &r\n  seriesQuery: up\n  <<: *r\n", "includes the mapping it is in"},
		{"sequence containing itself", "rules: &l [*l]\n", "expected a mapping"},
		{"unknown anchor", "rules: *nope\n", "invalid YAML"},
		{"scalar document", "just text\n", "file: expected a mapping"},
		{"list document", "- a\n- b\n", "file: expected a mapping"},
		{"non-scalar key", "? [a, b]\n: c\n", "keys must be plain names"},
		{"tab indentation", "rules:\n\t- seriesQuery: up\n", "invalid YAML"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Parse("hostile.yaml", []byte(tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// A backend's own authentication decodes field by field, and a valid one
// has no problem.
func TestBackendAuthFields(t *testing.T) {
	cfg, err := config.Parse("backends.yaml", []byte(`backends:
- name: thanos
  url: https://thanos-query.monitoring.svc:10902
  tokenFile: /var/run/tidal/backends/thanos/token
  caFile: /var/run/tidal/backends/thanos/ca.crt
  clientCertFile: /var/run/tidal/backends/thanos/tls.crt
  clientKeyFile: /var/run/tidal/backends/thanos/tls.key
- name: grafana
  url: https://prometheus.example/api/prom
  httpConfig: /etc/tidal/backends/grafana.yaml
- name: same-prometheus
  url: http://prometheus-operated.monitoring.svc:9090
  inheritAuth: true
`))
	if err != nil {
		t.Fatalf("problems:\n%v", err)
	}
	b := cfg.Backends
	checks := []struct {
		name      string
		got, want any
	}{
		{"tokenFile", b[0].TokenFile, "/var/run/tidal/backends/thanos/token"},
		{"caFile", b[0].CAFile, "/var/run/tidal/backends/thanos/ca.crt"},
		{"clientCertFile", b[0].ClientCertFile, "/var/run/tidal/backends/thanos/tls.crt"},
		{"clientKeyFile", b[0].ClientKeyFile, "/var/run/tidal/backends/thanos/tls.key"},
		{"own auth", b[0].HasOwnAuth(), true},
		{"inheritAuth default", b[0].InheritAuth, false},
		{"httpConfig", b[1].HTTPConfig, "/etc/tidal/backends/grafana.yaml"},
		{"inheritAuth", b[2].InheritAuth, true},
		{"no own auth", b[2].HasOwnAuth(), false},
		{"position of inheritAuth", b[2].Pos.Of("inheritAuth"), config.Pos{Line: 13, Column: 16}},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if c.got != c.want {
				t.Errorf("got %v, want %v", c.got, c.want)
			}
		})
	}
}
