package manifests

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/rules/config"
	"github.com/tidal-autoscaler/tidal/rules/naming"
)

// The RBAC rules Tidal needs, exactly: more is not least privilege, less
// breaks the adapter or the autoscaler.
var (
	getListWatch = []string{"get", "list", "watch"}

	adapterReadRules = []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces", "nodes", "pods", "services"}, Verbs: getListWatch},
		{APIGroups: []string{"apps"}, Resources: []string{"daemonsets", "deployments", "replicasets", "statefulsets"}, Verbs: getListWatch},
		{APIGroups: []string{"batch"}, Resources: []string{"cronjobs", "jobs"}, Verbs: getListWatch},
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses"}, Verbs: getListWatch},
	}
	adapterEventRules = []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}
	metricsReaderRules = []rbacv1.PolicyRule{
		{APIGroups: []string{"custom.metrics.k8s.io"}, Resources: []string{"*"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"external.metrics.k8s.io"}, Resources: []string{"*"}, Verbs: []string{"get", "list"}},
	}
	aggregatedMetricsReaderRules = []rbacv1.PolicyRule{
		{APIGroups: []string{"metrics.k8s.io"}, Resources: []string{"pods", "nodes"}, Verbs: getListWatch},
	}
	leaderElectionRules = []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"tidal-autoscaler"}, Verbs: []string{"get", "update"}},
	}
)

func autoscalerRules(mode string) []rbacv1.PolicyRule {
	group, resource := "autoscaling.tidal.dev", "horizontalautoscalers"
	if mode == "native" {
		group, resource = "autoscaling", "horizontalpodautoscalers"
	}
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{group}, Resources: []string{resource}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{group}, Resources: []string{resource + "/status"}, Verbs: []string{"update"}},
		{APIGroups: []string{"*"}, Resources: []string{"*/scale"}, Verbs: []string{"get", "update"}},
		// Scales of the built-in kinds come from informers.
		{APIGroups: []string{"apps"}, Resources: []string{"deployments", "replicasets", "statefulsets"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"replicationcontrollers"}, Verbs: []string{"list", "watch"}},
		// patch: pod deletion costs (spec.scaleDownPodSelection).
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		{APIGroups: []string{"metrics.k8s.io"}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"custom.metrics.k8s.io"}, Resources: []string{"*"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"external.metrics.k8s.io"}, Resources: []string{"*"}, Verbs: []string{"get", "list"}},
	}
	if mode != "native" {
		// The other-writer guard's read (native mode reads HPAs anyway).
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{"autoscaling"}, Resources: []string{"horizontalpodautoscalers"}, Verbs: []string{"list", "watch"}})
	}
	return rules
}

// expectation is what one rendering must hold.
type expectation struct {
	tlsMode        string // selfSigned, certManager, existingSecret; none: no caBundle yet (plain manifests)
	tlsSecret      string
	caBundle       []byte // PEM, for existingSecret
	apiServices    []string
	autoscaler     string // crd, native, "" for off
	adapterRepl    int32
	autoscalerRepl int32
	extraReadRules []rbacv1.PolicyRule
	adapterArgs    []string // must be among the adapter's args
	rulesCheck     func(t *testing.T, cfg *config.Config)
	rulesVerbatim  []byte // the ConfigMap must hold exactly this
}

var (
	customMetricsAPIs = []string{"v1beta1.custom.metrics.k8s.io", "v1beta2.custom.metrics.k8s.io"}
	defaultAPIs       = append(slices.Clone(customMetricsAPIs), "v1beta1.external.metrics.k8s.io")
	// resourceMetricsAPIs are metrics.k8s.io's: v1beta1 (the HPA's) and v1
	// (kubectl top's first choice).
	resourceMetricsAPIs = []string{"v1beta1.metrics.k8s.io", "v1.metrics.k8s.io"}
)

// checkObjects asserts what every rendering of Tidal (chart or kustomize)
// must hold, and what exp asks for.
func checkObjects(t *testing.T, objs []*unstructured.Unstructured, exp expectation) {
	t.Helper()
	t.Run("APIServices", func(t *testing.T) { checkAPIServices(t, objs, exp) })
	t.Run("adapter Deployment", func(t *testing.T) { checkAdapter(t, objs, exp) })
	t.Run("autoscaler Deployment", func(t *testing.T) { checkAutoscaler(t, objs, exp) })
	t.Run("RBAC", func(t *testing.T) { checkRBAC(t, objs, exp) })
	t.Run("rules ConfigMap", func(t *testing.T) { checkRules(t, objs, exp) })
	t.Run("Service PDB NetworkPolicy", func(t *testing.T) { checkNetworking(t, objs) })
}

func checkAPIServices(t *testing.T, objs []*unstructured.Unstructured, exp expectation) {
	var names []string
	for _, o := range ofKind(objs, "APIService") {
		names = append(names, o.GetName())
	}
	slices.Sort(names)
	want := slices.Sorted(slices.Values(exp.apiServices))
	if !slices.Equal(names, want) {
		t.Fatalf("APIServices %v, want %v", names, want)
	}
	var secretCA []byte
	if exp.tlsMode == "selfSigned" {
		s := typed[corev1.Secret](t, find(t, objs, "Secret", namespace, exp.tlsSecret))
		secretCA = s.Data["ca.crt"]
		checkServingCert(t, s.Data["tls.crt"], s.Data["ca.crt"])
	}
	for _, o := range ofKind(objs, "APIService") {
		skip, found, _ := unstructured.NestedBool(o.Object, "spec", "insecureSkipTLSVerify")
		if !found || skip {
			t.Errorf("%s: insecureSkipTLSVerify must be set to false, is %v (set: %v)", o.GetName(), skip, found)
		}
		svcName, _, _ := unstructured.NestedString(o.Object, "spec", "service", "name")
		svcNS, _, _ := unstructured.NestedString(o.Object, "spec", "service", "namespace")
		if svcName != "tidal-adapter" || svcNS != namespace {
			t.Errorf("%s: service %s/%s, want tidal-system/tidal-adapter", o.GetName(), svcNS, svcName)
		}
		if port, _, _ := unstructured.NestedInt64(o.Object, "spec", "service", "port"); port != 443 {
			t.Errorf("%s: service port %d, want 443", o.GetName(), port)
		}
		group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
		version, _, _ := unstructured.NestedString(o.Object, "spec", "version")
		if version+"."+group != o.GetName() {
			t.Errorf("%s: group %q version %q do not match the name", o.GetName(), group, version)
		}
		b64, _, _ := unstructured.NestedString(o.Object, "spec", "caBundle")
		inject := o.GetAnnotations()["cert-manager.io/inject-ca-from"]
		switch exp.tlsMode {
		case "none":
			if b64 != "" || inject != "" {
				t.Errorf("%s: caBundle %q, inject-ca-from %q: the plain manifests set neither", o.GetName(), b64, inject)
			}
		case "certManager":
			if b64 != "" {
				t.Errorf("%s: caBundle set; cainjector owns it in certManager mode", o.GetName())
			}
			if inject != namespace+"/"+exp.tlsSecret {
				t.Errorf("%s: cert-manager.io/inject-ca-from %q, want %s/%s", o.GetName(), inject, namespace, exp.tlsSecret)
			}
		default:
			ca := decodeB64(t, o.GetName()+" caBundle", b64)
			want := exp.caBundle
			if exp.tlsMode == "selfSigned" {
				want = secretCA
			}
			if len(ca) == 0 || string(ca) != string(want) {
				t.Errorf("%s: caBundle %q, want %q", o.GetName(), ca, want)
			}
			if _, err := parseCert(ca); err != nil {
				t.Errorf("%s: caBundle: %v", o.GetName(), err)
			}
			if inject != "" {
				t.Errorf("%s: inject-ca-from set outside certManager mode", o.GetName())
			}
		}
	}
}

// checkServingCert verifies the serving certificate against the CA for the
// name the aggregator checks.
func checkServingCert(t *testing.T, certPEM, caPEM []byte) {
	t.Helper()
	cert, err := parseCert(certPEM)
	if err != nil {
		t.Fatalf("tls.crt: %v", err)
	}
	ca, err := parseCert(caPEM)
	if err != nil {
		t.Fatalf("ca.crt: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: "tidal-adapter.tidal-system.svc", Roots: pool}); err != nil {
		t.Errorf("serving certificate does not verify for tidal-adapter.tidal-system.svc against ca.crt: %v", err)
	}
}

func parseCert(data []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("no PEM certificate in %q", data)
	}
	return x509.ParseCertificate(block.Bytes)
}

func checkSecurity(t *testing.T, name string, spec *corev1.PodSpec) {
	t.Helper()
	psc := spec.SecurityContext
	if psc == nil || !ptr.Deref(psc.RunAsNonRoot, false) || ptr.Deref(psc.RunAsUser, 0) != 65532 ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod securityContext %+v: want runAsNonRoot, runAsUser 65532, seccomp RuntimeDefault", name, psc)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%s: %d containers, want 1", name, len(spec.Containers))
	}
	c := spec.Containers[0]
	sc := c.SecurityContext
	if sc == nil || !ptr.Deref(sc.RunAsNonRoot, false) || ptr.Deref(sc.RunAsUser, 0) != 65532 ||
		ptr.Deref(sc.AllowPrivilegeEscalation, true) || !ptr.Deref(sc.ReadOnlyRootFilesystem, false) ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault || ptr.Deref(sc.Privileged, false) {
		t.Errorf("%s: container securityContext %+v: want non-root 65532, no privilege escalation, read-only root, drop ALL, seccomp RuntimeDefault", name, sc)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("%s: resource requests %v: want cpu and memory", name, c.Resources.Requests)
	}
	if !mountsEmptyDir(spec, c, "/tmp") {
		t.Errorf("%s: /tmp is not an emptyDir; the root filesystem is read-only", name)
	}
	if spec.Affinity == nil || spec.Affinity.PodAntiAffinity == nil {
		t.Errorf("%s: no pod anti-affinity", name)
	}
}

func mountsEmptyDir(spec *corev1.PodSpec, c corev1.Container, path string) bool {
	for _, m := range c.VolumeMounts {
		if m.MountPath != path {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.EmptyDir != nil {
				return true
			}
		}
	}
	return false
}

func checkProbe(t *testing.T, what string, p *corev1.Probe, path, port string, scheme corev1.URIScheme) {
	t.Helper()
	if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port.String() != port || p.HTTPGet.Scheme != scheme && !(scheme == corev1.URISchemeHTTP && p.HTTPGet.Scheme == "") {
		t.Errorf("%s: %+v, want GET %s %s on port %s", what, p, scheme, path, port)
	}
}

func checkAdapter(t *testing.T, objs []*unstructured.Unstructured, exp expectation) {
	d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", namespace, "tidal-adapter"))
	if got := ptr.Deref(d.Spec.Replicas, 1); got != exp.adapterRepl {
		t.Errorf("replicas %d, want %d", got, exp.adapterRepl)
	}
	spec := &d.Spec.Template.Spec
	checkSecurity(t, "adapter", spec)
	if spec.ServiceAccountName != "tidal-adapter" {
		t.Errorf("serviceAccountName %q", spec.ServiceAccountName)
	}
	c := spec.Containers[0]
	checkProbe(t, "liveness", c.LivenessProbe, "/livez", "https", corev1.URISchemeHTTPS)
	checkProbe(t, "readiness", c.ReadinessProbe, "/readyz", "https", corev1.URISchemeHTTPS)
	if len(c.Ports) != 1 || c.Ports[0].Name != "https" || c.Ports[0].ContainerPort != 6443 {
		t.Errorf("ports %+v, want https 6443", c.Ports)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			env[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	if env["POD_NAME"] != "metadata.name" || env["POD_NAMESPACE"] != "metadata.namespace" {
		t.Errorf("env %v: want POD_NAME and POD_NAMESPACE from the downward API (rule rejection Events)", c.Env)
	}
	if len(c.Args) == 0 || c.Args[0] != "adapter" {
		t.Fatalf("args %q: want the adapter command first", c.Args)
	}
	for _, want := range append([]string{
		"--secure-port=6443",
		"--tls-cert-file=/var/run/tidal/tls/tls.crt",
		"--tls-private-key-file=/var/run/tidal/tls/tls.key",
		"--config=/etc/tidal/rules/config.yaml",
		fmt.Sprintf("--enable-custom-metrics=%v", slices.Contains(exp.apiServices, "v1beta1.custom.metrics.k8s.io")),
		fmt.Sprintf("--enable-external-metrics=%v", slices.Contains(exp.apiServices, "v1beta1.external.metrics.k8s.io")),
		fmt.Sprintf("--enable-resource-metrics=%v", slices.Contains(exp.apiServices, "v1beta1.metrics.k8s.io")),
	}, exp.adapterArgs...) {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %q lack %q", c.Args, want)
		}
	}
	if !slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--prometheus-url=http") }) {
		t.Errorf("args %q lack --prometheus-url", c.Args)
	}
	for _, a := range c.Args {
		if strings.Contains(strings.ToLower(a), "insecure") {
			t.Errorf("arg %q: nothing insecure by default", a)
		}
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	if v := volumes["tls"]; v.Secret == nil || v.Secret.SecretName != exp.tlsSecret {
		t.Errorf("tls volume %+v, want Secret %s", v, exp.tlsSecret)
	}
	if v := volumes["rules"]; v.ConfigMap == nil || v.ConfigMap.Name != "tidal-adapter-rules" {
		t.Errorf("rules volume %+v, want ConfigMap tidal-adapter-rules", v)
	}
	// Every mounted file the args name comes from a volume.
	for _, a := range c.Args {
		_, path, ok := strings.Cut(a, "=/")
		if !ok || !strings.HasPrefix(a, "--") || strings.HasPrefix(a, "--cert-dir") {
			continue
		}
		mounted := false
		for _, m := range c.VolumeMounts {
			if strings.HasPrefix("/"+path, m.MountPath+"/") {
				mounted = volumes[m.Name].Name != ""
			}
		}
		if !mounted {
			t.Errorf("arg %q names a file no volume provides", a)
		}
	}
}

func checkAutoscaler(t *testing.T, objs []*unstructured.Unstructured, exp expectation) {
	if exp.autoscaler == "" {
		for _, o := range objs {
			// crds/ is always installed (helm install --skip-crds leaves it out).
			if strings.Contains(o.GetName(), "autoscaler") && o.GetKind() != "CustomResourceDefinition" {
				t.Errorf("%s rendered with the autoscaler off", objKey(o))
			}
		}
		return
	}
	d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", namespace, "tidal-autoscaler"))
	if got := ptr.Deref(d.Spec.Replicas, 1); got != exp.autoscalerRepl {
		t.Errorf("replicas %d, want %d", got, exp.autoscalerRepl)
	}
	spec := &d.Spec.Template.Spec
	checkSecurity(t, "autoscaler", spec)
	if spec.ServiceAccountName != "tidal-autoscaler" {
		t.Errorf("serviceAccountName %q", spec.ServiceAccountName)
	}
	c := spec.Containers[0]
	checkProbe(t, "liveness", c.LivenessProbe, "/healthz", "health", corev1.URISchemeHTTP)
	checkProbe(t, "readiness", c.ReadinessProbe, "/readyz", "health", corev1.URISchemeHTTP)
	for _, want := range []string{"autoscaler", "--mode=" + exp.autoscaler, "--leader-elect=true",
		"--leader-elect-resource-name=tidal-autoscaler", "--leader-elect-resource-namespace=" + namespace,
		"--health-probe-bind-address=:8081", "--secure-port=8443"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %q lack %q", c.Args, want)
		}
	}
	checkGOMAXPROCS(t, c)
	checkGODEBUG(t, c)
	// /metrics on the secure port, behind the autoscaler's Service for
	// scrapers; the probes stay on the plain health port.
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "https" && p.ContainerPort == 8443 }) {
		t.Errorf("container ports %+v lack https 8443", c.Ports)
	}
	svc := typed[corev1.Service](t, find(t, objs, "Service", namespace, "tidal-autoscaler"))
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "https" || svc.Spec.Ports[0].TargetPort.String() != "https" {
		t.Errorf("autoscaler Service ports %+v, want https -> https", svc.Spec.Ports)
	}
	for k, v := range svc.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("autoscaler Service selector %v does not select the autoscaler pods %v", svc.Spec.Selector, d.Spec.Template.Labels)
		}
	}
}

// checkGOMAXPROCS: the autoscaler gets one GOMAXPROCS, its own CPU
// request through the downward API in whole cores (the kubelet rounds up):
// Go would otherwise size its scheduler to every core of the node.
func checkGOMAXPROCS(t *testing.T, c corev1.Container) {
	t.Helper()
	var refs []*corev1.ResourceFieldSelector
	for _, e := range c.Env {
		if e.Name == "GOMAXPROCS" && e.ValueFrom != nil {
			refs = append(refs, e.ValueFrom.ResourceFieldRef)
		}
	}
	if len(refs) != 1 || refs[0] == nil || refs[0].Resource != "requests.cpu" || refs[0].Divisor.Cmp(resource.MustParse("1")) != 0 ||
		refs[0].ContainerName != "" && refs[0].ContainerName != c.Name {
		t.Errorf("env %+v: want one GOMAXPROCS from the container's requests.cpu, divisor 1", c.Env)
	}
	if c.Resources.Requests.Cpu().IsZero() {
		t.Errorf("resources %+v: GOMAXPROCS follows the CPU request, which must be set", c.Resources)
	}
}

// schedtraceGODEBUG keeps Go's monitor thread out of its deep sleep, at its
// slowest poll (10 ms), instead of polling every 20 µs from each wake into
// a system call: 12% of the autoscaler's CPU with 1,000 autoscalers.
const schedtraceGODEBUG = "schedtrace=2147483647"

// checkGODEBUG: the autoscaler gets one GODEBUG, the schedtrace period.
func checkGODEBUG(t *testing.T, c corev1.Container) {
	t.Helper()
	if values := envValues(c, "GODEBUG"); !slices.Equal(values, []string{schedtraceGODEBUG}) {
		t.Errorf("env %+v: want one GODEBUG=%s", c.Env, schedtraceGODEBUG)
	}
}

// envValues is the values of c's variables named name, in order (more
// than one is a list server-side apply refuses).
func envValues(c corev1.Container, name string) []string {
	var values []string
	for _, e := range c.Env {
		if e.Name == name {
			values = append(values, e.Value)
		}
	}
	return values
}

func checkRBAC(t *testing.T, objs []*unstructured.Unstructured, exp expectation) {
	adapterSA := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "tidal-adapter", Namespace: namespace}}
	autoscalerSA := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "tidal-autoscaler", Namespace: namespace}}
	hpaSA := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "horizontal-pod-autoscaler", Namespace: "kube-system"}}

	clusterRole := func(name string, want []rbacv1.PolicyRule) {
		t.Helper()
		got := typed[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", "", name)).Rules
		if !apiequality.Semantic.DeepEqual(got, want) {
			t.Errorf("ClusterRole %s rules:\n got %+v\nwant %+v", name, got, want)
		}
	}
	role := func(ns, name string, want []rbacv1.PolicyRule) {
		t.Helper()
		got := typed[rbacv1.Role](t, find(t, objs, "Role", ns, name)).Rules
		if !apiequality.Semantic.DeepEqual(got, want) {
			t.Errorf("Role %s/%s rules:\n got %+v\nwant %+v", ns, name, got, want)
		}
	}
	binding := func(kind, ns, name, roleKind, roleName string, subjects []rbacv1.Subject) {
		t.Helper()
		o := find(t, objs, kind, ns, name)
		var ref rbacv1.RoleRef
		var subs []rbacv1.Subject
		if kind == "ClusterRoleBinding" {
			b := typed[rbacv1.ClusterRoleBinding](t, o)
			ref, subs = b.RoleRef, b.Subjects
		} else {
			b := typed[rbacv1.RoleBinding](t, o)
			ref, subs = b.RoleRef, b.Subjects
		}
		if ref != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: roleKind, Name: roleName}) || !apiequality.Semantic.DeepEqual(subs, subjects) {
			t.Errorf("%s %s/%s: roleRef %+v subjects %+v, want %s %s for %+v", kind, ns, name, ref, subs, roleKind, roleName, subjects)
		}
	}

	clusterRole("tidal-adapter-resource-reader", append(slices.Clone(adapterReadRules), exp.extraReadRules...))
	binding("ClusterRoleBinding", "", "tidal-adapter-resource-reader", "ClusterRole", "tidal-adapter-resource-reader", adapterSA)
	binding("ClusterRoleBinding", "", "tidal-adapter:system:auth-delegator", "ClusterRole", "system:auth-delegator", adapterSA)
	binding("RoleBinding", "kube-system", "tidal-adapter-auth-reader", "Role", "extension-apiserver-authentication-reader", adapterSA)
	role(namespace, "tidal-adapter-events", adapterEventRules)
	binding("RoleBinding", namespace, "tidal-adapter-events", "Role", "tidal-adapter-events", adapterSA)
	clusterRole("tidal-metrics-reader", metricsReaderRules)
	binding("ClusterRoleBinding", "", "tidal-hpa-controller-metrics", "ClusterRole", "tidal-metrics-reader", hpaSA)
	if exp.autoscaler != "" {
		clusterRole("tidal-autoscaler", autoscalerRules(exp.autoscaler))
		binding("ClusterRoleBinding", "", "tidal-autoscaler", "ClusterRole", "tidal-autoscaler", autoscalerSA)
		role(namespace, "tidal-autoscaler-leader-election", leaderElectionRules)
		binding("RoleBinding", namespace, "tidal-autoscaler-leader-election", "Role", "tidal-autoscaler-leader-election", autoscalerSA)
		// Its /metrics is authorized with TokenReviews and SubjectAccessReviews.
		binding("ClusterRoleBinding", "", "tidal-autoscaler:system:auth-delegator", "ClusterRole", "system:auth-delegator", autoscalerSA)
	}
	if slices.Contains(exp.apiServices, "v1beta1.metrics.k8s.io") {
		clusterRole("tidal-aggregated-metrics-reader", aggregatedMetricsReaderRules)
	}
	// Nothing else: every Role and ClusterRole is one checked above.
	known := map[string]bool{
		"ClusterRole /tidal-adapter-resource-reader": true, "ClusterRole /tidal-metrics-reader": true,
		"ClusterRole /tidal-autoscaler": true, "ClusterRole /tidal-aggregated-metrics-reader": true,
		"Role tidal-system/tidal-adapter-events": true, "Role tidal-system/tidal-autoscaler-leader-election": true,
	}
	for _, o := range objs {
		if (o.GetKind() == "Role" || o.GetKind() == "ClusterRole") && !known[objKey(o)] {
			t.Errorf("unexpected %s: every grant must be tested", objKey(o))
		}
	}
	for _, o := range append(ofKind(objs, "ClusterRoleBinding"), ofKind(objs, "RoleBinding")...) {
		if strings.Contains(o.GetName(), "cluster-admin") || o.Object["roleRef"].(map[string]any)["name"] == "cluster-admin" {
			t.Errorf("%s binds cluster-admin", objKey(o))
		}
	}
}

func checkRules(t *testing.T, objs []*unstructured.Unstructured, exp expectation) {
	cm := typed[corev1.ConfigMap](t, find(t, objs, "ConfigMap", namespace, "tidal-adapter-rules"))
	data, ok := cm.Data["config.yaml"]
	if !ok {
		t.Fatalf("ConfigMap has no config.yaml: keys %v", slices.Collect(func(yield func(string) bool) {
			for k := range cm.Data {
				if !yield(k) {
					return
				}
			}
		}))
	}
	cfg := loadRules(t, "tidal-adapter-rules/config.yaml", []byte(data))
	if exp.rulesVerbatim != nil && data != string(exp.rulesVerbatim) {
		t.Errorf("config.yaml differs from the default rules file:\n%s", data)
	}
	if exp.rulesCheck != nil {
		exp.rulesCheck(t, cfg)
	}
}

// loadRules loads a rule file as `tidal rules check` does (rules/app):
// strict parsing, validation, then the naming checks with the built-in
// resources.
func loadRules(t *testing.T, name string, data []byte) *config.Config {
	t.Helper()
	cfg, err := config.Parse(name, data)
	if err != nil {
		t.Fatalf("rules do not load: %v", err)
	}
	if probs := naming.Check(cfg, nil); len(probs) > 0 {
		t.Fatalf("rules have problems:\n%v", probs)
	}
	return cfg
}

func checkNetworking(t *testing.T, objs []*unstructured.Unstructured) {
	svc := typed[corev1.Service](t, find(t, objs, "Service", namespace, "tidal-adapter"))
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 || svc.Spec.Ports[0].TargetPort.String() != "https" {
		t.Errorf("Service ports %+v, want 443 -> https", svc.Spec.Ports)
	}
	d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", namespace, "tidal-adapter"))
	for k, v := range svc.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("Service selector %v does not select the adapter pods %v", svc.Spec.Selector, d.Spec.Template.Labels)
		}
	}
	pdb := find(t, objs, "PodDisruptionBudget", namespace, "tidal-adapter")
	if v, _, _ := unstructured.NestedInt64(pdb.Object, "spec", "minAvailable"); v != 1 {
		t.Errorf("PodDisruptionBudget minAvailable %v, want 1", pdb.Object["spec"])
	}
	np := find(t, objs, "NetworkPolicy", namespace, "tidal-adapter")
	ingress, _, _ := unstructured.NestedSlice(np.Object, "spec", "ingress")
	if len(ingress) != 1 || fmt.Sprint(ingress[0]) != "map[ports:[map[port:6443 protocol:TCP]]]" {
		t.Errorf("NetworkPolicy ingress %v, want port 6443 from anywhere", ingress)
	}
	egress, _, _ := unstructured.NestedSlice(np.Object, "spec", "egress")
	if s := fmt.Sprint(egress); !strings.Contains(s, "port:53 protocol:UDP") || !strings.Contains(s, "port:443") {
		t.Errorf("NetworkPolicy egress %v lacks DNS or the API server", egress)
	}
}
