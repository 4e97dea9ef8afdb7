package manifests

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/promql/parser"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/component-base/metrics"
	"sigs.k8s.io/yaml"

	adaptermonitor "github.com/tidal-autoscaler/tidal/adapter/monitor"
	autoscalermonitor "github.com/tidal-autoscaler/tidal/autoscaler/monitor"
	"github.com/tidal-autoscaler/tidal/rules/config"
)

// The chart's monitoring pack (values monitoring.*): the ServiceMonitors,
// the scrape RBAC, the PrometheusRule (promtool check rules and test
// rules), the Grafana dashboard (every query parses), and every series
// they read is one the components export.

func monitoringValues(t testing.TB) string {
	return filepath.Join(repoRoot(t), "test", "manifests", "testdata", "monitoring-values.yaml")
}

func renderMonitoring(t testing.TB, args ...string) []*unstructured.Unstructured {
	t.Helper()
	return helmTemplate(t, append([]string{"-f", monitoringValues(t)}, args...)...)
}

func TestMonitoringOffByDefault(t *testing.T) {
	for _, o := range helmTemplate(t) {
		switch {
		case o.GetKind() == "ServiceMonitor", o.GetKind() == "PodMonitor", o.GetKind() == "PrometheusRule",
			o.GetKind() == "ConfigMap" && strings.HasSuffix(o.GetName(), "-dashboard"),
			strings.HasSuffix(o.GetName(), "-scrape-metrics"):
			t.Errorf("%s rendered by default", objKey(o))
		}
	}
}

func TestMonitoringHelmLint(t *testing.T) {
	out, err := run(helmEnv(t), tool(t, "helm"), "lint", "--strict", chartDir(t), "-f", monitoringValues(t))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "0 chart(s) failed") || strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERROR]") {
		t.Errorf("helm lint:\n%s", out)
	}
}

// TestMonitoringServiceMonitors: one ServiceMonitor per component, scraping
// a port its Service has, over HTTPS with the service account token; the
// ClusterRole granting get on /metrics, bound to the given subjects.
func TestMonitoringServiceMonitors(t *testing.T) {
	objs := renderMonitoring(t)
	services := ofKind(objs, "Service")
	sms := ofKind(objs, "ServiceMonitor")
	if names := keys(sms); !slices.Equal(names, []string{"ServiceMonitor tidal-system/tidal-adapter", "ServiceMonitor tidal-system/tidal-autoscaler"}) {
		t.Fatalf("ServiceMonitors %v, want the adapter's and the autoscaler's", names)
	}
	for _, sm := range sms {
		if got := sm.GetLabels()["release"]; got != "kube-prometheus-stack" {
			t.Errorf("%s: label release=%q, want monitoring.serviceMonitor.labels'", objKey(sm), got)
		}
		sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
		eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		if len(eps) != 1 {
			t.Fatalf("%s: %d endpoints, want 1", objKey(sm), len(eps))
		}
		ep := eps[0].(map[string]any)
		for k, want := range map[string]any{"scheme": "https", "path": "/metrics", "honorLabels": true, "interval": "15s", "scrapeTimeout": "10s",
			"bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"} {
			if ep[k] != want {
				t.Errorf("%s: endpoint %s=%v, want %v", objKey(sm), k, ep[k], want)
			}
		}
		var svc *unstructured.Unstructured
		for _, s := range services {
			if s.GetNamespace() == sm.GetNamespace() && isSubset(sel, s.GetLabels()) {
				svc = s
			}
		}
		if svc == nil {
			// The autoscaler serves /metrics on its secure port; its
			// Service comes with that port.
			t.Logf("%s: no Service rendered matches %v yet: it scrapes nothing until one does", objKey(sm), sel)
			continue
		}
		ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
		var names []string
		for _, p := range ports {
			names = append(names, p.(map[string]any)["name"].(string))
		}
		if !slices.Contains(names, ep["port"].(string)) {
			t.Errorf("%s scrapes port %q; %s has ports %v", objKey(sm), ep["port"], objKey(svc), names)
		}
	}
	if slices.IndexFunc(sms, func(o *unstructured.Unstructured) bool { return strings.HasSuffix(o.GetName(), "-adapter") }) < 0 {
		t.Error("no ServiceMonitor for the adapter")
	}

	role := find(t, objs, "ClusterRole", "", "tidal-scrape-metrics")
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	if want := []any{map[string]any{"nonResourceURLs": []any{"/metrics"}, "verbs": []any{"get"}}}; !equalJSON(rules, want) {
		t.Errorf("tidal-scrape-metrics rules %v, want get on /metrics only", rules)
	}
	binding := find(t, objs, "ClusterRoleBinding", "", "tidal-scrape-metrics")
	subjects, _, _ := unstructured.NestedSlice(binding.Object, "subjects")
	if want := []any{map[string]any{"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"}}; !equalJSON(subjects, want) {
		t.Errorf("tidal-scrape-metrics subjects %v, want monitoring.scrapeRBAC.subjects", subjects)
	}

	// The autoscaler off: the adapter's ServiceMonitor only.
	objs = renderMonitoring(t, "--set", "autoscaler.enabled=false")
	if names := keys(ofKind(objs, "ServiceMonitor")); !slices.Equal(names, []string{"ServiceMonitor tidal-system/tidal-adapter"}) {
		t.Errorf("autoscaler off: ServiceMonitors %v", names)
	}
}

func isSubset(sub, of map[string]string) bool {
	for k, v := range sub {
		if of[k] != v {
			return false
		}
	}
	return len(sub) > 0
}

func equalJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// ruleGroups are the rendered PrometheusRule's spec.groups.
type ruleGroups struct {
	Groups []struct {
		Name  string           `json:"name"`
		Rules []map[string]any `json:"rules"`
	} `json:"groups"`
}

func renderedRules(t *testing.T, args ...string) ruleGroups {
	t.Helper()
	objs := renderMonitoring(t, args...)
	pr := find(t, objs, "PrometheusRule", namespace, "tidal")
	if got := pr.GetLabels()["release"]; got != "kube-prometheus-stack" {
		t.Errorf("PrometheusRule label release=%q, want monitoring.prometheusRule.labels'", got)
	}
	spec, _, _ := unstructured.NestedMap(pr.Object, "spec")
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	var g ruleGroups
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestMonitoringAlerts runs promtool check rules on the PrometheusRule's
// groups and promtool test rules with testdata/alerts_test.yaml, which must
// have a case for every alert.
func TestMonitoringAlerts(t *testing.T) {
	promtool := tool(t, "promtool")
	groups := renderedRules(t)
	var alerts []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r["alert"].(string))
		}
	}
	if len(alerts) < 8 {
		t.Errorf("alerts %v: want the 8 of files/alerts.yaml", alerts)
	}

	dir := t.TempDir()
	write := func(name string, v any) string {
		data, err := yaml.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	if out, err := run(os.Environ(), promtool, "check", "rules", write("prometheusrule.yaml", groups)); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}

	// promtool test rules compares annotations in full: the cases check
	// labels, so the copy under test has none.
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			delete(r, "annotations")
		}
	}
	write("alerts.rules.yaml", groups)
	testFile := readFile(t, filepath.Join(repoRoot(t), "test", "manifests", "testdata", "alerts_test.yaml"))
	if err := os.WriteFile(filepath.Join(dir, "alerts_test.yaml"), testFile, 0o644); err != nil {
		t.Fatal(err)
	}
	var cases struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `json:"alertname"`
				ExpAlerts []map[string]any `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(testFile, &cases); err != nil {
		t.Fatal(err)
	}
	fires := map[string]bool{}
	for _, c := range cases.Tests {
		for _, a := range c.AlertRuleTest {
			fires[a.Alertname] = fires[a.Alertname] || len(a.ExpAlerts) > 0
		}
	}
	for _, a := range alerts {
		if !fires[a] {
			t.Errorf("testdata/alerts_test.yaml has no case where %s fires", a)
		}
	}
	out, err := run(os.Environ(), promtool, "test", "rules", filepath.Join(dir, "alerts_test.yaml"))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("promtool test rules:\n%s", out)

	// alertLabels are added, disabled alerts left out.
	groups = renderedRules(t, "--set", "monitoring.prometheusRule.alertLabels.team=platform",
		"--set", "monitoring.prometheusRule.disabled={TidalAutoscalerAtMaxReplicas}")
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r["alert"] == "TidalAutoscalerAtMaxReplicas" {
				t.Error("disabled alert TidalAutoscalerAtMaxReplicas rendered")
			}
			labels, _ := r["labels"].(map[string]any)
			if labels["team"] != "platform" || labels["severity"] == nil {
				t.Errorf("%s: labels %v, want severity and team=platform", r["alert"], labels)
			}
		}
	}
}

// grafanaVariable is a Grafana variable in a query: $name, ${name} or
// ${name:format}.
var grafanaVariable = regexp.MustCompile(`\$\{(\w+)(?::\w+)?\}|\$(\w+)`)

// substituteGrafana replaces Grafana's variables by values that parse:
// durations for the interval and range ones, a label value for the others.
func substituteGrafana(expr string) string {
	return grafanaVariable.ReplaceAllStringFunc(expr, func(m string) string {
		sub := grafanaVariable.FindStringSubmatch(m)
		switch name := sub[1] + sub[2]; name {
		case "__rate_interval", "__interval", "__range", "__range_s", "__auto", "interval":
			return "5m"
		default:
			return "x"
		}
	})
}

// labelValues matches Grafana's label_values(query, label) and
// label_values(label).
var labelValues = regexp.MustCompile(`^label_values\((?:(.*),\s*)?(\w+)\)$`)

// gridPos is where a panel is on Grafana's 24-column grid.
type gridPos struct{ X, Y, W, H int }

func (a gridPos) overlaps(b gridPos) bool {
	return a.X < b.X+b.W && b.X < a.X+a.W && a.Y < b.Y+b.H && b.Y < a.Y+a.H
}

// dashboardQueries are the PromQL queries of the dashboard's panels and
// variables, by where they are.
func dashboardQueries(t *testing.T) map[string]string {
	t.Helper()
	objs := renderMonitoring(t)
	cm := find(t, objs, "ConfigMap", "monitoring", "tidal-dashboard")
	if got := cm.GetLabels()["grafana_dashboard"]; got != "1" {
		t.Errorf("dashboard ConfigMap label grafana_dashboard=%q, want \"1\" (the Grafana sidecar's)", got)
	}
	raw, _, _ := unstructured.NestedString(cm.Object, "data", "tidal.json")
	if want := readFile(t, filepath.Join(chartDir(t), "files", "dashboard.json")); strings.TrimSpace(raw) != strings.TrimSpace(string(want)) {
		t.Error("the ConfigMap's tidal.json is not files/dashboard.json")
	}
	var dash struct {
		UID        string `json:"uid"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			ID      int    `json:"id"`
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
			GridPos gridPos `json:"gridPos"`
		} `json:"panels"`
	}
	if err := json.Unmarshal([]byte(raw), &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if dash.UID == "" {
		t.Error("dashboard has no uid")
	}
	queries := map[string]string{}
	ids := map[int]bool{}
	for _, p := range dash.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		for _, q := range dash.Panels {
			if q.ID < p.ID && q.GridPos.overlaps(p.GridPos) {
				t.Errorf("panels %q and %q overlap (%+v, %+v): Grafana moves one of them", q.Title, p.Title, q.GridPos, p.GridPos)
			}
		}
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for i, q := range p.Targets {
			queries[p.Title+"/"+string(rune('A'+i))] = q.Expr
		}
	}
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, ok := v.Query.(map[string]any)
		if !ok {
			t.Errorf("variable %s: query %v, want {query: ...}", v.Name, v.Query)
			continue
		}
		m := labelValues.FindStringSubmatch(q["query"].(string))
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(...)", v.Name, q["query"])
			continue
		}
		if m[1] != "" {
			queries["variable "+v.Name] = m[1]
		}
	}
	if len(queries) < 10 {
		t.Errorf("%d dashboard queries, want the panels'", len(queries))
	}
	return queries
}

// TestMonitoringDashboardQueriesParse parses every panel's and variable's
// query with the adapter's PromQL parser, Grafana's variables replaced.
func TestMonitoringDashboardQueriesParse(t *testing.T) {
	for where, q := range dashboardQueries(t) {
		if _, err := config.ParsePromQL(substituteGrafana(q)); err != nil {
			t.Errorf("%s: %q: %v", where, q, err)
		}
	}
}

// TestMonitoringSeriesExist: every metric the alerts and the dashboard
// read is one the adapter or the autoscaler registers (or kube-apiserver's
// aggregator_unavailable_apiservice).
func TestMonitoringSeriesExist(t *testing.T) {
	exported := exportedMetricNames(t)
	check := func(where, q string) {
		expr, err := config.ParsePromQL(substituteGrafana(q))
		if err != nil {
			t.Errorf("%s: %v", where, err)
			return
		}
		parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok && !exported[vs.Name] {
				t.Errorf("%s reads %s, which no component exports", where, vs.Name)
			}
			return nil
		})
	}
	for where, q := range dashboardQueries(t) {
		check("dashboard "+where, q)
	}
	for _, g := range renderedRules(t).Groups {
		for _, r := range g.Rules {
			check("alert "+r["alert"].(string), r["expr"].(string))
		}
	}
}

// exportedMetricNames are the names both components register (histograms
// with their _bucket, _count and _sum series) and the kube-apiserver
// series the alerts read.
func exportedMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{"aggregator_unavailable_apiservice": true}
	add := func(name string) {
		for _, suffix := range []string{"", "_bucket", "_count", "_sum"} {
			names[name+suffix] = true
		}
	}
	var ac collectorCapture
	if _, err := autoscalermonitor.New(&ac, nil); err != nil {
		t.Fatal(err)
	}
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for _, c := range ac.collectors {
		ch := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			if m := fqName.FindStringSubmatch(d.String()); m != nil {
				add(m[1])
			}
		}
	}
	var adapter registerableCapture
	adaptermonitor.New().Register(&adapter)
	for _, n := range adapter.names {
		add(n)
	}
	for _, want := range []string{"tidal_autoscaler_hpa_spec_max_replicas", "tidal_adapter_query_errors_total"} {
		if !names[want] {
			t.Fatalf("%s not among the exported names %v", want, slices.Sorted(maps.Keys(names)))
		}
	}
	return names
}

// collectorCapture is a prometheus.Registerer that keeps what is registered.
type collectorCapture struct{ collectors []prometheus.Collector }

func (c *collectorCapture) Register(x prometheus.Collector) error {
	c.collectors = append(c.collectors, x)
	return nil
}
func (c *collectorCapture) MustRegister(xs ...prometheus.Collector) {
	c.collectors = append(c.collectors, xs...)
}
func (c *collectorCapture) Unregister(prometheus.Collector) bool { return true }

// registerableCapture is adapter/monitor's Registerer, keeping the names.
type registerableCapture struct{ names []string }

func (c *registerableCapture) MustRegister(rs ...metrics.Registerable) {
	for _, r := range rs {
		c.names = append(c.names, r.FQName())
	}
}
