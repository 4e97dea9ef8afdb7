package sandbox

import (
	"strings"
	"testing"
	"time"

	"github.com/tidal-autoscaler/tidal/rules/config"
	"sigs.k8s.io/yaml"

	tidalv1 "github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
)

func TestHorizontalAutoscalerOptions(t *testing.T) {
	for _, tc := range []struct {
		name         string
		cfg          Config
		wantDryRun   bool
		wantFallback *tidalv1.Fallback
		wantWindow   int32
	}{
		{name: "default", cfg: Config{Duration: 270 * time.Second}, wantWindow: 27},
		{name: "short curve keeps a 10s window", cfg: Config{Duration: 60 * time.Second}, wantWindow: 10},
		{name: "dry run", cfg: Config{Duration: 120 * time.Second, DryRun: true}, wantDryRun: true, wantWindow: 12},
		{name: "fallback", cfg: Config{Duration: 120 * time.Second, Fallback: true}, wantWindow: 12,
			wantFallback: &tidalv1.Fallback{FailureThreshold: FallbackThreshold, Replicas: FallbackReplicas, Behavior: tidalv1.FallbackStatic}},
		{name: "both", cfg: Config{Duration: 900 * time.Second, DryRun: true, Fallback: true}, wantDryRun: true, wantWindow: 60,
			wantFallback: &tidalv1.Fallback{FailureThreshold: FallbackThreshold, Replicas: FallbackReplicas, Behavior: tidalv1.FallbackStatic}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ha := HorizontalAutoscaler(tc.cfg)
			if ha.Spec.DryRun != tc.wantDryRun {
				t.Errorf("spec.dryRun = %v, want %v", ha.Spec.DryRun, tc.wantDryRun)
			}
			switch got := ha.Spec.Fallback; {
			case (got == nil) != (tc.wantFallback == nil):
				t.Errorf("spec.fallback = %+v, want %+v", got, tc.wantFallback)
			case got != nil && *got != *tc.wantFallback:
				t.Errorf("spec.fallback = %+v, want %+v", *got, *tc.wantFallback)
			case got != nil && (got.Replicas < *ha.Spec.MinReplicas || got.Replicas > ha.Spec.MaxReplicas):
				t.Errorf("fallback.replicas %d outside [%d, %d]: the CRD would reject it", got.Replicas, *ha.Spec.MinReplicas, ha.Spec.MaxReplicas)
			}
			if w := *ha.Spec.Behavior.ScaleDown.StabilizationWindowSeconds; w != tc.wantWindow {
				t.Errorf("scale-down window %ds, want %ds", w, tc.wantWindow)
			}
			if len(ha.Spec.Metrics) != 3 {
				t.Errorf("%d metrics, want cpu, rps and queue", len(ha.Spec.Metrics))
			}
		})
	}
}

// TestOutageWindow: the --fallback outage falls in the quiet phase, after
// the metrics led their changes, and ends early enough to see the return
// to normal.
func TestOutageWindow(t *testing.T) {
	for _, d := range []time.Duration{90 * time.Second, 120 * time.Second, 270 * time.Second, 600 * time.Second} {
		t.Run(d.String(), func(t *testing.T) {
			from, to := OutageWindow(d)
			c := Curve{Phases: DefaultCurve, Duration: d}
			if _, p := c.At(from); p != "quiet" {
				t.Errorf("outage starts at %s in phase %s, want quiet", from, p)
			}
			if to-from < 20*time.Second {
				t.Errorf("outage %s..%s is shorter than 20s: fallback needs %d failing 5s syncs", from, to, FallbackThreshold)
			}
			if d-to < 10*time.Second {
				t.Errorf("outage ends at %s, less than 10s before the curve's end %s", to, d)
			}
		})
	}
}

func TestScrapeJobs(t *testing.T) {
	text := ScrapeJobs([]ScrapeTarget{
		{Job: "tidal-adapter", Addr: "127.0.0.1:1", Labels: map[string]string{"namespace": "tidal-system", "service": "tidal-adapter"}},
		{Job: "apiserver", Addr: "127.0.0.1:2", CAFile: "/ca.crt"},
	}, "/admin.crt", "/admin.key")
	var jobs []struct {
		JobName     string `json:"job_name"`
		Scheme      string `json:"scheme"`
		HonorLabels bool   `json:"honor_labels"`
		TLS         struct {
			CertFile string `json:"cert_file"`
			KeyFile  string `json:"key_file"`
			CAFile   string `json:"ca_file"`
			Insecure bool   `json:"insecure_skip_verify"`
		} `json:"tls_config"`
		Static []struct {
			Targets []string          `json:"targets"`
			Labels  map[string]string `json:"labels"`
		} `json:"static_configs"`
	}
	if err := yaml.Unmarshal([]byte(text), &jobs); err != nil {
		t.Fatalf("scrape jobs do not parse: %v\n%s", err, text)
	}
	if len(jobs) != 2 {
		t.Fatalf("%d jobs, want 2:\n%s", len(jobs), text)
	}
	a, k := jobs[0], jobs[1]
	if a.JobName != "tidal-adapter" || a.Scheme != "https" || !a.HonorLabels || a.TLS.CertFile != "/admin.crt" || a.TLS.KeyFile != "/admin.key" || !a.TLS.Insecure {
		t.Errorf("adapter job %+v: want https, honor_labels, the admin certificate, the self-signed serving certificate accepted", a)
	}
	if a.Static[0].Targets[0] != "127.0.0.1:1" || a.Static[0].Labels["service"] != "tidal-adapter" {
		t.Errorf("adapter target %+v", a.Static[0])
	}
	if k.TLS.CAFile != "/ca.crt" || k.TLS.Insecure {
		t.Errorf("apiserver job verifies with the CA: %+v", k.TLS)
	}
}

func TestDashboardQueries(t *testing.T) {
	dash := `{"panels": [
	  {"type": "row", "title": "R1", "panels": []},
	  {"type": "timeseries", "title": "P1", "targets": [
	    {"refId": "A", "expr": "up{namespace=~\"$namespace\",hpa_name=~\"${hpa}\"}"},
	    {"expr": "rate(x[$__rate_interval])", "legendFormat": "{{pod}}"}]},
	  {"type": "row", "title": "R2", "collapsed": true, "panels": [
	    {"type": "stat", "title": "P2", "targets": [{"refId": "A", "expr": "y{ns=\"[[namespace]]\",f=\"${namespace:regex}\"}"}]}]}
	]}`
	vars := map[string]string{"namespace": "demo", "hpa": "web", "__rate_interval": "20s"}
	for _, tc := range []struct {
		name, dash string
		vars       map[string]string
		want       []PanelQuery
		wantErr    string
	}{
		{name: "every syntax substituted, rows and collapsed rows walked", dash: dash, vars: vars, want: []PanelQuery{
			{Row: "R1", Panel: "P1", Type: "timeseries", RefID: "A", Expr: `up{namespace=~"demo",hpa_name=~"web"}`},
			{Row: "R1", Panel: "P1", Type: "timeseries", RefID: "B", Legend: "{{pod}}", Expr: "rate(x[20s])"},
			{Row: "R2", Panel: "P2", Type: "stat", RefID: "A", Expr: `y{ns="demo",f="demo"}`},
		}},
		{name: "a variable the sandbox lacks names the panel", dash: dash, vars: map[string]string{"namespace": "demo", "hpa": "web"},
			wantErr: `panel "P1" query B uses $__rate_interval, which the sandbox does not set`},
		{name: "not JSON", dash: "{", vars: vars, wantErr: "dashboard JSON"},
		{name: "no queries", dash: `{"panels": []}`, vars: vars, wantErr: "no panel queries"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DashboardQueries([]byte(tc.dash), tc.vars)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("query %d = %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// TestChartDashboardQueries: with the sandbox's variables, every query of
// the chart's dashboard is complete PromQL.
func TestChartDashboardQueries(t *testing.T) {
	data := readRepoFile(t, DashboardFile)
	queries, err := DashboardQueries(data, DashboardVars())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range queries {
		if _, err := config.ParsePromQL(q.Expr); err != nil {
			t.Errorf("%s: %v: %s", q.Name(), err, q.Expr)
		}
	}
}

func TestDashboardProblems(t *testing.T) {
	q := PanelQuery{Panel: "Replicas", RefID: "B", Expr: "x"}
	for _, tc := range []struct {
		name string
		d    *DashboardResult
		want []string
	}{
		{name: "not queried", d: nil, want: []string{"not queried"}},
		{name: "data", d: &DashboardResult{Results: []QueryResult{{Query: q, Series: []Series{{Points: []Point{{T: time.Second, V: 0}}}}}}}},
		{name: "a series without points is no data", d: &DashboardResult{Results: []QueryResult{{Query: q, Series: []Series{{}}}}},
			want: []string{`panel "Replicas" query B returned no data over the run: x`}},
		{name: "error", d: &DashboardResult{Results: []QueryResult{{Query: q, Err: errString("bad")}}},
			want: []string{`panel "Replicas" query B (x): bad`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.d.Problems()
			if len(got) != len(tc.want) {
				t.Fatalf("problems %q, want %q", got, tc.want)
			}
			for i := range got {
				if !strings.Contains(got[i], tc.want[i]) {
					t.Errorf("problem %q, want %q", got[i], tc.want[i])
				}
			}
		})
	}
}

type errString string

func (e errString) Error() string { return string(e) }

func TestLegend(t *testing.T) {
	l := map[string]string{"namespace": "demo", "hpa_name": "demo", "job": "tidal-autoscaler", "reason": "x"}
	for _, tc := range []struct{ format, want string }{
		{"{{namespace}}/{{hpa_name}} current", "demo/demo current"},
		{"{{ reason }} ({{missing}})", "x ()"},
		{"", "{hpa_name=demo, namespace=demo, reason=x}"},
	} {
		if got := Legend(tc.format, l); got != tc.want {
			t.Errorf("Legend(%q) = %q, want %q", tc.format, got, tc.want)
		}
	}
}

// TestReadmeRuleExcerpt: the README's rules example is an excerpt of the
// sandbox's rule file, line for line and in order, so it is the rule the
// sandbox serves.
func TestReadmeRuleExcerpt(t *testing.T) {
	readme := string(readRepoFile(t, "README.md"))
	rules := strings.Split(string(readRepoFile(t, RuleFile)), "\n")
	link := strings.Index(readme, "("+RuleFile+")")
	if link < 0 {
		t.Fatalf("README.md does not link %s", RuleFile)
	}
	start := strings.Index(readme[link:], "```yaml\n")
	if start < 0 {
		t.Fatalf("no yaml block after README.md's link to %s", RuleFile)
	}
	block := readme[link+start+len("```yaml\n"):]
	block = block[:strings.Index(block, "```")]
	k := 0
	for _, line := range strings.Split(strings.TrimRight(block, "\n"), "\n") {
		for k < len(rules) && rules[k] != line {
			k++
		}
		if k == len(rules) {
			t.Fatalf("README.md's rules example line %q is not in %s (in this order); copy the excerpt from the file", line, RuleFile)
		}
	}
}
