package manifests

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// chartMeta reads Chart.yaml.
func chartMeta(t testing.TB) (version, appVersion string) {
	t.Helper()
	var c struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(readFile(t, filepath.Join(chartDir(t), "Chart.yaml")), &c); err != nil {
		t.Fatalf("Chart.yaml: %v", err)
	}
	return c.Version, c.AppVersion
}

// releaseVersion is what `git describe --tags` gives on a release tag (or
// past one): the image tag make image writes.
var releaseVersion = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

// TestChartImage: the default tag is the chart's appVersion, a real
// version; a tag or a digest replaces it; pull secrets reach both pods.
func TestChartImage(t *testing.T) {
	_, appVersion := chartMeta(t)
	if appVersion == "latest" || !releaseVersion.MatchString(appVersion) {
		t.Fatalf("Chart.yaml appVersion %q: want a release version like v0.1.0 (make chart-version sets it)", appVersion)
	}
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	tests := []struct {
		name string
		set  []string
		want string
	}{
		{"default: the appVersion", nil, "tidal:" + appVersion},
		{"tag", []string{"image.repository=example.org/tidal", "image.tag=v9.9.9"}, "example.org/tidal:v9.9.9"},
		{"digest wins over the tag", []string{"image.repository=example.org/tidal", "image.tag=v9.9.9", "image.digest=" + digest}, "example.org/tidal@" + digest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var args []string
			for _, s := range tt.set {
				args = append(args, "--set", s)
			}
			objs := helmTemplate(t, args...)
			for _, name := range []string{"tidal-adapter", "tidal-autoscaler"} {
				d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", namespace, name))
				if got := d.Spec.Template.Spec.Containers[0].Image; got != tt.want {
					t.Errorf("%s image %q, want %q", name, got, tt.want)
				}
				if got := d.Labels["app.kubernetes.io/version"]; got != appVersion {
					t.Errorf("%s label app.kubernetes.io/version %q, want the appVersion %q", name, got, appVersion)
				}
			}
		})
	}
	t.Run("imagePullSecrets", func(t *testing.T) {
		// image.pullSecrets is prometheus-adapter's (names), added to both.
		objs := helmTemplate(t, "--set", "imagePullSecrets[0].name=regcred", "--set", "image.pullSecrets[0]=theirs")
		for _, name := range []string{"tidal-adapter", "tidal-autoscaler"} {
			d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", namespace, name))
			if got := d.Spec.Template.Spec.ImagePullSecrets; len(got) != 2 || got[0].Name != "regcred" || got[1].Name != "theirs" {
				t.Errorf("%s imagePullSecrets %+v, want regcred and theirs", name, got)
			}
		}
	})
}

// rendered is one component's objects.
type rendered struct {
	d   *appsv1.Deployment
	sa  *corev1.ServiceAccount
	pdb *policyv1.PodDisruptionBudget
	svc *corev1.Service
}

func component(t *testing.T, objs []*unstructured.Unstructured, name string) rendered {
	t.Helper()
	return rendered{
		d:   typed[appsv1.Deployment](t, find(t, objs, "Deployment", namespace, name)),
		sa:  typed[corev1.ServiceAccount](t, find(t, objs, "ServiceAccount", namespace, name)),
		pdb: typed[policyv1.PodDisruptionBudget](t, find(t, objs, "PodDisruptionBudget", namespace, name)),
		svc: typed[corev1.Service](t, find(t, objs, "Service", namespace, name)),
	}
}

func envNames(c corev1.Container) []string {
	var out []string
	for _, e := range c.Env {
		out = append(out, e.Name)
	}
	return out
}

func portOf(c corev1.Container, name string) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

// hatch says what one component must render for testdata/hatches-values.yaml.
type hatch struct {
	name, label, annotation, priorityClass, saAnnotation, env string
	runAsUser                                                 int64
	volume, mountPath, sidecar                                string
	args                                                      []string
	ports                                                     map[string]int32
	servicePort                                               int32
	pdb                                                       string // "min=..." or "max=..."
	nodeSelector, toleration                                  string
	cpuRequest                                                string
}

// TestChartHatches renders testdata/hatches-values.yaml (every escape
// hatch of the chart set) and checks each value lands where it belongs in
// each component's Deployment, ServiceAccount, PodDisruptionBudget and
// Service, with the restrictive security defaults kept where not overridden.
func TestChartHatches(t *testing.T) {
	objs := helmTemplate(t, "-f", filepath.Join(repoRoot(t), "test", "manifests", "testdata", "hatches-values.yaml"))
	hatches := []hatch{{
		name: "tidal-adapter", label: "platform", annotation: "example.com/adapter", priorityClass: "tidal-critical",
		saAnnotation: "iam.gke.io/gcp-service-account", env: "HTTPS_PROXY", runAsUser: 1001,
		volume: "extra-ca", mountPath: "/etc/corp-ca", sidecar: "adapter-sidecar",
		args: []string{"--secure-port=4443"}, ports: map[string]int32{"https": 4443}, servicePort: 443,
		pdb: "max=1", nodeSelector: "metrics", toleration: "dedicated", cpuRequest: "200m",
	}, {
		name: "tidal-autoscaler", label: "autoscaling", annotation: "example.com/autoscaler", priorityClass: "",
		saAnnotation: "eks.amazonaws.com/role-arn", env: "GOMEMLIMIT", runAsUser: 1002,
		volume: "scratch", mountPath: "/scratch", sidecar: "autoscaler-sidecar",
		args:  []string{"--health-probe-bind-address=:10281", "--secure-port=10283"},
		ports: map[string]int32{"health": 10281, "https": 10283}, servicePort: 10283,
		pdb: "min=50%", nodeSelector: "control", toleration: "dedicated", cpuRequest: "100m",
	}}
	checks := []struct {
		name  string
		check func(t *testing.T, r rendered, h hatch)
	}{
		{"podLabels, selector untouched", func(t *testing.T, r rendered, h hatch) {
			l := r.d.Spec.Template.Labels
			if l["team"] != h.label || l["app.kubernetes.io/name"] != "tidal" {
				t.Errorf("pod labels %v: want team=%s and app.kubernetes.io/name=tidal (podLabels cannot change the selector's)", l, h.label)
			}
		}},
		{"podAnnotations", func(t *testing.T, r rendered, h hatch) {
			if r.d.Spec.Template.Annotations[h.annotation] != "yes" {
				t.Errorf("pod annotations %v lack %s", r.d.Spec.Template.Annotations, h.annotation)
			}
		}},
		{"priorityClassName", func(t *testing.T, r rendered, h hatch) {
			if got := r.d.Spec.Template.Spec.PriorityClassName; got != h.priorityClass {
				t.Errorf("priorityClassName %q, want %q", got, h.priorityClass)
			}
		}},
		{"topologySpreadConstraints", func(t *testing.T, r rendered, h hatch) {
			tsc := r.d.Spec.Template.Spec.TopologySpreadConstraints
			if len(tsc) == 0 || tsc[0].TopologyKey != "topology.kubernetes.io/zone" || tsc[0].LabelSelector == nil ||
				!maps.Equal(tsc[0].LabelSelector.MatchLabels, r.d.Spec.Selector.MatchLabels) {
				t.Fatalf("topologySpreadConstraints %+v: want the zone constraint with the component's selector filled in", tsc)
			}
			if h.name == "tidal-adapter" && (len(tsc) != 2 || tsc[1].LabelSelector.MatchLabels["custom"] != "selector") {
				t.Errorf("topologySpreadConstraints %+v: a given labelSelector must stay", tsc)
			}
		}},
		{"podSecurityContext merged over the defaults", func(t *testing.T, r rendered, h hatch) {
			psc := r.d.Spec.Template.Spec.SecurityContext
			if ptr.Deref(psc.RunAsUser, 0) != h.runAsUser || !ptr.Deref(psc.RunAsNonRoot, false) || psc.SeccompProfile == nil ||
				psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("pod securityContext %+v: want runAsUser %d, runAsNonRoot and seccomp RuntimeDefault kept", psc, h.runAsUser)
			}
			// null removes a default.
			if h.name == "tidal-adapter" && psc.FSGroup != nil {
				t.Errorf("pod securityContext fsGroup %d: null must drop it", *psc.FSGroup)
			}
		}},
		{"securityContext merged over the defaults", func(t *testing.T, r rendered, h hatch) {
			sc := r.d.Spec.Template.Spec.Containers[0].SecurityContext
			if ptr.Deref(sc.RunAsUser, 0) != h.runAsUser || ptr.Deref(sc.AllowPrivilegeEscalation, true) || !ptr.Deref(sc.ReadOnlyRootFilesystem, false) ||
				sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
				t.Errorf("container securityContext %+v: want runAsUser %d and the rest of the defaults", sc, h.runAsUser)
			}
		}},
		{"serviceAccount.annotations", func(t *testing.T, r rendered, h hatch) {
			if r.sa.Annotations[h.saAnnotation] == "" {
				t.Errorf("ServiceAccount annotations %v lack %s", r.sa.Annotations, h.saAnnotation)
			}
		}},
		{"extraEnv", func(t *testing.T, r rendered, h hatch) {
			names := envNames(r.d.Spec.Template.Spec.Containers[0])
			if !slices.Contains(names, h.env) {
				t.Errorf("env %v lacks %s", names, h.env)
			}
			if h.name == "tidal-adapter" && !slices.Contains(names, "POD_NAME") {
				t.Errorf("env %v: extraEnv must come after POD_NAME, not replace it", names)
			}
			if h.name == "tidal-autoscaler" {
				checkGOMAXPROCS(t, r.d.Spec.Template.Spec.Containers[0])
				checkGODEBUG(t, r.d.Spec.Template.Spec.Containers[0])
			}
		}},
		{"extraVolumes and extraVolumeMounts", func(t *testing.T, r rendered, h hatch) {
			spec := r.d.Spec.Template.Spec
			if !slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == h.volume }) ||
				!slices.ContainsFunc(spec.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == h.volume && m.MountPath == h.mountPath }) {
				t.Errorf("volumes %+v mounts %+v: want %s at %s", spec.Volumes, spec.Containers[0].VolumeMounts, h.volume, h.mountPath)
			}
			if !mountsEmptyDir(&spec, spec.Containers[0], "/tmp") {
				t.Error("/tmp is no longer an emptyDir")
			}
		}},
		{"extraContainers", func(t *testing.T, r rendered, h hatch) {
			cs := r.d.Spec.Template.Spec.Containers
			if len(cs) != 2 || cs[1].Name != h.sidecar {
				t.Errorf("containers %d (%v): want the component's then %s", len(cs), cs, h.sidecar)
			}
		}},
		{"hostNetwork moves the ports", func(t *testing.T, r rendered, h hatch) {
			spec := r.d.Spec.Template.Spec
			if !spec.HostNetwork || spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
				t.Errorf("hostNetwork %v dnsPolicy %q: want true and ClusterFirstWithHostNet", spec.HostNetwork, spec.DNSPolicy)
			}
			c := spec.Containers[0]
			for _, a := range h.args {
				if !slices.Contains(c.Args, a) {
					t.Errorf("args %q lack %s", c.Args, a)
				}
			}
			for name, port := range h.ports {
				if got := portOf(c, name); got != port {
					t.Errorf("container port %s is %d, want %d", name, got, port)
				}
			}
			if p := r.svc.Spec.Ports[0]; p.Port != h.servicePort || p.TargetPort.String() != "https" {
				t.Errorf("Service port %d -> %s, want %d -> https", p.Port, p.TargetPort.String(), h.servicePort)
			}
		}},
		{"podDisruptionBudget", func(t *testing.T, r rendered, h hatch) {
			s := r.pdb.Spec
			got := "min=" + s.MinAvailable.String()
			if s.MaxUnavailable != nil {
				got = "max=" + s.MaxUnavailable.String()
			}
			if got != h.pdb || (s.MaxUnavailable != nil && s.MinAvailable != nil) {
				t.Errorf("PDB %+v, want %s only", s, h.pdb)
			}
			if !maps.Equal(s.Selector.MatchLabels, r.d.Spec.Selector.MatchLabels) {
				t.Errorf("PDB selector %v, want the Deployment's %v", s.Selector.MatchLabels, r.d.Spec.Selector.MatchLabels)
			}
		}},
		{"resources nodeSelector tolerations affinity", func(t *testing.T, r rendered, h hatch) {
			spec := r.d.Spec.Template.Spec
			if got := spec.Containers[0].Resources.Requests.Cpu().String(); got != h.cpuRequest {
				t.Errorf("cpu request %s, want %s", got, h.cpuRequest)
			}
			if spec.NodeSelector["node-role"] != h.nodeSelector || len(spec.Tolerations) != 1 || spec.Tolerations[0].Key != h.toleration {
				t.Errorf("nodeSelector %v tolerations %+v", spec.NodeSelector, spec.Tolerations)
			}
			if spec.Affinity == nil || spec.Affinity.PodAntiAffinity != nil {
				t.Errorf("affinity %+v: the given affinity replaces the default anti-affinity", spec.Affinity)
			}
		}},
	}
	for _, h := range hatches {
		r := component(t, objs, h.name)
		for _, c := range checks {
			t.Run(h.name+"/"+c.name, func(t *testing.T) { c.check(t, r, h) })
		}
	}
	np := find(t, objs, "NetworkPolicy", namespace, "tidal-adapter")
	if ingress, _, _ := unstructured.NestedSlice(np.Object, "spec", "ingress"); !strings.Contains(strings.ReplaceAll(fmt.Sprint(ingress), " ", ""), "port:4443") {
		t.Errorf("NetworkPolicy ingress %v: want the adapter's host-network port 4443", ingress)
	}
}

// TestChartHatchDefaults: without the hatches, what each component gets.
func TestChartHatchDefaults(t *testing.T) {
	objs := helmTemplate(t)
	for _, name := range []string{"tidal-adapter", "tidal-autoscaler"} {
		r := component(t, objs, name)
		spec := r.d.Spec.Template.Spec
		if spec.PriorityClassName != "system-cluster-critical" {
			t.Errorf("%s priorityClassName %q, want system-cluster-critical", name, spec.PriorityClassName)
		}
		if spec.HostNetwork || spec.DNSPolicy != "" || len(spec.TopologySpreadConstraints) != 0 || len(spec.Containers) != 1 {
			t.Errorf("%s: hostNetwork %v, dnsPolicy %q, %d spread constraints, %d containers: want none of them", name, spec.HostNetwork, spec.DNSPolicy, len(spec.TopologySpreadConstraints), len(spec.Containers))
		}
		if len(r.sa.Annotations) != 0 {
			t.Errorf("%s ServiceAccount annotations %v, want none", name, r.sa.Annotations)
		}
		if r.pdb.Spec.MinAvailable.String() != "1" || r.pdb.Spec.MaxUnavailable != nil {
			t.Errorf("%s PDB %+v, want minAvailable 1", name, r.pdb.Spec)
		}
	}
	for _, o := range helmTemplate(t, "--set", "autoscaler.podDisruptionBudget.enabled=false") {
		if o.GetKind() == "PodDisruptionBudget" && o.GetName() == "tidal-autoscaler" {
			t.Error("autoscaler.podDisruptionBudget.enabled=false still renders its PDB")
		}
	}
}

// TestChartGOMAXPROCSGiven: a GOMAXPROCS in autoscaler.extraEnv replaces
// the one from the CPU request (a list with the name twice would be
// refused by server-side apply), and the rest of extraEnv and the chart's
// GODEBUG stay.
func TestChartGOMAXPROCSGiven(t *testing.T) {
	objs := helmTemplate(t, "--set", "autoscaler.extraEnv[0].name=GOMAXPROCS", "--set-string", "autoscaler.extraEnv[0].value=4",
		"--set", "autoscaler.extraEnv[1].name=GOMEMLIMIT", "--set-string", "autoscaler.extraEnv[1].value=200MiB")
	env := component(t, objs, "tidal-autoscaler").d.Spec.Template.Spec.Containers[0].Env
	want := []corev1.EnvVar{{Name: "GODEBUG", Value: schedtraceGODEBUG}, {Name: "GOMAXPROCS", Value: "4"}, {Name: "GOMEMLIMIT", Value: "200MiB"}}
	if !apiequality.Semantic.DeepEqual(env, want) {
		t.Errorf("env %+v, want %+v", env, want)
	}
}

// TestChartGODEBUGGiven: a GODEBUG in autoscaler.extraEnv replaces the
// chart's (the user's list is theirs to complete), and GOMAXPROCS stays.
func TestChartGODEBUGGiven(t *testing.T) {
	objs := helmTemplate(t, "--set", "autoscaler.extraEnv[0].name=GODEBUG", "--set-string", "autoscaler.extraEnv[0].value=http2client=0\\,schedtrace=2147483647")
	c := component(t, objs, "tidal-autoscaler").d.Spec.Template.Spec.Containers[0]
	checkGOMAXPROCS(t, c)
	if godebug, want := envValues(c, "GODEBUG"), []string{"http2client=0," + schedtraceGODEBUG}; !slices.Equal(godebug, want) {
		t.Errorf("GODEBUG values %q, want %q (extraEnv's alone)", godebug, want)
	}
}

// TestChartTemplateStable: GitOps tools (Argo CD, Flux with helm template,
// any `helm template | kubectl apply`) render without lookup. The TLS modes
// docs/chart.md recommends for them render byte-identical output every
// time; selfSigned does not (it generates a new CA on each render), which
// is the docs' warning.
func TestChartTemplateStable(t *testing.T) {
	helm := tool(t, "helm")
	render := func(t *testing.T, args ...string) string {
		t.Helper()
		out, err := run(helmEnv(t), helm, append([]string{"template", releaseName, chartDir(t), "--namespace", namespace}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	ci := func(name string) string { return filepath.Join(chartDir(t), "ci", name) }
	tests := []struct {
		name   string
		args   []string
		stable bool
	}{
		{"certManager", []string{"-f", ci("cert-manager-values.yaml")}, true},
		{"certManager with an issuer of yours", []string{"-f", ci("cert-manager-values.yaml"), "--set", "tls.certManager.issuerRef.name=corp"}, true},
		{"existingSecret", []string{"-f", ci("existing-secret-values.yaml")}, true},
		{"selfSigned", []string{"-f", ci("default-values.yaml")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			first, second := render(t, tt.args...), render(t, tt.args...)
			if same := first == second; same != tt.stable {
				t.Errorf("two renders identical: %v, want %v (%d and %d bytes)", same, tt.stable, len(first), len(second))
			}
		})
	}
}

// TestChartSchemaCoversValues: every key of values.yaml has a schema
// property with a type or an enum, down to the free-form objects
// (affinity, resources' quantities, Kubernetes lists).
func TestChartSchemaCoversValues(t *testing.T) {
	var values, schema map[string]any
	if err := yaml.Unmarshal(readFile(t, filepath.Join(chartDir(t), "values.yaml")), &values); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(readFile(t, filepath.Join(chartDir(t), "values.schema.json")), &schema); err != nil {
		t.Fatal(err)
	}
	defs, _ := schema["definitions"].(map[string]any)
	resolve := func(node map[string]any) map[string]any {
		for {
			ref, ok := node["$ref"].(string)
			if !ok {
				return node
			}
			node, _ = defs[strings.TrimPrefix(ref, "#/definitions/")].(map[string]any)
		}
	}
	checked := 0
	var walk func(path string, v any, node map[string]any)
	walk = func(path string, v any, node map[string]any) {
		node = resolve(node)
		m, ok := v.(map[string]any)
		if !ok || node["properties"] == nil {
			return
		}
		props := node["properties"].(map[string]any)
		for k, child := range m {
			p, ok := props[k].(map[string]any)
			if !ok {
				t.Errorf("values.yaml %s%s has no property in values.schema.json", path, k)
				continue
			}
			checked++
			r := resolve(p)
			if r["type"] == nil && r["enum"] == nil && r["oneOf"] == nil && r["anyOf"] == nil {
				t.Errorf("values.schema.json %s%s: no type or enum", path, k)
			}
			walk(path+k+".", child, r)
		}
	}
	walk("", values, schema)
	if checked < 100 {
		t.Errorf("only %d values checked: the walk is broken", checked)
	}
}

// TestChartVersionTarget runs `make chart-version` on a copy of the chart:
// a release version becomes appVersion (so the default image tag) and,
// without its v, the chart's version; anything else is refused.
func TestChartVersionTarget(t *testing.T) {
	makeBin, err := exec.LookPath("make")
	if err != nil {
		t.Skip("no make here")
	}
	tests := []struct {
		name, version, wantErr string
	}{
		{"a tag", "v1.2.3", ""},
		{"past a tag, dirty", "v1.2.3-4-gabcdef0-dirty", ""},
		{"no tag: a commit", "6fcf968", "is not a release version"},
		{"latest", "latest", "is not a release version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "tidal")
			if err := os.CopyFS(dir, os.DirFS(chartDir(t))); err != nil {
				t.Fatal(err)
			}
			out, err := run(os.Environ(), makeBin, "-s", "-C", repoRoot(t), "chart-version", "CHART_DIR="+dir, "VERSION="+tt.version)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(out+err.Error(), tt.wantErr) {
					t.Fatalf("make chart-version VERSION=%s: %v %s; want an error saying %q", tt.version, err, out, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var c struct{ Version, AppVersion string }
			if err := yaml.Unmarshal(readFile(t, filepath.Join(dir, "Chart.yaml")), &c); err != nil {
				t.Fatal(err)
			}
			if c.AppVersion != tt.version || c.Version != strings.TrimPrefix(tt.version, "v") {
				t.Errorf("Chart.yaml version %q appVersion %q, want %q and %q", c.Version, c.AppVersion, strings.TrimPrefix(tt.version, "v"), tt.version)
			}
			rendered, err := run(helmEnv(t), tool(t, "helm"), "template", releaseName, dir, "--namespace", namespace)
			if err != nil {
				t.Fatal(err)
			}
			d := typed[appsv1.Deployment](t, find(t, decodeObjects(t, rendered), "Deployment", namespace, "tidal-adapter"))
			if got := d.Spec.Template.Spec.Containers[0].Image; got != "tidal:"+tt.version {
				t.Errorf("image %q, want tidal:%s", got, tt.version)
			}
		})
	}
}
