package manifests

import (
	"bufio"
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

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

// valuesFile writes a values file for one test and returns its path.
func valuesFile(t *testing.T, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
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
	// checkObjects holds every rendering to uid 65532 and a budget of
	// minAvailable 1. That chart's defaults map onto uid 10001 and no budget
	// (its podDisruptionBudget.enabled: false), which
	// TestChartPrometheusAdapterMappedValues checks; checkObjects gets
	// Tidal's, through that chart's own values.
	tidals := valuesFile(t, "securityContext: {runAsUser: 65532}\npodDisruptionBudget: {enabled: true, minAvailable: 1, maxUnavailable: null}\n")
	checkObjects(t, helmTemplate(t, "-f", prometheusAdapterValues(t), "-f", tidals), expectation{
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

// checkPrometheusAdapterSecurity: the adapter pod with the prometheus-adapter
// chart's default security contexts (fsGroup 10001; uid 10001, no privilege
// escalation, drop all, read-only root, non-root, seccomp RuntimeDefault)
// merged over Tidal's.
func checkPrometheusAdapterSecurity(t *testing.T, spec *corev1.PodSpec) {
	t.Helper()
	psc := spec.SecurityContext
	if psc == nil || ptr.Deref(psc.FSGroup, 0) != 10001 || !ptr.Deref(psc.RunAsNonRoot, false) ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v: want fsGroup 10001 (theirs), runAsNonRoot and seccomp RuntimeDefault (kept)", psc)
	}
	sc := spec.Containers[0].SecurityContext
	if sc == nil || ptr.Deref(sc.RunAsUser, 0) != 10001 || !ptr.Deref(sc.RunAsNonRoot, false) || !ptr.Deref(sc.ReadOnlyRootFilesystem, false) ||
		ptr.Deref(sc.AllowPrivilegeEscalation, true) || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("container securityContext %+v: want runAsUser 10001, runAsNonRoot, readOnlyRootFilesystem, no privilege escalation, drop [ALL], seccomp RuntimeDefault", sc)
	}
}

// pdbNames returns the names of the PodDisruptionBudgets rendered.
func pdbNames(objs []*unstructured.Unstructured) map[string]bool {
	names := map[string]bool{}
	for _, o := range ofKind(objs, "PodDisruptionBudget") {
		names[o.GetName()] = true
	}
	return names
}

// TestChartPrometheusAdapterMappedValues sets, on top of the
// prometheus-adapter chart's defaults, each of its pod, Deployment,
// ServiceAccount and PodDisruptionBudget values that map onto adapter.*
// (docs/migration.md), and checks it lands on Tidal's adapter; no row may
// change the adapter's selector.
func TestChartPrometheusAdapterMappedValues(t *testing.T) {
	selector := map[string]string{"app.kubernetes.io/name": "tidal", "app.kubernetes.io/instance": "tidal", "app.kubernetes.io/component": "adapter"}
	pdb := func(t *testing.T, objs []*unstructured.Unstructured) *policyv1.PodDisruptionBudget {
		t.Helper()
		return typed[policyv1.PodDisruptionBudget](t, find(t, objs, "PodDisruptionBudget", namespace, "tidal-adapter"))
	}
	for _, tt := range []struct {
		name, values string
		check        func(t *testing.T, objs []*unstructured.Unstructured, d *appsv1.Deployment)
	}{
		{"podLabels merged into adapter.podLabels", `
podLabels: {team: metrics, app.kubernetes.io/component: not-the-selector}
adapter: {podLabels: {own: "yes", team: tidal}}
`, func(t *testing.T, _ []*unstructured.Unstructured, d *appsv1.Deployment) {
			want := maps.Clone(selector)
			want["team"], want["own"] = "metrics", "yes"
			if got := d.Spec.Template.Labels; !maps.Equal(got, want) {
				t.Errorf("pod labels %v, want %v: theirs over adapter.podLabels, the selector's kept", got, want)
			}
		}},
		{"customLabels on every object and pod", `
customLabels: {cost-center: "42", app.kubernetes.io/instance: other, release: theirs}
monitoring: {serviceMonitor: {enabled: true, labels: {release: kube-prometheus-stack}}}
`, func(t *testing.T, objs []*unstructured.Unstructured, d *appsv1.Deployment) {
			for _, o := range objs {
				if l := o.GetLabels(); l["cost-center"] != "42" || l["app.kubernetes.io/instance"] != "tidal" {
					t.Errorf("%s labels %v: want cost-center 42 and Tidal's own instance label", objKey(o), l)
				}
			}
			for _, name := range []string{"tidal-adapter", "tidal-autoscaler"} {
				dep := typed[appsv1.Deployment](t, find(t, objs, "Deployment", namespace, name))
				if l := dep.Spec.Template.Labels; l["cost-center"] != "42" || l["app.kubernetes.io/instance"] != "tidal" {
					t.Errorf("%s pod labels %v: want cost-center 42, the selector's kept", name, l)
				}
			}
			svc := typed[corev1.Service](t, find(t, objs, "Service", namespace, "tidal-adapter"))
			if !maps.Equal(svc.Spec.Selector, selector) {
				t.Errorf("Service selector %v, want %v", svc.Spec.Selector, selector)
			}
			sm := find(t, objs, "ServiceMonitor", namespace, "tidal-adapter")
			if got := sm.GetLabels()["release"]; got != "kube-prometheus-stack" {
				t.Errorf("ServiceMonitor label release %q: monitoring.serviceMonitor.labels win over customLabels", got)
			}
		}},
		{"topologySpreadConstraints", `
topologySpreadConstraints:
- {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}
`, func(t *testing.T, _ []*unstructured.Unstructured, d *appsv1.Deployment) {
			tsc := d.Spec.Template.Spec.TopologySpreadConstraints
			if len(tsc) != 1 || tsc[0].TopologyKey != "topology.kubernetes.io/zone" || tsc[0].LabelSelector == nil || !maps.Equal(tsc[0].LabelSelector.MatchLabels, selector) {
				t.Errorf("topologySpreadConstraints %+v: want the zone constraint over the adapter's pods", tsc)
			}
		}},
		{"extraContainers", `
extraContainers:
- {name: sidecar, image: "busybox:1.37", args: [sleep, infinity]}
`, func(t *testing.T, _ []*unstructured.Unstructured, d *appsv1.Deployment) {
			if cs := d.Spec.Template.Spec.Containers; len(cs) != 2 || cs[0].Name != "adapter" || cs[1].Name != "sidecar" || cs[1].Image != "busybox:1.37" {
				t.Errorf("containers %+v: want adapter, then the sidecar", cs)
			}
		}},
		{"serviceAccount.annotations merged", `
serviceAccount: {annotations: {eks.amazonaws.com/role-arn: "arn:aws:iam::123456789012:role/adapter", shared: theirs}}
adapter: {serviceAccount: {annotations: {own: "yes", shared: ours}}}
`, func(t *testing.T, objs []*unstructured.Unstructured, _ *appsv1.Deployment) {
			sa := typed[corev1.ServiceAccount](t, find(t, objs, "ServiceAccount", namespace, "tidal-adapter"))
			want := map[string]string{"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/adapter", "shared": "theirs", "own": "yes"}
			if !maps.Equal(sa.Annotations, want) {
				t.Errorf("ServiceAccount annotations %v, want %v", sa.Annotations, want)
			}
		}},
		{"security contexts: that chart's 4.x defaults (drop all)", "", func(t *testing.T, _ []*unstructured.Unstructured, d *appsv1.Deployment) {
			checkPrometheusAdapterSecurity(t, &d.Spec.Template.Spec)
		}},
		{"security contexts: that chart's 5.x defaults", `
podSecurityContext: {fsGroup: 10001}
securityContext:
  allowPrivilegeEscalation: false
  capabilities: {drop: [ALL]}
  readOnlyRootFilesystem: true
  runAsNonRoot: true
  runAsUser: 10001
  seccompProfile: {type: RuntimeDefault}
`, func(t *testing.T, _ []*unstructured.Unstructured, d *appsv1.Deployment) {
			checkPrometheusAdapterSecurity(t, &d.Spec.Template.Spec)
		}},
		{"securityContext merged key by key, as Helm merges values", `
podSecurityContext: {fsGroup: 2000, runAsUser: 2000}
securityContext: {runAsUser: 2000, capabilities: {add: [net_bind_service]}}
`, func(t *testing.T, _ []*unstructured.Unstructured, d *appsv1.Deployment) {
			psc, sc := d.Spec.Template.Spec.SecurityContext, d.Spec.Template.Spec.Containers[0].SecurityContext
			if ptr.Deref(psc.RunAsUser, 0) != 2000 || ptr.Deref(psc.FSGroup, 0) != 2000 || ptr.Deref(psc.RunAsGroup, 0) != 65532 || !ptr.Deref(psc.RunAsNonRoot, false) {
				t.Errorf("pod securityContext %+v: want uid and fsGroup 2000, Tidal's runAsGroup and runAsNonRoot kept", psc)
			}
			if ptr.Deref(sc.RunAsUser, 0) != 2000 || !ptr.Deref(sc.ReadOnlyRootFilesystem, false) || !ptr.Deref(sc.RunAsNonRoot, false) ||
				!slices.Equal(sc.Capabilities.Add, []corev1.Capability{"NET_BIND_SERVICE"}) || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
				t.Errorf("container securityContext %+v: want uid 2000, add NET_BIND_SERVICE, the rest kept", sc)
			}
		}},
		{"dnsPolicy and dnsConfig", `
dnsPolicy: None
dnsConfig: {nameservers: [10.0.0.10], searches: [svc.cluster.local]}
`, func(t *testing.T, _ []*unstructured.Unstructured, d *appsv1.Deployment) {
			spec := d.Spec.Template.Spec
			if spec.DNSPolicy != corev1.DNSNone || spec.DNSConfig == nil || !slices.Equal(spec.DNSConfig.Nameservers, []string{"10.0.0.10"}) {
				t.Errorf("dnsPolicy %q, dnsConfig %+v: want None and the nameserver", spec.DNSPolicy, spec.DNSConfig)
			}
		}},
		{"dnsConfig with adapter.hostNetwork: ClusterFirst is ClusterFirstWithHostNet", `
dnsPolicy: ClusterFirst
dnsConfig: {options: [{name: ndots, value: "2"}]}
adapter: {hostNetwork: {enabled: true}}
`, func(t *testing.T, _ []*unstructured.Unstructured, d *appsv1.Deployment) {
			spec := d.Spec.Template.Spec
			if !spec.HostNetwork || spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet || spec.DNSConfig == nil || len(spec.DNSConfig.Options) != 1 {
				t.Errorf("hostNetwork %v, dnsPolicy %q, dnsConfig %+v: want ClusterFirstWithHostNet and the ndots option", spec.HostNetwork, spec.DNSPolicy, spec.DNSConfig)
			}
		}},
		{"deploymentAnnotations and strategy", `
deploymentAnnotations: {example.com/owner: platform}
strategy: {rollingUpdate: {maxUnavailable: 0, maxSurge: 1}}
`, func(t *testing.T, _ []*unstructured.Unstructured, d *appsv1.Deployment) {
			if d.Annotations["example.com/owner"] != "platform" || d.Spec.Template.Annotations["example.com/owner"] != "" {
				t.Errorf("Deployment annotations %v, pod annotations %v: want it on the Deployment only", d.Annotations, d.Spec.Template.Annotations)
			}
			if ru := d.Spec.Strategy.RollingUpdate; d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || ru == nil || ru.MaxUnavailable.String() != "0" || ru.MaxSurge.String() != "1" {
				t.Errorf("strategy %+v: want RollingUpdate, maxUnavailable 0, maxSurge 1", d.Spec.Strategy)
			}
		}},
		{"podDisruptionBudget maxUnavailable", `
podDisruptionBudget: {enabled: true, minAvailable: null, maxUnavailable: 1}
`, func(t *testing.T, objs []*unstructured.Unstructured, _ *appsv1.Deployment) {
			p := pdb(t, objs)
			if p.Spec.MinAvailable != nil || p.Spec.MaxUnavailable == nil || p.Spec.MaxUnavailable.String() != "1" || !maps.Equal(p.Spec.Selector.MatchLabels, selector) {
				t.Errorf("PodDisruptionBudget %+v: want maxUnavailable 1 only, over the adapter's pods", p.Spec)
			}
		}},
		{"podDisruptionBudget minAvailable, a 0 maxUnavailable unset as there", `
podDisruptionBudget: {enabled: true, minAvailable: 2, maxUnavailable: 0}
`, func(t *testing.T, objs []*unstructured.Unstructured, _ *appsv1.Deployment) {
			p := pdb(t, objs)
			if p.Spec.MaxUnavailable != nil || p.Spec.MinAvailable == nil || p.Spec.MinAvailable.String() != "2" {
				t.Errorf("PodDisruptionBudget %+v: want minAvailable 2 only (that chart renders no 0)", p.Spec)
			}
		}},
		{"podDisruptionBudget: that chart's default enabled false (minAvailable 1 would block drains with its one replica)", "", func(t *testing.T, objs []*unstructured.Unstructured, _ *appsv1.Deployment) {
			if names := pdbNames(objs); names["tidal-adapter"] || !names["tidal-autoscaler"] {
				t.Errorf("PodDisruptionBudgets %v: want the autoscaler's only", names)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"-f", prometheusAdapterValues(t)}
			if tt.values != "" {
				args = append(args, "-f", valuesFile(t, tt.values))
			}
			out, err := run(helmEnv(t), tool(t, "helm"), append([]string{"template", releaseName, chartDir(t), "--namespace", namespace}, args...)...)
			if err != nil {
				t.Fatal(err)
			}
			// A label given twice (customLabels and an object's own) would
			// decode silently as the last one.
			reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(out)))
			for {
				doc, err := reader.Read()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if _, err := yaml.YAMLToJSONStrict(doc); err != nil {
					t.Errorf("rendered YAML: %v\n%s", err, doc)
				}
			}
			objs := decodeObjects(t, out)
			d, _ := adapterContainer(t, objs)
			if !maps.Equal(d.Spec.Selector.MatchLabels, selector) {
				t.Errorf("Deployment selector %v, want %v", d.Spec.Selector.MatchLabels, selector)
			}
			tt.check(t, objs, d)
		})
	}
}

// TestChartPrometheusAdapterValueMeanings varies the prometheus-adapter
// chart's values one at a time on top of its defaults.
func TestChartPrometheusAdapterValueMeanings(t *testing.T) {
	base := prometheusAdapterValues(t)
	extra := valuesFile
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
