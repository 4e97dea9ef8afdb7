package manifests

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// egressPorts renders each egress rule of the adapter's NetworkPolicy as
// its ports joined with commas, "to" marking a rule with peers.
func egressPorts(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	np := find(t, objs, "NetworkPolicy", namespace, "tidal-adapter")
	egress, _, _ := unstructured.NestedSlice(np.Object, "spec", "egress")
	var out []string
	for _, e := range egress {
		rule := e.(map[string]any)
		var ports []string
		for _, p := range rule["ports"].([]any) {
			ports = append(ports, fmt.Sprint(p.(map[string]any)["port"]))
		}
		s := strings.Join(ports, ",")
		if _, ok := rule["to"]; ok {
			s += " to"
		}
		out = append(out, s)
	}
	return out
}

// TestChartNetworkPolicyEgress: the adapter may reach Prometheus on the
// port of prometheus.url (not only networkPolicy.prometheus.port), the
// backends of rules.backends on theirs, and what networkPolicy.extraEgress
// adds; nothing else beyond DNS and the Kubernetes API.
func TestChartNetworkPolicyEgress(t *testing.T) {
	const dnsAndAPI = "53,53|443,6443|"
	tests := []struct {
		name   string
		values string
		// want is every egress rule, "|" between rules.
		want string
	}{
		{"default values", ``, dnsAndAPI + "9090"},
		{"Thanos on 10902", "prometheus:\n  url: http://thanos-query.monitoring.svc:10902\n", dnsAndAPI + "9090,10902"},
		{"https without a port", "prometheus:\n  url: https://prometheus.example.com/api/prom\n", dnsAndAPI + "9090,443"},
		{"prometheus-adapter's port value", "prometheus:\n  url: http://thanos-query.monitoring.svc\n  port: 10902\n", dnsAndAPI + "9090,10902"},
		{"the URL's port only", "prometheus:\n  url: http://thanos-query.monitoring.svc:10902\nnetworkPolicy:\n  prometheus:\n    port: null\n", dnsAndAPI + "10902"},
		{"selectors stay on Prometheus' rule", "prometheus:\n  url: http://thanos-query.monitoring.svc:10902\nnetworkPolicy:\n  prometheus:\n    namespaceSelector: {matchLabels: {team: obs}}\nrules:\n  backends:\n  - {name: b, url: 'http://other.example:9091'}\n",
			dnsAndAPI + "9090,10902 to|9091"},
		{"rules.backends", `rules:
  backends:
  - name: mimir
    url: https://mimir.{{ .Release.Namespace }}.svc/prometheus
    headers: {X-Scope-OrgID: team-a}
  - name: thanos
    url: http://thanos-query.monitoring.svc:10902
    inheritAuth: true
  - name: thanos-b
    url: http://thanos-query-b.monitoring.svc:10902
`, dnsAndAPI + "9090|443,10902"},
		{"extraEgress", "networkPolicy:\n  extraEgress:\n  - ports: [{port: 8443, protocol: TCP}]\n    to: [{ipBlock: {cidr: 10.0.0.0/8}}]\n", dnsAndAPI + "9090|8443 to"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			values := filepath.Join(t.TempDir(), "values.yaml")
			if err := os.WriteFile(values, []byte(tt.values), 0o644); err != nil {
				t.Fatal(err)
			}
			objs := helmTemplate(t, "-f", values)
			if got := strings.Join(egressPorts(t, objs), "|"); got != tt.want {
				t.Errorf("egress ports %q, want %q", got, tt.want)
			}
		})
	}

	t.Run("rules.backends reach the rule file", func(t *testing.T) {
		values := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(values, []byte(`rules:
  backends:
  - name: mimir
    url: https://mimir.{{ .Release.Namespace }}.svc/prometheus
    headers: {X-Scope-OrgID: team-a}
    tokenFile: /var/run/tidal/backends/mimir/token
  - name: thanos
    url: http://thanos-query.monitoring.svc:10902
    inheritAuth: true
`), 0o644); err != nil {
			t.Fatal(err)
		}
		objs := helmTemplate(t, "-f", values)
		cm := find(t, objs, "ConfigMap", namespace, "tidal-adapter-rules")
		data, _, _ := unstructured.NestedString(cm.Object, "data", "config.yaml")
		cfg := loadRules(t, "config.yaml", []byte(data))
		if len(cfg.Backends) != 2 || len(cfg.Rules) == 0 {
			t.Fatalf("backends %+v, %d rules: want the two backends next to the default rules", cfg.Backends, len(cfg.Rules))
		}
		if b := cfg.Backends[0]; b.Name != "mimir" || b.URL != "https://mimir.tidal-system.svc/prometheus" || b.TokenFile != "/var/run/tidal/backends/mimir/token" || b.Headers["X-Scope-OrgID"] != "team-a" {
			t.Errorf("backend 0 = %+v", b)
		}
		if b := cfg.Backends[1]; b.Name != "thanos" || !b.InheritAuth {
			t.Errorf("backend 1 = %+v", b)
		}
	})
}

// TestKustomizeNetworkPolicyAllowsPrometheusURL: the plain manifests'
// NetworkPolicy lets the adapter reach the port of its --prometheus-url.
func TestKustomizeNetworkPolicyAllowsPrometheusURL(t *testing.T) {
	objs := kustomize(t, manifestsDir(t))
	_, c := adapterContainer(t, objs)
	var raw string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--prometheus-url="); ok {
			raw = v
		}
	}
	u, err := url.Parse(raw)
	if err != nil || u.Port() == "" {
		t.Fatalf("--prometheus-url %q: want a URL with a port (%v)", raw, err)
	}
	var all []string
	for _, r := range egressPorts(t, objs) {
		all = append(all, strings.Split(strings.TrimSuffix(r, " to"), ",")...)
	}
	if !slices.Contains(all, u.Port()) {
		t.Errorf("egress ports %q do not include %s, the port of --prometheus-url", all, u.Port())
	}
}
