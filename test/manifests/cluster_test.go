package manifests

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregator "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	"github.com/tidal-autoscaler/tidal/test/harness"
)

// TestCluster installs the chart on the real control plane and runs Tidal
// with nothing but what the chart grants. Steps run in order; a failed
// step stops the rest.
func TestCluster(t *testing.T) {
	h := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	tidal, err := harness.TidalBinary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	helm := tool(t, "helm")
	env := helmEnv(t, "KUBECONFIG="+h.AdminKubeconfig)
	values := func(name string) string { return filepath.Join(chartDir(t), "ci", name) }
	c := &clusterTest{h: h, tidal: tidal}
	defer c.stopAdapter()

	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"helm install", func(t *testing.T) {
			if out, err := run(env, helm, "install", releaseName, chartDir(t), "--namespace", namespace, "--create-namespace", "-f", values("default-values.yaml")); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if _, err := aggregator.NewForConfigOrDie(h.Admin).ApiregistrationV1().APIServices().Get(ctx, "v1beta1.custom.metrics.k8s.io", metav1.GetOptions{}); err != nil {
				t.Fatal(err)
			}
			c.tls = c.checkTLS(ctx, t)
		}},
		{"helm upgrade keeps the generated certificate", func(t *testing.T) {
			if out, err := run(env, helm, "upgrade", releaseName, chartDir(t), "--namespace", namespace, "-f", values("default-values.yaml"), "--set", "adapter.replicas=3"); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			d, err := h.Client.AppsV1().Deployments(namespace).Get(ctx, "tidal-adapter", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if *d.Spec.Replicas != 3 {
				t.Fatalf("adapter replicas %d after the upgrade, want 3: the upgrade did not apply", *d.Spec.Replicas)
			}
			if got := c.checkTLS(ctx, t); !equalData(got, c.tls) {
				t.Fatal("helm upgrade regenerated the serving certificate or CA")
			}
		}},
		{"apiserver accepts every rendering (server-side apply, dry run)", func(t *testing.T) {
			c.applyAllDryRun(ctx, t)
		}},
		{"autoscaler runs with the chart's RBAC in crd mode", func(t *testing.T) {
			c.runAutoscaler(ctx, t, "crd")
		}},
		{"helm upgrade to native mode; autoscaler runs with its RBAC", func(t *testing.T) {
			if out, err := run(env, helm, "upgrade", releaseName, chartDir(t), "--namespace", namespace, "-f", values("native-values.yaml")); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if got := c.checkTLS(ctx, t); !equalData(got, c.tls) {
				t.Fatal("helm upgrade regenerated the serving certificate or CA")
			}
			c.runAutoscaler(ctx, t, "native")
		}},
		{"adapter serves with the chart's RBAC and certificate", func(t *testing.T) {
			c.runAdapter(ctx, t)
		}},
		{"helm upgrade keeps every APIService Available", func(t *testing.T) {
			c.upgradeAvailable(ctx, t, env, helm, values("native-values.yaml"))
		}},
		{"helm uninstall removes the APIServices first and leaves discovery clean", func(t *testing.T) {
			c.uninstall(ctx, t, env, helm)
		}},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.run) {
			t.Fatalf("step %q failed; later steps need it", s.name)
		}
	}
}

type clusterTest struct {
	h     *harness.Harness
	tidal string
	tls   map[string][]byte
	// The adapter runAdapter started, serving the chart's APIServices
	// until stopAdapter.
	adapter     *harness.Process
	adapterPort int
}

func (c *clusterTest) stopAdapter() {
	if c.adapter != nil {
		_ = c.adapter.Stop(10 * time.Second)
		c.adapter = nil
	}
}

func equalData(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if string(b[k]) != string(v) {
			return false
		}
	}
	return true
}

// checkTLS checks the installed Secret and APIServices agree: every
// caBundle is the Secret's CA, which signed the serving certificate for
// tidal-adapter.tidal-system.svc. It returns the Secret's data.
func (c *clusterTest) checkTLS(ctx context.Context, t *testing.T) map[string][]byte {
	t.Helper()
	s, err := c.h.Client.CoreV1().Secrets(namespace).Get(ctx, "tidal-adapter-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkServingCert(t, s.Data["tls.crt"], s.Data["ca.crt"])
	list, err := aggregator.NewForConfigOrDie(c.h.Admin).ApiregistrationV1().APIServices().List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=tidal"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range list.Items {
		names = append(names, a.Name)
		if string(a.Spec.CABundle) != string(s.Data["ca.crt"]) || a.Spec.InsecureSkipTLSVerify {
			t.Errorf("APIService %s: caBundle is not the Secret's ca.crt, or insecureSkipTLSVerify is on", a.Name)
		}
	}
	if slices.Sort(names); !slices.Equal(names, slices.Sorted(slices.Values(defaultAPIs))) {
		t.Errorf("installed APIServices %v, want %v", names, defaultAPIs)
	}
	return s.Data
}

// applyAllDryRun sends every object of every ci rendering and of the
// kustomizations to the apiserver as a server-side apply with dryRun=All:
// schema validation, defaulting and admission, nothing stored. cert-manager
// objects are skipped: its CRDs are not installed here.
func (c *clusterTest) applyAllDryRun(ctx context.Context, t *testing.T) {
	dyn := dynamic.NewForConfigOrDie(c.h.Admin)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(c.h.Admin)))
	renderings := map[string][]*unstructured.Unstructured{}
	for _, f := range ciFiles(t) {
		renderings["helm "+filepath.Base(f)] = helmTemplate(t, "-f", f)
	}
	// The hatches change ports and the PDB's budget: applied over the
	// installed objects (other field managers) the lists would merge, so
	// they go to a release and namespace of their own.
	if _, err := c.h.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "hatches"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	hatches, err := run(helmEnv(t), tool(t, "helm"), "template", "hatches", chartDir(t), "--namespace", "hatches", "-f", filepath.Join(repoRoot(t), "test", "manifests", "testdata", "hatches-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	renderings["helm testdata/hatches-values.yaml"] = decodeObjects(t, hatches)
	renderings["kustomize manifests/"] = kustomize(t, manifestsDir(t))
	renderings["kustomize +native-mode +resource-metrics +cert-manager"] = overlay(t, "native-mode", "resource-metrics", "cert-manager")
	renderings["kustomize +existing-secret"] = overlay(t, existingSecretComponent(t, c.h.CA.CertPEM))

	applied, skipped := 0, 0
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range renderings {
			if !yield(k) {
				return
			}
		}
	}) {
		for _, o := range renderings[name] {
			gvk := o.GroupVersionKind()
			if gvk.Group == "cert-manager.io" {
				skipped++
				continue
			}
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				t.Errorf("%s: %s: %v", name, objKey(o), err)
				continue
			}
			var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
			if m.Scope.Name() == meta.RESTScopeNameNamespace {
				if o.GetNamespace() == "" {
					t.Errorf("%s: %s is namespaced but has no namespace", name, objKey(o))
					continue
				}
				ri = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
			}
			if _, err := ri.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: "tidal-manifests-test", Force: true, DryRun: []string{metav1.DryRunAll}}); err != nil {
				t.Errorf("%s: %s rejected: %v", name, objKey(o), err)
				continue
			}
			applied++
		}
	}
	t.Logf("the apiserver accepted %d objects of %d renderings; %d cert-manager objects skipped", applied, len(renderings), skipped)
}

// runAutoscaler runs `tidal autoscaler` with the installed Deployment's
// arguments, as the chart's ServiceAccount, and waits until it leads and
// its caches synced (/readyz of a leader).
func (c *clusterTest) runAutoscaler(ctx context.Context, t *testing.T, mode string) {
	h := c.h
	d, err := h.Client.AppsV1().Deployments(namespace).Get(ctx, "tidal-autoscaler", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, _, err := h.Kubeconfig(harness.ServiceAccountIdentity(namespace, "tidal-autoscaler"))
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	var p *harness.Process
	defer func() {
		if p != nil {
			_ = p.Stop(10 * time.Second)
		}
		_ = h.Client.CoordinationV1().Leases(namespace).Delete(context.Background(), "tidal-autoscaler", metav1.DeleteOptions{})
	}()
	err = harness.OnFreePorts(2, func(ports []int) error {
		port, securePort := ports[0], ports[1]
		var args []string
		for _, a := range d.Spec.Template.Spec.Containers[0].Args {
			if strings.HasPrefix(a, "--health-probe-bind-address=") {
				a = fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", port)
			}
			if strings.HasPrefix(a, "--secure-port=") {
				a = fmt.Sprintf("--secure-port=%d", securePort)
			}
			args = append(args, a)
		}
		args = append(args, "--bind-address=127.0.0.1")
		if !slices.Contains(args, "--mode="+mode) {
			t.Fatalf("installed args %q lack --mode=%s", args, mode)
		}
		args = append(args, "--kubeconfig="+kubeconfig, "--leader-elect-retry-period=200ms")
		var err error
		if p, err = h.StartProcess("tidal-autoscaler-"+mode, c.tidal, args, ports...); err != nil {
			return err
		}
		return harness.WaitReady(ctx, p, "autoscaler leading with synced caches", 60*time.Second, func(ctx context.Context) error {
			l, err := h.Client.CoordinationV1().Leases(namespace).Get(ctx, "tidal-autoscaler", metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("lease: %v", err)
			}
			if l.Spec.HolderIdentity == nil || !strings.HasPrefix(*l.Spec.HolderIdentity, host+"_") {
				return fmt.Errorf("lease held by %v", l.Spec.HolderIdentity)
			}
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", port))
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("/readyz %d", resp.StatusCode)
			}
			return nil
		})
	})
	if err != nil {
		if p == nil {
			t.Fatal(err)
		}
		t.Fatalf("%v\nlog %s:\n%s", err, p.LogPath(), p.LogTail())
	}
	if log := string(readFile(t, p.LogPath())); strings.Contains(log, "forbidden") {
		t.Fatalf("the autoscaler was refused something; log %s:\n%s", p.LogPath(), p.LogTail())
	}
}

// runAdapter runs `tidal adapter` on loopback with the installed
// Deployment's arguments, the chart's generated certificate and rules, as
// the chart's ServiceAccount; points the chart's Service and APIServices at
// it; and checks that the aggregator trusts it (Available, with the chart's
// caBundle) and that the HPA controller's identity may read metrics.
func (c *clusterTest) runAdapter(ctx context.Context, t *testing.T) {
	h := c.h
	d, err := h.Client.AppsV1().Deployments(namespace).Get(ctx, "tidal-adapter", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm, err := h.Client.CoreV1().ConfigMaps(namespace).Get(ctx, "tidal-adapter-rules", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string][]byte{"tls.crt": c.tls["tls.crt"], "tls.key": c.tls["tls.key"], "config.yaml": []byte(cm.Data["config.yaml"])}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig, _, err := h.Kubeconfig(harness.ServiceAccountIdentity(namespace, "tidal-adapter"))
	if err != nil {
		t.Fatal(err)
	}
	err = harness.OnFreePorts(1, func(ports []int) error {
		port := ports[0]
		// The pod's paths become the local copies; the rest stays as installed.
		replace := map[string]string{
			"--secure-port":          fmt.Sprint(port),
			"--tls-cert-file":        filepath.Join(dir, "tls.crt"),
			"--tls-private-key-file": filepath.Join(dir, "tls.key"),
			"--config":               filepath.Join(dir, "config.yaml"),
			"--cert-dir":             filepath.Join(dir, "certs"),
			"--prometheus-url":       h.PrometheusURL,
		}
		var args []string
		for _, a := range d.Spec.Template.Spec.Containers[0].Args {
			flag, _, _ := strings.Cut(a, "=")
			if v, ok := replace[flag]; ok {
				a = flag + "=" + v
				delete(replace, flag)
			} else if strings.Contains(a, "=/") {
				t.Fatalf("installed arg %q names a file in the pod this test does not provide", a)
			}
			args = append(args, a)
		}
		if len(replace) > 0 {
			t.Fatalf("installed args %q lack %v", args, replace)
		}
		args = append(args, "--bind-address=127.0.0.1", "--kubeconfig="+kubeconfig)
		p, err := h.StartProcess("tidal-adapter", c.tidal, args, port)
		if err != nil {
			return err
		}
		// It keeps serving for the upgrade and uninstall steps; TestCluster
		// stops it.
		c.adapter, c.adapterPort = p, port
		return harness.WaitReady(ctx, p, "tidal adapter", 60*time.Second, func(context.Context) error {
			if !harness.PortOpen(port) {
				return fmt.Errorf("port %d not open yet", port)
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	p, port := c.adapter, c.adapterPort

	// Re-point: an APIService cannot reach 127.0.0.1 through endpoints, so
	// the chart's Service becomes an ExternalName to localhost and the
	// APIServices use the adapter's port. caBundle stays the chart's.
	if err := h.Client.CoreV1().Services(namespace).Delete(ctx, "tidal-adapter", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "tidal-adapter", Namespace: namespace},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost",
			Ports: []corev1.ServicePort{{Name: "https", Port: int32(port)}}},
	}
	if _, err := h.Client.CoreV1().Services(namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	agg := aggregator.NewForConfigOrDie(h.Admin).ApiregistrationV1().APIServices()
	patch := fmt.Appendf(nil, `{"spec":{"service":{"port":%d}}}`, port)
	for _, name := range defaultAPIs {
		if _, err := agg.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Like h.WaitAPIServiceAvailable, but fails at once if the adapter exits.
	err = harness.WaitReady(ctx, p, "APIServices Available", 60*time.Second, func(ctx context.Context) error {
		for _, name := range defaultAPIs {
			s, err := agg.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			available := false
			for _, c := range s.Status.Conditions {
				if c.Type == apiregistrationv1.Available {
					if c.Status != apiregistrationv1.ConditionTrue {
						return fmt.Errorf("%s: Available=%s: %s: %s", name, c.Status, c.Reason, c.Message)
					}
					available = true
				}
			}
			if !available {
				return fmt.Errorf("%s: no Available condition yet", name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v; adapter log %s:\n%s", err, p.LogPath(), p.LogTail())
	}

	// The HPA controller's identity may read custom and external metrics
	// (the chart's binding); an identity without a binding may not.
	hpa := clientFor(t, h, harness.HPAServiceAccount)
	nobody := clientFor(t, h, harness.ServiceAccountIdentity("default", "nobody"))
	for _, gv := range []string{"custom.metrics.k8s.io/v1beta1", "custom.metrics.k8s.io/v1beta2", "external.metrics.k8s.io/v1beta1"} {
		// Available comes from the aggregator's availability probe; its
		// proxy picks up the patched port on its own, a moment later (this
		// step once got a 503 right after Available).
		err := harness.WaitReady(ctx, p, "discovery of "+gv+" as the HPA controller", 30*time.Second, func(context.Context) error {
			_, err := hpa.Discovery().ServerResourcesForGroupVersion(gv)
			return err
		})
		if err != nil {
			t.Errorf("discovery of %s as the HPA controller: %v", gv, err)
		}
	}
	for _, path := range []string{
		"/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/http_requests_per_second",
		"/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_length",
	} {
		err := hpa.Discovery().RESTClient().Get().AbsPath(path).Do(ctx).Error()
		if apierrors.IsForbidden(err) {
			t.Errorf("GET %s as the HPA controller: %v", path, err)
		}
		t.Logf("GET %s as the HPA controller: %v (anything but forbidden)", path, err)
		if err := nobody.Discovery().RESTClient().Get().AbsPath(path).Do(ctx).Error(); !apierrors.IsForbidden(err) {
			t.Errorf("GET %s as an identity without a binding: %v, want forbidden", path, err)
		}
	}
	if log := string(readFile(t, p.LogPath())); strings.Contains(log, "forbidden") {
		t.Errorf("the adapter was refused something; log %s:\n%s", p.LogPath(), p.LogTail())
	}
}

func clientFor(t *testing.T, h *harness.Harness, id harness.Identity) kubernetes.Interface {
	t.Helper()
	cfg, err := h.RestConfigFor(id)
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(cfg)
}
