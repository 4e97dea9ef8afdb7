package manifests

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tidal-autoscaler/tidal/rules/config"
)

// prometheusAdapterValues is the prometheus-community prometheus-adapter
// chart's default values.yaml (source and version in the file).
func prometheusAdapterValues(t *testing.T) string {
	return filepath.Join(repoRoot(t), "test", "manifests", "testdata", "prometheus-adapter-values.yaml")
}

// adapterContainer returns the adapter Deployment and its container.
func adapterContainer(t *testing.T, objs []*unstructured.Unstructured) (*appsv1.Deployment, corev1.Container) {
	t.Helper()
	d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", namespace, "tidal-adapter"))
	return d, d.Spec.Template.Spec.Containers[0]
}

func apiServiceNames(objs []*unstructured.Unstructured) []string {
	var names []string
	for _, o := range ofKind(objs, "APIService") {
		names = append(names, o.GetName())
	}
	slices.Sort(names)
	return names
}

// TestChartPrometheusAdapterValues installs Tidal's chart with the
// prometheus-adapter chart's own default values: prometheus-adapter's
// default rules become Tidal's rule file, prometheus.url:port/path the
// Prometheus URL, and the APIServices registered are those that chart
// registers (custom metrics; external only with external rules).
func TestChartPrometheusAdapterValues(t *testing.T) {
	paRules := readFile(t, filepath.Join(chartDir(t), "files", "prometheus-adapter-rules.yaml"))
	objs := helmTemplate(t, "-f", prometheusAdapterValues(t))
	checkObjects(t, objs, expectation{
		tlsMode: "selfSigned", tlsSecret: "tidal-adapter-tls", apiServices: customMetricsAPIs,
		autoscaler: "crd", adapterRepl: 1, autoscalerRepl: 2,
		adapterArgs: []string{
			"--prometheus-url=http://prometheus.default.svc:9090",
			"--metrics-relist-interval=1m",
			"--v=4",
		},
		rulesVerbatim: paRules,
	})

	t.Run("prometheus-adapter's default rules", func(t *testing.T) {
		cfg := loadRules(t, "prometheus-adapter-rules.yaml", paRules)
		var series []string
		for _, r := range cfg.Rules {
			series = append(series, r.SeriesQuery)
		}
		// The six rules of that chart's templates/configmap.yaml, in order.
		want := []string{
			`{__name__=~"^container_.*",container!="POD",namespace!="",pod!=""}`,
			`{__name__=~"^container_.*",container!="POD",namespace!="",pod!=""}`,
			`{__name__=~"^container_.*",container!="POD",namespace!="",pod!=""}`,
			`{namespace!="",__name__!~"^container_.*"}`,
			`{namespace!="",__name__!~"^container_.*"}`,
			`{namespace!="",__name__!~"^container_.*"}`,
		}
		if !slices.Equal(series, want) || len(cfg.ExternalRules) != 0 || cfg.ResourceRules != nil {
			t.Errorf("series queries %q, %d external, resource %v; want prometheus-adapter's six default rules only", series, len(cfg.ExternalRules), cfg.ResourceRules != nil)
		}
		if as := cfg.Rules[4].Name.Matches; as != "^(.*)_total$" {
			t.Errorf("fifth rule matches %q, want ^(.*)_total$ (http_requests_total -> http_requests)", as)
		}
	})

	t.Run("image, resources and replicas", func(t *testing.T) {
		d, c := adapterContainer(t, objs)
		if !strings.HasPrefix(c.Image, "tidal:") {
			t.Errorf("image %q: prometheus-adapter's image must be replaced by Tidal's", c.Image)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
			t.Errorf("resources %+v: that chart's empty default keeps Tidal's", c.Resources)
		}
		if *d.Spec.Replicas != 1 {
			t.Errorf("replicas %d", *d.Spec.Replicas)
		}
	})
}

// TestChartPrometheusAdapterValueMeanings varies the prometheus-adapter
// chart's values one at a time on top of its defaults.
func TestChartPrometheusAdapterValueMeanings(t *testing.T) {
	base := prometheusAdapterValues(t)
	extra := func(t *testing.T, yaml string) string {
		p := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	arg := func(c corev1.Container, prefix string) string {
		for _, a := range c.Args {
			if strings.HasPrefix(a, prefix) {
				return a
			}
		}
		return ""
	}

	t.Run("url, port and path", func(t *testing.T) {
		objs := helmTemplate(t, "-f", base, "--set", "prometheus.url=https://thanos-query.{{ .Release.Namespace }}.svc", "--set", "prometheus.port=10902", "--set", "prometheus.path=/api/prom")
		_, c := adapterContainer(t, objs)
		if got := arg(c, "--prometheus-url="); got != "--prometheus-url=https://thanos-query.tidal-system.svc:10902/api/prom" {
			t.Errorf("got %q", got)
		}
		// The NetworkPolicy sees Prometheus' pod port, which a Service port
		// (prometheus.port) need not be: networkPolicy.prometheus.port stays,
		// and the URL's port is allowed too.
		if got := egressPorts(t, objs); got[len(got)-1] != "9090,10902" {
			t.Errorf("egress to Prometheus %q, want networkPolicy.prometheus.port 9090 and the URL's 10902", got)
		}
	})

	t.Run("custom external and resource rules", func(t *testing.T) {
		objs := helmTemplate(t, "-f", base, "-f", extra(t, `rules:
  custom:
  - seriesQuery: '{__name__="jobs_pending",namespace!="",deployment!=""}'
    resources:
      overrides:
        namespace: {resource: namespace}
        deployment: {group: apps, resource: deployment}
    name:
      matches: ^jobs_(pending)$
      as: pending_jobs_{{ .Release.Name }}
    metricsQuery: max by (<<.GroupBy>>) (<<.Series>>{<<.LabelMatchers>>})
  external:
  - seriesQuery: '{__name__="kafka_consumergroup_lag",namespace!=""}'
    resources:
      overrides:
        namespace: {resource: namespace}
    metricsQuery: sum by (consumergroup) (<<.Series>>{<<.LabelMatchers>>})
  resource:
    cpu:
      containerQuery: sum by (<<.GroupBy>>) (rate(container_cpu_usage_seconds_total{container!="",<<.LabelMatchers>>}[3m]))
      nodeQuery: sum by (<<.GroupBy>>) (rate(node_cpu_seconds_total{mode!="idle",<<.LabelMatchers>>}[3m]))
      resources:
        overrides:
          node: {resource: node}
          namespace: {resource: namespace}
          pod: {resource: pod}
      containerLabel: container
    memory:
      containerQuery: sum by (<<.GroupBy>>) (container_memory_working_set_bytes{container!="",<<.LabelMatchers>>})
      nodeQuery: sum by (<<.GroupBy>>) (node_memory_MemTotal_bytes{<<.LabelMatchers>>} - node_memory_MemAvailable_bytes{<<.LabelMatchers>>})
      resources:
        overrides:
          node: {resource: node}
          namespace: {resource: namespace}
          pod: {resource: pod}
      containerLabel: container
    window: 3m
`))
		want := append(append(slices.Clone(customMetricsAPIs), "v1beta1.external.metrics.k8s.io"), resourceMetricsAPIs...)
		slices.Sort(want)
		if got := apiServiceNames(objs); !slices.Equal(got, want) {
			t.Errorf("APIServices %v, want %v: prometheus-adapter's chart registers external and resource metrics when it has such rules", got, want)
		}
		checkRules(t, objs, expectation{rulesCheck: func(t *testing.T, cfg *config.Config) {
			if len(cfg.Rules) != 7 || len(cfg.ExternalRules) != 1 || cfg.ResourceRules == nil || cfg.ResourceRules.Window.String() != "3m" {
				t.Fatalf("%d rules, %d external, resource %+v: want the six defaults and the custom rule, the external rule, the resource rules", len(cfg.Rules), len(cfg.ExternalRules), cfg.ResourceRules)
			}
			if got := cfg.Rules[6].Name.As; got != "pending_jobs_tidal" {
				t.Errorf("custom rule name %q: rules.custom is templated there", got)
			}
		}})
		_, c := adapterContainer(t, objs)
		if arg(c, "--enable-resource-metrics=") != "--enable-resource-metrics=true" || arg(c, "--enable-external-metrics=") != "--enable-external-metrics=true" {
			t.Errorf("args %q", c.Args)
		}
	})

	t.Run("apiServices.register=false", func(t *testing.T) {
		// The first step of taking over a running prometheus-adapter:
		// Tidal serves, its APIServices are still prometheus-adapter's.
		objs := helmTemplate(t, "-f", base, "--set", "apiServices.register=false")
		if got := apiServiceNames(objs); len(got) != 0 {
			t.Errorf("APIServices %v rendered", got)
		}
		_, c := adapterContainer(t, objs)
		if !slices.Contains(c.Args, "--enable-custom-metrics=true") {
			t.Errorf("args %q: the adapter must still serve custom metrics", c.Args)
		}
		find(t, objs, "Secret", namespace, "tidal-adapter-tls")
	})

	t.Run("rules.existing", func(t *testing.T) {
		objs := helmTemplate(t, "-f", base, "--set", "rules.existing=my-rules")
		for _, o := range ofKind(objs, "ConfigMap") {
			if o.GetName() == "tidal-adapter-rules" {
				t.Error("rules ConfigMap rendered although rules.existing is set")
			}
		}
		if !slices.Contains(keysOfVolumes(t, objs), "configMap:my-rules") {
			t.Errorf("adapter does not mount my-rules: %v", keysOfVolumes(t, objs))
		}
	})

	t.Run("replicas resources logLevel metricsRelistInterval extraArguments", func(t *testing.T) {
		objs := helmTemplate(t, "-f", base, "--set", "replicas=3", "--set", "resources.requests.cpu=250m",
			"--set", "logLevel=2", "--set", "metricsRelistInterval=30s", "--set", "extraArguments[0]=--metrics-max-age=5m",
			"--set", "nodeSelector.pool=system")
		d, c := adapterContainer(t, objs)
		if *d.Spec.Replicas != 3 || c.Resources.Requests.Cpu().String() != "250m" {
			t.Errorf("replicas %d, resources %+v", *d.Spec.Replicas, c.Resources)
		}
		for _, want := range []string{"--v=2", "--metrics-relist-interval=30s", "--metrics-max-age=5m"} {
			if !slices.Contains(c.Args, want) {
				t.Errorf("args %q lack %q", c.Args, want)
			}
		}
		if d.Spec.Template.Spec.NodeSelector["pool"] != "system" {
			t.Errorf("nodeSelector %v", d.Spec.Template.Spec.NodeSelector)
		}
	})

	t.Run("tls.enable", func(t *testing.T) {
		// Any certificate will do: the chart writes it as given.
		ca := readFile(t, filepath.Join(chartDir(t), "ci", "existing-secret-values.yaml"))
		_, rest, _ := bytes.Cut(ca, []byte("caBundle: |\n"))
		caPEM := bytes.ReplaceAll(rest, []byte("      "), nil)
		block, _ := pem.Decode(caPEM)
		if block == nil {
			t.Fatal("no PEM in ci/existing-secret-values.yaml")
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			t.Fatal(err)
		}
		objs := helmTemplate(t, "-f", base, "--set", "tls.enable=true", "--set-string", "tls.ca="+string(caPEM),
			"--set-string", "tls.certificate="+string(caPEM), "--set-string", "tls.key=-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----\n")
		s := typed[corev1.Secret](t, find(t, objs, "Secret", namespace, "tidal-adapter-tls"))
		if !bytes.Equal(s.Data["tls.crt"], caPEM) || !strings.Contains(string(s.Data["tls.key"]), "PRIVATE KEY") {
			t.Errorf("Secret does not hold tls.certificate and tls.key")
		}
		for _, o := range ofKind(objs, "APIService") {
			b64, _, _ := unstructured.NestedString(o.Object, "spec", "caBundle")
			if got := decodeB64(t, o.GetName(), b64); !bytes.Equal(got, caPEM) {
				t.Errorf("%s: caBundle is not tls.ca", o.GetName())
			}
			if skip, _, _ := unstructured.NestedBool(o.Object, "spec", "insecureSkipTLSVerify"); skip {
				t.Errorf("%s: insecureSkipTLSVerify", o.GetName())
			}
		}
	})

	t.Run("certManager.enabled", func(t *testing.T) {
		objs := helmTemplate(t, "-f", base, "--set", "certManager.enabled=true")
		find(t, objs, "Certificate", namespace, "tidal-adapter-tls")
		for _, o := range ofKind(objs, "APIService") {
			if o.GetAnnotations()["cert-manager.io/inject-ca-from"] != namespace+"/tidal-adapter-tls" {
				t.Errorf("%s: no cert-manager CA injection", o.GetName())
			}
		}
	})

	t.Run("refused", func(t *testing.T) {
		helm := tool(t, "helm")
		for _, tt := range []struct {
			set  []string
			want string
		}{
			{[]string{"prometheus.url=http://prometheus:9090"}, "has a port and prometheus.port (9090) adds another"},
			{[]string{"tls.enable=true"}, "tls.ca: with tls.enable it must hold a PEM block"},
			{[]string{"tls.enable=true", "tls.mode=existingSecret", "tls.existingSecret.name=x", "tls.existingSecret.caBundle=-----BEGIN CERTIFICATE-----"}, "tls.enable (prometheus-adapter's certificate as values) and tls.mode=existingSecret"},
			{[]string{"hostNetwork.enabled=true"}, "hostNetwork.enabled: prometheus-adapter's value, which would keep the adapter on listenPort (6443, kube-apiserver's on control-plane nodes): set adapter.hostNetwork.enabled"},
			{[]string{"extraVolumes[0].name=certs"}, "extraVolumes: Tidal's chart mounts Prometheus credentials"},
			{[]string{"env[0].name=X"}, "or adapter.extraEnv"},
			{[]string{"rbac.create=false"}, "rbac.create=false"},
			{[]string{"rules.existing=a", "rules.existingConfigMap=b"}, "name different ConfigMaps"},
			{[]string{"rules.default=false"}, "apiServices: enable at least one"},
			{[]string{"rules.default=maybe"}, "at '/rules/default'"},
		} {
			t.Run(strings.Join(tt.set, ","), func(t *testing.T) {
				args := []string{"template", releaseName, chartDir(t), "--namespace", namespace, "-f", base}
				for _, s := range tt.set {
					args = append(args, "--set", s)
				}
				out, err := run(helmEnv(t), helm, args...)
				if err == nil {
					t.Fatalf("rendered; want an error containing %q:\n%.300s", tt.want, out)
				}
				if !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("error does not say %q:\n%v", tt.want, err)
				}
			})
		}
	})
}
