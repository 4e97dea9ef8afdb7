package manifests

import (
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tidal-autoscaler/tidal/test/harness"
)

func manifestsDir(t testing.TB) string { return filepath.Join(repoRoot(t), "manifests") }

// overlay writes a kustomization in a temporary folder that uses manifests/
// with the components named (folders under manifests/components, or
// absolute paths of copies), as a user's overlay would, and renders it.
func overlay(t *testing.T, components ...string) []*unstructured.Unstructured {
	t.Helper()
	dir := t.TempDir()
	rel := func(path string) string {
		r, err := filepath.Rel(dir, path)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- " + rel(manifestsDir(t)) + "\ncomponents:\n"
	for _, c := range components {
		if !filepath.IsAbs(c) {
			c = filepath.Join(manifestsDir(t), "components", c)
		}
		k += "- " + rel(c) + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return kustomize(t, dir)
}

func kustomizeExpectation(t *testing.T) expectation {
	return expectation{
		tlsMode: "none", tlsSecret: "tidal-adapter-tls", apiServices: defaultAPIs,
		autoscaler: "crd", adapterRepl: 2, autoscalerRepl: 2,
		adapterArgs:   []string{"--prometheus-url=http://prometheus-operated.monitoring.svc:9090", "--cert-dir=/tmp/certs"},
		rulesVerbatim: readFile(t, filepath.Join(chartDir(t), "files", "default-rules.yaml")),
	}
}

// TestKustomizeBase renders `kubectl kustomize manifests/` and checks the
// objects as the chart's.
func TestKustomizeBase(t *testing.T) {
	objs := kustomize(t, manifestsDir(t))
	checkObjects(t, objs, kustomizeExpectation(t))
	find(t, objs, "Namespace", "", namespace)
	find(t, objs, "CustomResourceDefinition", "", "horizontalautoscalers.autoscaling.tidal.dev")
	for _, o := range ofKind(objs, "Deployment") {
		img, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		if got := img[0].(map[string]any)["image"]; got != "tidal:latest" {
			t.Errorf("%s image %v, want the tidal:latest placeholder (kustomize images)", objKey(o), got)
		}
	}
}

// TestKustomizeComponents renders manifests/ with each component.
func TestKustomizeComponents(t *testing.T) {
	t.Run("cert-manager", func(t *testing.T) {
		exp := kustomizeExpectation(t)
		exp.tlsMode = "certManager"
		objs := overlay(t, "cert-manager")
		checkObjects(t, objs, exp)
		cert := find(t, objs, "Certificate", namespace, "tidal-adapter-tls")
		dns, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
		secret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
		if !slices.Contains(dns, "tidal-adapter.tidal-system.svc") || secret != "tidal-adapter-tls" {
			t.Errorf("Certificate dnsNames %v secretName %q", dns, secret)
		}
	})
	t.Run("native-mode", func(t *testing.T) {
		exp := kustomizeExpectation(t)
		exp.autoscaler = "native"
		checkObjects(t, overlay(t, "native-mode"), exp)
	})
	t.Run("sharding", func(t *testing.T) {
		objs := overlay(t, "sharding")
		d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", namespace, "tidal-autoscaler"))
		if args := d.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--sharding") || *d.Spec.Replicas != 3 {
			t.Errorf("autoscaler args %q, replicas %d; want --sharding and 3", args, *d.Spec.Replicas)
		}
		find(t, objs, "Role", namespace, "tidal-autoscaler-sharding")
		find(t, objs, "RoleBinding", namespace, "tidal-autoscaler-sharding")
	})
	// Native mode sharded: both components patch the autoscaler's
	// arguments, and the replicas need both Roles (BenchmarkReconcileFleet's
	// tidal-native-sharded phase runs it so).
	t.Run("native-mode and sharding", func(t *testing.T) {
		objs := overlay(t, "native-mode", "sharding")
		d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", namespace, "tidal-autoscaler"))
		args := d.Spec.Template.Spec.Containers[0].Args
		if !slices.Contains(args, "--sharding") || !slices.Contains(args, "--mode=native") || *d.Spec.Replicas != 3 {
			t.Errorf("autoscaler args %q, replicas %d; want --mode=native, --sharding and 3", args, *d.Spec.Replicas)
		}
		find(t, objs, "Role", namespace, "tidal-autoscaler-sharding")
		role := typed[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", "", "tidal-autoscaler"))
		writesHPAStatus := false
		for _, r := range role.Rules {
			writesHPAStatus = writesHPAStatus || (slices.Contains(r.Resources, "horizontalpodautoscalers/status") && slices.Contains(r.Verbs, "update"))
		}
		if !writesHPAStatus {
			t.Errorf("the autoscaler's ClusterRole cannot update horizontalpodautoscalers/status: %+v", role.Rules)
		}
	})
	t.Run("resource-metrics and existing-secret", func(t *testing.T) {
		ca, err := harness.NewCA("tidal-test-ca")
		if err != nil {
			t.Fatal(err)
		}
		comp := existingSecretComponent(t, ca.CertPEM)
		exp := kustomizeExpectation(t)
		exp.tlsMode, exp.caBundle = "existingSecret", ca.CertPEM
		exp.apiServices = append(slices.Clone(defaultAPIs), resourceMetricsAPIs...)
		checkObjects(t, overlay(t, "resource-metrics", comp), exp)
	})
}

// TestKustomizeMatchesChart: the plain manifests with the cert-manager
// component and the chart in certManager mode render the same objects
// (kind, namespace, name), but for the Namespace (Helm's is the release's).
func TestKustomizeMatchesChart(t *testing.T) {
	for _, tt := range []struct {
		components []string
		values     string
		set        []string
	}{
		{[]string{"cert-manager"}, "cert-manager-values.yaml", nil},
		{[]string{"native-mode", "cert-manager"}, "cert-manager-values.yaml", nil},
		{[]string{"sharding", "cert-manager"}, "cert-manager-values.yaml", []string{"autoscaler.sharding=true"}},
		{[]string{"native-mode", "sharding", "cert-manager"}, "cert-manager-values.yaml", []string{"autoscaler.sharding=true"}},
		{[]string{"resource-metrics", "cert-manager"}, "cert-manager-values.yaml", nil},
	} {
		t.Run(strings.Join(tt.components, "+"), func(t *testing.T) {
			var kust []string
			for _, k := range keys(overlay(t, tt.components...)) {
				if k != "Namespace /"+namespace {
					kust = append(kust, k)
				}
			}
			args := []string{"-f", filepath.Join(chartDir(t), "ci", tt.values)}
			for _, v := range tt.set {
				args = append(args, "--set", v)
			}
			if slices.Contains(tt.components, "resource-metrics") {
				args = append(args, "--set", "apiServices.resource=true")
			}
			var chart []string
			chart = append(chart, keys(helmTemplate(t, args...))...)
			if !slices.Equal(kust, chart) {
				t.Errorf("kustomize and helm differ:\nkustomize %q\nhelm      %q", kust, chart)
			}
		})
	}
}

// existingSecretComponent returns a copy of components/existing-secret with
// ca.crt in it: the component reads the CA from its own folder, and tests
// do not write into the repository.
func existingSecretComponent(t *testing.T, caPEM []byte) string {
	t.Helper()
	comp := filepath.Join(t.TempDir(), "existing-secret")
	if err := os.MkdirAll(comp, 0o755); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(manifestsDir(t), "components", "existing-secret", "kustomization.yaml")
	if err := os.WriteFile(filepath.Join(comp, "kustomization.yaml"), readFile(t, src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(comp, "ca.crt"), caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return comp
}
