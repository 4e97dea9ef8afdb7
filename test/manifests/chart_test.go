package manifests

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tidal-autoscaler/tidal/autoscaler/source"
	"github.com/tidal-autoscaler/tidal/rules/config"
)

func decodeB64(t *testing.T, what, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return b
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestChartCRDsMatchGenerated: Helm installs CRDs only from the chart's
// crds/ folder, so it holds a copy of manifests/crd; `make generate`
// rewrites the original. Copy again after regenerating:
// cp manifests/crd/*.yaml manifests/charts/tidal/crds/
func TestChartCRDsMatchGenerated(t *testing.T) {
	root := repoRoot(t)
	list := func(dir string) []string {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names
	}
	gen, chart := filepath.Join(root, "manifests", "crd"), filepath.Join(chartDir(t), "crds")
	if g, c := list(gen), list(chart); !slices.Equal(g, c) {
		t.Fatalf("manifests/crd has %v, the chart's crds/ %v: cp manifests/crd/*.yaml manifests/charts/tidal/crds/", g, c)
	}
	for _, name := range list(gen) {
		if !bytes.Equal(readFile(t, filepath.Join(gen, name)), readFile(t, filepath.Join(chart, name))) {
			t.Errorf("crds/%s differs from manifests/crd/%s: cp manifests/crd/*.yaml manifests/charts/tidal/crds/", name, name)
		}
	}
	// kustomization.yaml lists each generated CRD file (manifests/crd has
	// no kustomization of its own: it is generated).
	kust := string(readFile(t, filepath.Join(root, "manifests", "kustomization.yaml")))
	for _, name := range list(gen) {
		if !strings.Contains(kust, "- crd/"+name+"\n") {
			t.Errorf("manifests/kustomization.yaml does not list crd/%s", name)
		}
	}
}

// TestDefaultRulesPassCheck runs `tidal rules check`'s loading on the one
// default rules file the chart and the kustomization share.
func TestDefaultRulesPassCheck(t *testing.T) {
	path := filepath.Join(chartDir(t), "files", "default-rules.yaml")
	cfg := loadRules(t, path, readFile(t, path))
	if len(cfg.Rules) == 0 || len(cfg.ExternalRules) == 0 || cfg.ResourceRules == nil {
		t.Fatalf("default rules: %d rules, %d external rules, resource rules %v: want all three kinds",
			len(cfg.Rules), len(cfg.ExternalRules), cfg.ResourceRules != nil)
	}
	var series []string
	for _, r := range cfg.Rules {
		series = append(series, r.SeriesQuery)
	}
	for _, want := range []string{"http_requests_total", "queue_(length|depth)"} {
		if !strings.Contains(strings.Join(series, " "), want) {
			t.Errorf("no default rule for %s: %q", want, series)
		}
	}
}

func TestHelmLint(t *testing.T) {
	helm := tool(t, "helm")
	runs := [][]string{{"lint", "--strict", chartDir(t)}}
	for _, f := range ciFiles(t) {
		runs = append(runs, []string{"lint", "--strict", chartDir(t), "-f", f})
	}
	for _, args := range runs {
		out, err := run(helmEnv(t), helm, args...)
		if err != nil {
			t.Errorf("%v\n%s", err, out)
		} else if !strings.Contains(out, "0 chart(s) failed") || strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERROR]") {
			t.Errorf("helm %s:\n%s", strings.Join(args, " "), out)
		}
	}
}

func ciFiles(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir(t), "ci", "*-values.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no ci/*-values.yaml (%v)", err)
	}
	return files
}

// ciExpectations says what each ci/*-values.yaml must render.
func ciExpectations(t *testing.T) map[string]expectation {
	defaultRules := readFile(t, filepath.Join(chartDir(t), "files", "default-rules.yaml"))
	existingCA := []byte(strings.TrimPrefix(strings.SplitN(string(readFile(t, filepath.Join(chartDir(t), "ci", "existing-secret-values.yaml"))), "caBundle: |\n", 2)[1], ""))
	existingCA = bytes.ReplaceAll(existingCA, []byte("      "), nil)
	base := expectation{
		tlsMode: "selfSigned", tlsSecret: "tidal-adapter-tls", apiServices: defaultAPIs,
		autoscaler: "crd", adapterRepl: 2, autoscalerRepl: 2,
		adapterArgs:   []string{"--prometheus-url=http://prometheus-k8s.monitoring.svc:9090", "--prometheus-verb=GET"},
		rulesVerbatim: defaultRules,
	}
	with := func(f func(*expectation)) expectation {
		e := base
		f(&e)
		return e
	}
	return map[string]expectation{
		"default-values.yaml": base,
		"native-values.yaml":  with(func(e *expectation) { e.autoscaler, e.autoscalerRepl = "native", 3 }),
		"cert-manager-values.yaml": with(func(e *expectation) {
			e.tlsMode = "certManager"
			e.adapterArgs = []string{"--prometheus-url=https://prometheus.monitoring.svc:9091"}
		}),
		"existing-secret-values.yaml": with(func(e *expectation) {
			e.tlsMode, e.tlsSecret, e.caBundle = "existingSecret", "my-adapter-tls", existingCA
		}),
		"all-apis-values.yaml": with(func(e *expectation) {
			e.apiServices = append(slices.Clone(defaultAPIs), resourceMetricsAPIs...)
			e.adapterRepl = 3
			e.adapterArgs = []string{
				"--prometheus-url=https://prometheus.monitoring.svc:9091/prefix",
				"--prometheus-verb=POST",
				"--prometheus-token-file=/var/run/tidal/prometheus/token/token",
				"--prometheus-ca-file=/var/run/tidal/prometheus/ca/ca.crt",
				"--prometheus-client-tls-cert-file=/var/run/tidal/prometheus/client-tls/tls.crt",
				"--prometheus-client-tls-key-file=/var/run/tidal/prometheus/client-tls/tls.key",
				"--prometheus-header=X-Scope-OrgID=tenant-a",
			}
		}),
		"custom-rules-values.yaml": with(func(e *expectation) {
			e.rulesVerbatim = nil
			e.extraReadRules = []rbacv1.PolicyRule{{APIGroups: []string{"example.com"}, Resources: []string{"widgets"}, Verbs: getListWatch}}
			e.adapterArgs = append(e.adapterArgs, "--prometheus-http-config=/etc/tidal/prometheus/http-config.yaml", "--metrics-max-age=5m")
			e.rulesCheck = func(t *testing.T, cfg *config.Config) {
				def := loadRules(t, "default", defaultRules)
				if len(cfg.Rules) != len(def.Rules)+1 || len(cfg.ExternalRules) != len(def.ExternalRules)+1 || cfg.ResourceRules == nil {
					t.Fatalf("merged rules: %d rules, %d external: want the defaults plus one of each", len(cfg.Rules), len(cfg.ExternalRules))
				}
				if last := cfg.Rules[len(cfg.Rules)-1]; last.SeriesQuery != `{__name__="jobs_pending",namespace!="",deployment!=""}` {
					t.Errorf("last rule %q, want the custom one", last.SeriesQuery)
				}
				if last := cfg.ExternalRules[len(cfg.ExternalRules)-1]; !strings.Contains(last.SeriesQuery, "kafka_consumergroup_lag") {
					t.Errorf("last external rule %q, want the custom one", last.SeriesQuery)
				}
			}
		}),
	}
}

// TestChartRenders renders the chart for each ci/*-values.yaml and checks
// the objects.
func TestChartRenders(t *testing.T) {
	exps := ciExpectations(t)
	files := ciFiles(t)
	if len(files) != len(exps) {
		t.Errorf("%d ci files, %d expectations: add the new file's expectation", len(files), len(exps))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			exp, ok := exps[filepath.Base(f)]
			if !ok {
				t.Fatal("no expectation for this file")
			}
			objs := helmTemplate(t, "-f", f)
			checkObjects(t, objs, exp)
			crd := find(t, objs, "CustomResourceDefinition", "", "horizontalautoscalers.autoscaling.tidal.dev")
			if crd == nil {
				t.Fatal("CRD not rendered from crds/")
			}
		})
	}
}

// TestChartOptions covers values the ci files do not: the autoscaler off,
// rules from an existing ConfigMap, a certManager issuer of your own.
func TestChartOptions(t *testing.T) {
	t.Run("autoscaler off", func(t *testing.T) {
		objs := helmTemplate(t, "--set", "autoscaler.enabled=false")
		checkAutoscaler(t, objs, expectation{})
	})
	t.Run("autoscaler.watchNamespace", func(t *testing.T) {
		objs := helmTemplate(t, "--set", "autoscaler.watchNamespace=team-a")
		d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", namespace, "tidal-autoscaler"))
		if args := d.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--namespace=team-a") {
			t.Errorf("autoscaler args %q lack --namespace=team-a", args)
		}
		// Its workload access is a Role in team-a, nothing cluster-wide.
		role := typed[rbacv1.Role](t, find(t, objs, "Role", "team-a", "tidal-autoscaler"))
		if !apiequality.Semantic.DeepEqual(role.Rules, autoscalerRules("crd")) {
			t.Errorf("Role team-a/tidal-autoscaler rules %+v, want the autoscaler's", role.Rules)
		}
		b := typed[rbacv1.RoleBinding](t, find(t, objs, "RoleBinding", "team-a", "tidal-autoscaler"))
		if b.RoleRef.Kind != "Role" || b.RoleRef.Name != "tidal-autoscaler" || len(b.Subjects) != 1 || b.Subjects[0].Name != "tidal-autoscaler" || b.Subjects[0].Namespace != namespace {
			t.Errorf("RoleBinding team-a/tidal-autoscaler %+v %+v", b.RoleRef, b.Subjects)
		}
		for _, o := range objs {
			if (o.GetKind() == "ClusterRole" || o.GetKind() == "ClusterRoleBinding") && o.GetName() == "tidal-autoscaler" {
				t.Errorf("%s rendered with autoscaler.watchNamespace", objKey(o))
			}
		}
		// The default: every namespace.
		d = typed[appsv1.Deployment](t, find(t, helmTemplate(t), "Deployment", namespace, "tidal-autoscaler"))
		for _, a := range d.Spec.Template.Spec.Containers[0].Args {
			if strings.HasPrefix(a, "--namespace") {
				t.Errorf("default autoscaler args have %q", a)
			}
		}
	})
	t.Run("autoscaler.sharding", func(t *testing.T) {
		objs := helmTemplate(t, "--set", "autoscaler.sharding=true", "--set", "autoscaler.replicas=3")
		d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", namespace, "tidal-autoscaler"))
		if args := d.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--sharding") || *d.Spec.Replicas != 3 {
			t.Errorf("autoscaler args %q, replicas %d; want --sharding and 3", args, *d.Spec.Replicas)
		}
		// Each replica's own Lease has a name not known in advance: a Role
		// lets it get, list, update and delete Leases there.
		role := typed[rbacv1.Role](t, find(t, objs, "Role", namespace, "tidal-autoscaler-sharding"))
		want := []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "update", "delete"}}}
		if !apiequality.Semantic.DeepEqual(role.Rules, want) {
			t.Errorf("sharding Role rules %+v, want %+v", role.Rules, want)
		}
		find(t, objs, "RoleBinding", namespace, "tidal-autoscaler-sharding")
		// Off by default, and then no such Role.
		for _, o := range ofKind(helmTemplate(t), "Role") {
			if o.GetName() == "tidal-autoscaler-sharding" {
				t.Error("the sharding Role is rendered without autoscaler.sharding")
			}
		}
	})
	t.Run("adapter.watchNamespace", func(t *testing.T) {
		objs := helmTemplate(t, "--set", "adapter.watchNamespace=team-a")
		d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", namespace, "tidal-adapter"))
		if args := d.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--namespace=team-a") {
			t.Errorf("adapter args %q lack --namespace=team-a", args)
		}
		// The object reader role is granted in team-a only.
		b := typed[rbacv1.RoleBinding](t, find(t, objs, "RoleBinding", "team-a", "tidal-adapter-resource-reader"))
		if b.RoleRef.Kind != "ClusterRole" || b.RoleRef.Name != "tidal-adapter-resource-reader" || len(b.Subjects) != 1 || b.Subjects[0].Name != "tidal-adapter" || b.Subjects[0].Namespace != namespace {
			t.Errorf("RoleBinding team-a/tidal-adapter-resource-reader %+v %+v", b.RoleRef, b.Subjects)
		}
		for _, o := range ofKind(objs, "ClusterRoleBinding") {
			if o.GetName() == "tidal-adapter-resource-reader" {
				t.Errorf("%s rendered with adapter.watchNamespace", objKey(o))
			}
		}
		d = typed[appsv1.Deployment](t, find(t, helmTemplate(t), "Deployment", namespace, "tidal-adapter"))
		for _, a := range d.Spec.Template.Spec.Containers[0].Args {
			if strings.HasPrefix(a, "--namespace") {
				t.Errorf("default adapter args have %q", a)
			}
		}
	})
	t.Run("rules.existingConfigMap", func(t *testing.T) {
		objs := helmTemplate(t, "--set", "rules.existingConfigMap=my-rules")
		for _, o := range ofKind(objs, "ConfigMap") {
			if o.GetName() == "tidal-adapter-rules" {
				t.Error("rules ConfigMap rendered although rules.existingConfigMap is set")
			}
		}
		if !strings.Contains(strings.Join(keysOfVolumes(t, objs), " "), "configMap:my-rules") {
			t.Errorf("adapter does not mount my-rules: %v", keysOfVolumes(t, objs))
		}
	})
	t.Run("certManager issuerRef", func(t *testing.T) {
		objs := helmTemplate(t, "--set", "tls.mode=certManager", "--set", "tls.certManager.issuerRef.name=corp", "--set", "tls.certManager.issuerRef.kind=ClusterIssuer")
		if n := len(ofKind(objs, "Issuer")); n != 0 {
			t.Errorf("%d Issuers rendered with an issuerRef", n)
		}
		cert := find(t, objs, "Certificate", namespace, "tidal-adapter-tls")
		if ref := cert.Object["spec"].(map[string]any)["issuerRef"]; ref.(map[string]any)["name"] != "corp" || ref.(map[string]any)["kind"] != "ClusterIssuer" {
			t.Errorf("issuerRef %v", ref)
		}
	})
	t.Run("autoscaler.hpa", func(t *testing.T) {
		hpaFlags := func(objs []*unstructured.Unstructured) []string {
			d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", namespace, "tidal-autoscaler"))
			var out []string
			for _, a := range d.Spec.Template.Spec.Containers[0].Args {
				if strings.Contains(a, "horizontal-pod-autoscaler") {
					out = append(out, a)
				}
			}
			slices.Sort(out)
			return out
		}
		if got := hpaFlags(helmTemplate(t)); len(got) != 0 {
			t.Errorf("default values render %q; want the flags' own defaults", got)
		}
		// Zero is a value, as in kube-controller-manager: rendered, not
		// dropped as empty.
		zero := hpaFlags(helmTemplate(t, "--set", "autoscaler.hpa.tolerance=0", "--set", "autoscaler.hpa.downscaleStabilization=0s",
			"--set", "autoscaler.hpa.cpuInitializationPeriod=0", "--set", "autoscaler.hpa.initialReadinessDelay=0s",
			"--set", "autoscaler.hpa.syncPeriod=5s", "--set", "autoscaler.hpa.concurrentSyncs=1"))
		want := []string{"--concurrent-horizontal-pod-autoscaler-syncs=1", "--horizontal-pod-autoscaler-cpu-initialization-period=0",
			"--horizontal-pod-autoscaler-downscale-stabilization=0s", "--horizontal-pod-autoscaler-initial-readiness-delay=0s",
			"--horizontal-pod-autoscaler-sync-period=5s", "--horizontal-pod-autoscaler-tolerance=0"}
		if !slices.Equal(zero, want) {
			t.Errorf("zero values render %q, want %q", zero, want)
		}
		if got := hpaFlags(helmTemplate(t, "--set", "autoscaler.hpa.tolerance=0.25")); !slices.Equal(got, []string{"--horizontal-pod-autoscaler-tolerance=0.25"}) {
			t.Errorf("tolerance 0.25 renders %q", got)
		}
	})
	t.Run("delegate.externalMetrics", func(t *testing.T) {
		const url = "https://keda-operator-metrics-apiserver.keda.svc:443"
		const ca = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"
		const customURL = "https://prometheus-adapter.monitoring.svc:443"
		objs := helmTemplate(t, "--set", "delegate.externalMetrics="+url, "--set", "delegate.customMetrics="+customURL, "--set", "delegate.caBundle="+ca)
		d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", namespace, "tidal-adapter"))
		args := d.Spec.Template.Spec.Containers[0].Args
		for _, want := range []string{"--delegate-external-metrics=" + url, "--delegate-custom-metrics=" + customURL, "--delegate-ca-file=/etc/tidal/delegate/ca.crt"} {
			if !slices.Contains(args, want) {
				t.Errorf("adapter args lack %s: %v", want, args)
			}
		}
		cm := typed[corev1.ConfigMap](t, find(t, objs, "ConfigMap", namespace, "tidal-adapter-delegate"))
		if cm.Data["external.url"] != url || strings.TrimSpace(cm.Data["external.ca.crt"]) != ca || strings.TrimSpace(cm.Data["ca.crt"]) != ca {
			t.Errorf("delegate ConfigMap %v", cm.Data)
		}
		if !strings.Contains(strings.Join(keysOfVolumes(t, objs), " "), "configMap:tidal-adapter-delegate") {
			t.Errorf("adapter does not mount the delegate's CA: %v", keysOfVolumes(t, objs))
		}
		role := typed[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", "", "tidal-adapter-delegate-reader"))
		if len(role.Rules) != 2 || !slices.Equal(role.Rules[0].APIGroups, []string{"external.metrics.k8s.io"}) || !slices.Equal(role.Rules[1].APIGroups, []string{"custom.metrics.k8s.io"}) ||
			!slices.Equal(role.Rules[0].Verbs, []string{"get"}) || !slices.Equal(role.Rules[1].Verbs, []string{"get"}) {
			t.Errorf("delegate reader rules %+v, want get on external.metrics.k8s.io and custom.metrics.k8s.io only", role.Rules)
		}
		binding := typed[rbacv1.ClusterRoleBinding](t, find(t, objs, "ClusterRoleBinding", "", "tidal-adapter-delegate-reader"))
		if len(binding.Subjects) != 1 || binding.Subjects[0].Name != "tidal-adapter" || binding.Subjects[0].Namespace != namespace {
			t.Errorf("delegate reader bound to %+v, want the adapter's service account", binding.Subjects)
		}
		// Off by default: nothing of it.
		for _, o := range helmTemplate(t) {
			if strings.Contains(o.GetName(), "delegate") {
				t.Errorf("default values render %s %s", o.GetKind(), o.GetName())
			}
		}
	})
	t.Run("rules.default off", func(t *testing.T) {
		values := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(values, []byte(`rules:
  default: false
  custom:
  - seriesQuery: '{__name__="x",namespace!="",pod!=""}'
    resources:
      template: <<.Resource>>
    metricsQuery: sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)
`), 0o644); err != nil {
			t.Fatal(err)
		}
		objs := helmTemplate(t, "-f", values)
		checkRules(t, objs, expectation{rulesCheck: func(t *testing.T, cfg *config.Config) {
			if len(cfg.Rules) != 1 || len(cfg.ExternalRules) != 0 || cfg.ResourceRules != nil {
				t.Errorf("rules %d external %d resource %v: want only the custom rule", len(cfg.Rules), len(cfg.ExternalRules), cfg.ResourceRules != nil)
			}
		}})
	})
}

func keysOfVolumes(t *testing.T, objs []*unstructured.Unstructured) []string {
	d := find(t, objs, "Deployment", namespace, "tidal-adapter")
	vols, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "volumes")
	var out []string
	for _, v := range vols {
		m := v.(map[string]any)
		if cm, ok := m["configMap"].(map[string]any); ok {
			out = append(out, "configMap:"+cm["name"].(string))
		}
	}
	return out
}

// TestChartSharesAutoscalerNames: the chart offers exactly the modes the
// binary has, and names the autoscaler (Deployment, Lease) as the binary
// names itself by default, for the default release name.
func TestChartSharesAutoscalerNames(t *testing.T) {
	var schema struct {
		Properties struct {
			Autoscaler struct {
				Properties struct {
					Mode struct {
						Enum []string `json:"enum"`
					} `json:"mode"`
				} `json:"properties"`
			} `json:"autoscaler"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(readFile(t, filepath.Join(chartDir(t), "values.schema.json")), &schema); err != nil {
		t.Fatal(err)
	}
	var modes []string
	for _, m := range source.Modes {
		modes = append(modes, string(m))
	}
	if got := schema.Properties.Autoscaler.Properties.Mode.Enum; !slices.Equal(got, modes) {
		t.Errorf("chart's autoscaler.mode offers %q, the binary has %q", got, modes)
	}
	// find fails the test when the chart names it otherwise.
	find(t, helmTemplate(t), "Deployment", namespace, source.ComponentName)
}

// TestChartSchemaRejects: bad values fail `helm template` with a message
// that names the value and what is wrong.
func TestChartSchemaRejects(t *testing.T) {
	helm := tool(t, "helm")
	tests := []struct {
		set  []string
		want string
	}{
		{[]string{"prometheus.url=ftp://prometheus:9090"}, "at '/prometheus/url': 'ftp://prometheus:9090' does not match pattern"},
		{[]string{"prometheus.url="}, "at '/prometheus/url': '' does not match pattern"},
		{[]string{"prometheus.url=null"}, "at '/prometheus': missing property 'url'"},
		{[]string{"prometheus.url=prometheus.monitoring.svc:9090"}, "at '/prometheus/url'"},
		{[]string{"prometheus.verb=PUT"}, "at '/prometheus/verb': value must be one of 'GET', 'POST'"},
		{[]string{"prometheus.URL=http://x"}, "at '/prometheus': additional properties 'URL' not allowed"},
		{[]string{"tls.mode=insecure"}, "at '/tls/mode': value must be one of 'selfSigned', 'certManager', 'existingSecret'"},
		{[]string{"tls.mode=existingSecret"}, "at '/tls/existingSecret/name': minLength: got 0, want 1"},
		{[]string{"tls.mode=existingSecret", "tls.existingSecret.name=x", "tls.existingSecret.caBundle=abc"}, "at '/tls/existingSecret/caBundle': 'abc' does not match pattern '-----BEGIN CERTIFICATE-----'"},
		{[]string{"adapter.replicas=0"}, "at '/adapter/replicas': minimum: got 0, want 1"},
		{[]string{"autoscaler.replicas=-1"}, "at '/autoscaler/replicas': minimum: got -1, want 1"},
		{[]string{"autoscaler.mode=hpa"}, "at '/autoscaler/mode': value must be one of 'crd', 'native'"},
		{[]string{"autoscaler.hpa.tolerance=-0.1"}, "at '/autoscaler/hpa/tolerance': '-0.1' does not match pattern"},
		{[]string{"autoscaler.hpa.syncPeriod=15"}, "at '/autoscaler/hpa/syncPeriod': maximum: got 15, want 0"},
		{[]string{"autoscaler.hpa.concurrentSyncs=0"}, "at '/autoscaler/hpa/concurrentSyncs': minimum: got 0, want 1"},
		{[]string{"autoscaler.hpa.downscaleStabilization=5 minutes"}, "at '/autoscaler/hpa/downscaleStabilization': '5 minutes' does not match pattern"},
		{[]string{"rules.custom[0].seriesQuery=up"}, "at '/rules/custom/0': missing property 'metricsQuery'"},
		{[]string{"adapter.extraReadRules[0].apiGroups[0]=", "adapter.extraReadRules[0].resources[0]=secrets", "adapter.extraReadRules[0].verbs[0]=delete"}, "at '/adapter/extraReadRules/0/verbs/0': value must be one of 'get', 'list', 'watch'"},
		{[]string{"apiServices.custom=false", "apiServices.external=false"}, "apiServices: enable at least one of custom, external and resource"},
		{[]string{"prometheus.basicAuth.existingSecret=a", "prometheus.bearerToken.existingSecret=b"}, "prometheus: set either basicAuth.existingSecret or bearerToken.existingSecret, not both"},
		{[]string{"prometheus.ca.existingSecret=a", "prometheus.ca.existingConfigMap=b"}, "prometheus.ca: set either existingSecret or existingConfigMap, not both"},
		{[]string{"rules.existingConfigMap=mine", "rules.backends[0].name=b", "rules.backends[0].url=http://b:9090"}, "rules.backends have no effect with rules.existing or rules.existingConfigMap"},
		{[]string{"rules.backends[0].name=b", "rules.backends[0].url=http://b:9090", "rules.backends[0].tokenFile=token"}, "at '/rules/backends/0/tokenFile': 'token' does not match pattern '^/'"},
		{[]string{"rules.backends[0].name=b", "rules.backends[0].url=b:9090"}, "at '/rules/backends/0/url': 'b:9090' does not match pattern"},
		{[]string{"rules.backends[0].name=b", "rules.backends[0].url=http://b:9090", "rules.backends[0].inheritauth=true"}, "at '/rules/backends/0': additional properties 'inheritauth' not allowed"},
		{[]string{"delegate.externalMetrics=http://keda.svc:80"}, "at '/delegate/externalMetrics': 'http://keda.svc:80' does not match pattern"},
		{[]string{"delegate.externalMetrics=auto"}, "delegate.externalMetrics=auto found no other server owning the APIService v1beta1.external.metrics.k8s.io"},
		{[]string{"delegate.customMetrics=auto"}, "delegate.customMetrics=auto found no other server owning the APIService v1beta1.custom.metrics.k8s.io"},
		{[]string{"image.digest=latest"}, "at '/image/digest': 'latest' does not match pattern"},
		{[]string{"adapter.hostNetwork.securePort=443"}, "at '/adapter/hostNetwork/securePort': minimum: got 443, want 1,024"},
		{[]string{"autoscaler.topologySpreadConstraints[0].maxSkew=1", "autoscaler.topologySpreadConstraints[0].topologyKey=zone", "autoscaler.topologySpreadConstraints[0].whenUnsatisfiable=Never"}, "at '/autoscaler/topologySpreadConstraints/0/whenUnsatisfiable': value must be one of 'DoNotSchedule', 'ScheduleAnyway'"},
		{[]string{"adapter.extraVolumeMounts[0].name=x", "adapter.extraVolumeMounts[0].mountPath=relative"}, "at '/adapter/extraVolumeMounts/0/mountPath': 'relative' does not match pattern"},
		{[]string{"autoscaler.securityContext.seccompProfile.type=None"}, "at '/autoscaler/securityContext/seccompProfile/type': value must be one of 'RuntimeDefault', 'Localhost', 'Unconfined'"},
		{[]string{"autoscaler.podDisruptionBudget.maxUnavailable=half"}, "/autoscaler/podDisruptionBudget/maxUnavailable"},
		{[]string{"autoscaler.extraContainers[0].name=sidecar"}, "at '/autoscaler/extraContainers/0': missing property 'image'"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.set, ","), func(t *testing.T) {
			args := []string{"template", releaseName, chartDir(t), "--namespace", namespace}
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
}
