package adapter

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/test/exporter"
	"github.com/tidal-autoscaler/tidal/test/harness"
)

// The answers where Tidal and prometheus-adapter could differ (issue 23):
// what a `<<.Resource>>` template maps, the scope discovery lists, requests
// without a namespace, empty answers, precision, NaN and metrics.k8s.io's
// discovery. Everything goes through the aggregator, as the HPA reads it.

// compatNS holds the objects the template's series name: a Job called
// kubernetes-pods (suspended: it runs nothing) and a Service called web.
const compatNS = "compat"

// compatRules are custom rules: the rule of prometheus-adapter's
// documentation (docs/sample-config.yaml) that maps resources with
// `template: "<<.Resource>>"`, and one whose values include NaN.
const compatRules = `- seriesQuery: '{__name__=~"^tmpl_.*_total$",namespace!=""}'
  name: {matches: "^(.*)_total$"}
  resources: {template: "<<.Resource>>"}
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[30s])) by (<<.GroupBy>>)'
- seriesQuery: 'e2e_ratio{namespace!="",pod!=""}'
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
`

// compatExternalRules are external rules appended after the others.
const compatExternalRules = `- seriesQuery: 'e2e_external_ratio{queue!=""}'
  resources: {namespaced: false}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (queue)'
`

// tmplRate is the rate of the template's series.
const tmplRate = 2.5

// setupCompat creates the compat namespace's objects and sets the series
// the tests read: the template's series with namespace, pod, job, service
// and verb labels (job kept as the series says: the harness's Prometheus
// honours the exporter's labels), and ratios of which some are NaN.
func setupCompat(ctx context.Context, h *harness.Harness) error {
	if err := h.EnsureNamespace(ctx, compatNS); err != nil {
		return err
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes-pods", Namespace: compatNS},
		Spec: batchv1.JobSpec{
			Suspend: ptr.To(true),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "job"}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "job", Image: "job"}},
				},
			},
		},
	}
	if _, err := h.Client.BatchV1().Jobs(compatNS).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		return err
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: compatNS},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80}}},
	}
	if _, err := h.Client.CoreV1().Services(compatNS).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	h.Exporter.SetCounterRate("tmpl_requests_total", exporter.Labels{
		"namespace": compatNS, "pod": "web-0", "job": "kubernetes-pods", "service": "web", "verb": "GET",
	}, tmplRate)
	h.Exporter.SetGauge("e2e_ratio", exporter.Labels{"namespace": ns, "pod": env.pods[0], "kind": "nan"}, math.NaN())
	h.Exporter.SetGauge("e2e_ratio", exporter.Labels{"namespace": ns, "pod": env.pods[1], "kind": "num"}, 0.3125)
	h.Exporter.SetGauge("e2e_external_ratio", exporter.Labels{"queue": "n"}, math.NaN())
	h.Exporter.SetGauge("e2e_external_ratio", exporter.Labels{"queue": "v"}, 0.3125)
	return nil
}

// items is the raw "items" of a list answered 200 (`[]` or `null` for an
// empty one), and its decoded items.
func items(t *testing.T, c *http.Client, path string) (string, []item) {
	t.Helper()
	code, body := get(t, c, env.h.APIServerURL, path)
	if code != http.StatusOK {
		t.Fatalf("GET %s = %d %s", path, code, body)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, body)
	}
	var l list
	if err := json.Unmarshal(body, &l); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, body)
	}
	return string(raw["items"]), l.Items
}

// discovered is what API discovery of a group version lists: resource
// name -> namespaced.
func discovered(t *testing.T, c *http.Client, gv string) map[string]bool {
	t.Helper()
	code, body := get(t, c, env.h.APIServerURL, gv)
	if code != http.StatusOK {
		t.Fatalf("GET %s = %d %s", gv, code, body)
	}
	var l metav1.APIResourceList
	if err := json.Unmarshal(body, &l); err != nil {
		t.Fatalf("GET %s: %v", gv, err)
	}
	out := map[string]bool{}
	for _, r := range l.APIResources {
		out[r.Name] = r.Namespaced
	}
	return out
}

// TestCompatDiscovery: what discovery lists under the documentation's
// template over namespace, pod, job and service labels, and the other
// rules, with each metric's scope.
func TestCompatDiscovery(t *testing.T) {
	need(t)
	c := hpaClient(t)
	// TestBadRuleFileKeepsLastGoodRules renames queue_messages and puts it
	// back without waiting: wait until the rules it restored are listed.
	var listed map[string]map[string]bool
	if err := harness.WaitReady(context.Background(), nil, "the restored rules listed", time.Minute, func(context.Context) error {
		listed = map[string]map[string]bool{cm1: discovered(t, c, cm1), cm2: discovered(t, c, cm2), em1: discovered(t, c, em1)}
		if _, ok := listed[em1]["queue_messages"]; !ok {
			return fmt.Errorf("queue_messages not listed yet")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	custom, external := []string{cm1, cm2}, []string{em1}
	tests := []struct {
		name       string
		versions   []string
		metric     string
		namespaced bool
	}{
		{"template: pod label", custom, "pods/tmpl_requests", true},
		{"template: the job label is batch/v1 jobs, as in prometheus-adapter", custom, "jobs.batch/tmpl_requests", true},
		{"template: service label", custom, "services/tmpl_requests", true},
		{"template: namespace label, cluster-scoped", custom, "namespaces/tmpl_requests", false},
		{"template: the scrape job's label of another rule's series", custom, "jobs.batch/app_queue_depth", true},
		{"template: deployment label", custom, "deployments.apps/app_queue_depth", true},
		{"template: namespaces beside deployments, cluster-scoped", custom, "namespaces/app_queue_depth", false},
		{"overrides: pods", custom, "pods/http_requests_per_second", true},
		{"overrides: services", custom, "services/http_requests_per_second", true},
		{"overrides: namespaces beside pods, cluster-scoped", custom, "namespaces/http_requests_per_second", false},
		{"external: namespaced rule", external, "queue_messages", true},
		{"external: rule with namespaced: false", external, "global_backlog", false},
		{"external: another rule with namespaced: false", external, "e2e_external_ratio", false},
	}
	for _, tt := range tests {
		for _, v := range tt.versions {
			t.Run(tt.name+" "+v, func(t *testing.T) {
				namespaced, ok := listed[v][tt.metric]
				if !ok {
					t.Fatalf("%s does not list %s: %v", v, tt.metric, listed[v])
				}
				if namespaced != tt.namespaced {
					t.Errorf("%s lists %s with namespaced %v, want %v", v, tt.metric, namespaced, tt.namespaced)
				}
			})
		}
	}
	t.Run("the template maps no other label (verb, instance)", func(t *testing.T) {
		var got []string
		for name := range listed[cm2] {
			if strings.HasSuffix(name, "/tmpl_requests") {
				got = append(got, name)
			}
		}
		if len(got) != 4 {
			t.Errorf("tmpl_requests is listed for %v, want jobs.batch, namespaces, pods and services", got)
		}
	})
}

// TestCompatJobLabel: a Job named by the job label is served (item 1), and
// `tidal rules explain` says which label mapped to which resource.
func TestCompatJobLabel(t *testing.T) {
	h := need(t)
	c := hpaClient(t)
	t.Run("jobs.batch/kubernetes-pods", func(t *testing.T) {
		l := getList(t, c, cm2+"/namespaces/"+compatNS+"/jobs.batch/kubernetes-pods/tmpl_requests")
		if len(l.Items) != 1 {
			t.Fatalf("%d items, want 1", len(l.Items))
		}
		it := l.Items[0]
		if it.DescribedObject.APIVersion != "batch/v1" || it.DescribedObject.Kind != "Job" || it.DescribedObject.Name != "kubernetes-pods" || it.DescribedObject.Namespace != compatNS {
			t.Errorf("describedObject = %+v", it.DescribedObject)
		}
		// Runs after TestPrometheusOutage, whose restart leaves a gap in
		// the rate window: the value is checked for being there, not
		// against the oracle to the milli-unit.
		if v := milli(t, it.Value); v <= 0 {
			t.Errorf("value %s, want a rate", it.Value)
		}
	})
	t.Run("services/web of the same series", func(t *testing.T) {
		l := getList(t, c, cm2+"/namespaces/"+compatNS+"/services/web/tmpl_requests")
		if len(l.Items) != 1 || l.Items[0].DescribedObject.Kind != "Service" {
			t.Fatalf("got %+v", l.Items)
		}
	})
	t.Run("rules explain shows the label of each resource", func(t *testing.T) {
		var out bytes.Buffer
		cmd := exec.Command(env.tidal, "rules", "explain", "--config", env.ruleFile, "--prometheus-url", h.PrometheusURL, "--kubeconfig", h.AdminKubeconfig)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("tidal rules explain: %v\n%s", err, out.String())
		}
		want := "  metric tmpl_requests (custom.metrics.k8s.io) for jobs.batch (label job, namespaced), namespaces (label namespace, cluster-scoped), pods (label pod, namespaced), services (label service, namespaced) from series tmpl_requests_total"
		if !strings.Contains(out.String(), want+"\n") {
			t.Errorf("explain lacks line %q; got:\n%s", want, out.String())
		}
	})
}

// TestCompatRootScoped: a request without a namespace for a namespaced
// resource is 404 saying it needs one, as prometheus-adapter answers
// (item 3); a cluster-scoped resource is still served there.
func TestCompatRootScoped(t *testing.T) {
	need(t)
	c := hpaClient(t)
	for _, path := range []string{
		cm1 + "/pods/*/http_requests_per_second",
		cm2 + "/pods/*/http_requests_per_second",
		cm2 + "/pods/" + env.pods[0] + "/http_requests_per_second",
		cm2 + "/services/*/http_requests_per_second",
	} {
		t.Run(path, func(t *testing.T) {
			st := getStatus(t, c, path)
			if st.Code != http.StatusNotFound || st.Reason != string(metav1.StatusReasonNotFound) || !strings.Contains(st.Message, "is namespaced, so the request needs one") {
				t.Errorf("got %+v, want 404 NotFound saying the resource is namespaced and needs a namespace", st)
			}
		})
	}
	t.Run("the namespace's own metric needs none", func(t *testing.T) {
		l := getList(t, c, cm2+"/namespaces/"+ns+"/metrics/http_requests_per_second")
		if len(l.Items) != 1 || l.Items[0].DescribedObject.Kind != "Namespace" {
			t.Errorf("got %+v", l.Items)
		}
	})
}

// TestCompatBadSelectors: selectors that do not parse are the client's
// mistake (400) in both places, where prometheus-adapter answers 500 for
// the metricLabelSelector.
func TestCompatBadSelectors(t *testing.T) {
	need(t)
	c := hpaClient(t)
	for _, q := range []string{"metricLabelSelector=code+in+%28500", "labelSelector=app+in+%28web"} {
		t.Run(q, func(t *testing.T) {
			st := getStatus(t, c, cm2+"/namespaces/"+ns+"/pods/*/http_requests_per_second?"+q)
			if st.Code != http.StatusBadRequest {
				t.Errorf("got %+v, want 400", st)
			}
		})
	}
}

// TestCompatEmptyAnswers: a selection matching nothing is 200 with
// "items": [] in every API; one named object without a value is 404
// naming the metric and the object (item 4).
func TestCompatEmptyAnswers(t *testing.T) {
	h := need(t)
	c := hpaClient(t)
	// The HPA's identity may not list NodeMetrics.
	admin := &http.Client{Transport: adminTransport(t, h)}
	lists := []struct {
		name, path string
		admin      bool
	}{
		{"pods/* matching no pod", cm2 + "/namespaces/" + ns + "/pods/*/http_requests_per_second?labelSelector=app%3Dnone", false},
		{"pods/* in v1beta1", cm1 + "/namespaces/" + ns + "/pods/*/http_requests_per_second?labelSelector=app%3Dnone", false},
		{"services/* matching no service", cm2 + "/namespaces/" + ns + "/services/*/http_requests_per_second?labelSelector=app%3Dnone", false},
		{"jobs.batch/* in a namespace without series", cm2 + "/namespaces/" + ns + "/jobs.batch/*/tmpl_requests", false},
		{"pods matching, none with a series", cm2 + "/namespaces/" + ns + "/pods/*/tmpl_requests?labelSelector=app%3Dweb", false},
		{"external metric matching no series", em1 + "/namespaces/" + ns + "/global_backlog?labelSelector=queue%3Dnone", false},
		{"PodMetrics of a namespace without pods", "/apis/metrics.k8s.io/v1beta1/namespaces/" + compatNS + "/pods", false},
		{"NodeMetrics matching no node", "/apis/metrics.k8s.io/v1beta1/nodes?labelSelector=none%3Dnone", true},
	}
	for _, tt := range lists {
		t.Run(tt.name, func(t *testing.T) {
			client := c
			if tt.admin {
				client = admin
			}
			if raw, _ := items(t, client, tt.path); raw != "[]" {
				t.Errorf("items = %s, want []", raw)
			}
		})
	}
	t.Run("a named pod without a value", func(t *testing.T) {
		st := getStatus(t, c, cm2+"/namespaces/"+ns+"/pods/"+env.pods[0]+"/tmpl_requests")
		if st.Code != http.StatusNotFound || !strings.Contains(st.Message, "tmpl_requests") || !strings.Contains(st.Message, env.pods[0]) {
			t.Errorf("got %+v, want 404 naming tmpl_requests and %s", st, env.pods[0])
		}
	})
}

// TestCompatPrecision: values keep the precision Prometheus returned, in
// nano-units (item 5): 0.3125 is 312500u, not 313m (or prometheus-adapter's
// truncated 312m).
func TestCompatPrecision(t *testing.T) {
	need(t)
	c := hpaClient(t)
	tests := []struct{ name, path, want string }{
		{"custom metric of a pod", cm2 + "/namespaces/" + ns + "/pods/" + env.pods[1] + "/e2e_ratio", "312500u"},
		{"custom metric in v1beta1", cm1 + "/namespaces/" + ns + "/pods/" + env.pods[1] + "/e2e_ratio", "312500u"},
		{"external metric", em1 + "/namespaces/" + ns + "/e2e_external_ratio?labelSelector=queue%3Dv", "312500u"},
		{"external metric of 1.0005", em1 + "/namespaces/" + ns + "/global_backlog?labelSelector=queue%3Da", "1000500u"},
		{"gauge of 3.14159", cm2 + "/namespaces/" + ns + "/deployments.apps/web/app_queue_depth", "3141590u"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, got := items(t, c, tt.path)
			if len(got) != 1 || got[0].Value != tt.want {
				t.Errorf("got %+v, want one item of %s", got, tt.want)
			}
		})
	}
}

// TestCompatNaN: a NaN is no sample: left out of lists (a list left with
// nothing is []), and 404 naming the metric for one object, never 500
// (item 6).
func TestCompatNaN(t *testing.T) {
	need(t)
	c := hpaClient(t)
	lists := []struct {
		name, path string
		want       []string // described object names or queues
	}{
		{"pods/*: the NaN pod left out", cm2 + "/namespaces/" + ns + "/pods/*/e2e_ratio?labelSelector=app%3Dweb", []string{env.pods[1]}},
		{"pods/* with only NaN: empty list", cm2 + "/namespaces/" + ns + "/pods/*/e2e_ratio?labelSelector=app%3Dweb&metricLabelSelector=kind%3Dnan", nil},
		{"external: the NaN queue left out", em1 + "/namespaces/" + ns + "/e2e_external_ratio", []string{"v"}},
		{"external with only NaN: empty list", em1 + "/namespaces/" + ns + "/e2e_external_ratio?labelSelector=queue%3Dn", nil},
	}
	for _, tt := range lists {
		t.Run(tt.name, func(t *testing.T) {
			raw, got := items(t, c, tt.path)
			var names []string
			for _, it := range got {
				if it.DescribedObject.Name != "" {
					names = append(names, it.DescribedObject.Name)
				} else {
					names = append(names, it.MetricLabels["queue"])
				}
			}
			if strings.Join(names, ",") != strings.Join(tt.want, ",") || (len(tt.want) == 0 && raw != "[]") {
				t.Errorf("items %s (%v), want %v", raw, names, tt.want)
			}
		})
	}
	for _, tt := range []struct{ name, path, mention string }{
		{"a named pod whose value is NaN", cm2 + "/namespaces/" + ns + "/pods/" + env.pods[0] + "/e2e_ratio", env.pods[0]},
		{"the namespace, whose sum is NaN", cm2 + "/namespaces/" + ns + "/metrics/e2e_ratio", ns},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := getStatus(t, c, tt.path)
			if st.Code != http.StatusNotFound || !strings.Contains(st.Message, "e2e_ratio") || !strings.Contains(st.Message, tt.mention) {
				t.Errorf("got %+v, want 404 naming e2e_ratio and %s", st, tt.mention)
			}
		})
	}
}

// TestCompatResourceMetricsDiscovery: metrics.k8s.io prefers a version it
// serves, v1 of v1 and v1beta1, at the adapter and through the aggregator
// (item 7).
func TestCompatResourceMetricsDiscovery(t *testing.T) {
	h := need(t)
	direct := &http.Client{Transport: adminTransport(t, h)}
	through := hpaClient(t)
	routes := []struct {
		name   string
		client *http.Client
		base   string
	}{
		{"at the adapter", direct, env.adapter.URL("")},
		{"through the aggregator", through, h.APIServerURL},
	}
	for _, r := range routes {
		t.Run(r.name+": /apis/metrics.k8s.io", func(t *testing.T) {
			code, body := get(t, r.client, r.base, "/apis/metrics.k8s.io")
			var g metav1.APIGroup
			if code != http.StatusOK || json.Unmarshal(body, &g) != nil {
				t.Fatalf("%d %s", code, body)
			}
			checkPreferred(t, g)
		})
		t.Run(r.name+": /apis", func(t *testing.T) {
			code, body := get(t, r.client, r.base, "/apis")
			var l metav1.APIGroupList
			if code != http.StatusOK || json.Unmarshal(body, &l) != nil {
				t.Fatalf("%d %s", code, body)
			}
			for _, g := range l.Groups {
				if g.Name == "metrics.k8s.io" {
					checkPreferred(t, g)
					return
				}
			}
			t.Errorf("/apis does not list metrics.k8s.io")
		})
	}
}

func checkPreferred(t *testing.T, g metav1.APIGroup) {
	t.Helper()
	var served []string
	for _, v := range g.Versions {
		served = append(served, v.GroupVersion)
	}
	if g.PreferredVersion.GroupVersion != "metrics.k8s.io/v1" || strings.Join(served, ",") != "metrics.k8s.io/v1,metrics.k8s.io/v1beta1" {
		t.Errorf("preferred %s, versions %v; want metrics.k8s.io/v1 of the served v1 and v1beta1", g.PreferredVersion.GroupVersion, served)
	}
}
