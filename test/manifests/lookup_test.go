package manifests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregator "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	"k8s.io/utils/ptr"
)

// TestChartLooksUpAPIServices renders the chart against the real control
// plane (helm install --dry-run=server, which runs the chart's lookups):
// an APIService another server owns stops the install with what to do,
// and delegate.*Metrics=auto finds the previous owner in the APIService or
// in the ConfigMap an earlier release kept.
func TestChartLooksUpAPIServices(t *testing.T) {
	h := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const ns, release = "lookup", "lk"
	if _, err := h.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	agg := aggregator.NewForConfigOrDie(h.Admin).ApiregistrationV1().APIServices()
	// ensure makes sure the APIService exists and returns the Service it
	// names; one it created is deleted when the test ends.
	ensure := func(name, group, version, svcNS, svc string) *apiregistrationv1.ServiceReference {
		t.Helper()
		if cur, err := agg.Get(ctx, name, metav1.GetOptions{}); err == nil {
			return cur.Spec.Service
		}
		as := &apiregistrationv1.APIService{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: apiregistrationv1.APIServiceSpec{
				Group: group, Version: version, Service: &apiregistrationv1.ServiceReference{Namespace: svcNS, Name: svc, Port: ptr.To(int32(443))},
				InsecureSkipTLSVerify: true, GroupPriorityMinimum: 100, VersionPriority: 100,
			},
		}
		if _, err := agg.Create(ctx, as, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = agg.Delete(context.Background(), name, metav1.DeleteOptions{}) })
		return as.Spec.Service
	}
	helm := tool(t, "helm")
	env := helmEnv(t, "KUBECONFIG="+h.AdminKubeconfig)
	install := func(set ...string) (string, error) {
		args := []string{"install", release, chartDir(t), "--namespace", ns, "--dry-run=server"}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		return run(env, helm, args...)
	}

	t.Run("an APIService another server owns is not taken over", func(t *testing.T) {
		ensure("v1beta1.metrics.k8s.io", "metrics.k8s.io", "v1beta1", "kube-system", "metrics-server")
		cur, err := agg.Get(ctx, "v1beta1.metrics.k8s.io", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = install("apiServices.resource=true", "apiServices.custom=false", "apiServices.external=false")
		want := fmt.Sprintf("APIService v1beta1.metrics.k8s.io is served by %s/%s, not by this release's adapter", cur.Spec.Service.Namespace, cur.Spec.Service.Name)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "docs/migration.md") {
			t.Errorf("install = %v, want an error saying %q and what to do", err, want)
		}
	})
	t.Run("auto: the previous owner from its APIService", func(t *testing.T) {
		svc := ensure("v1beta1.custom.metrics.k8s.io", "custom.metrics.k8s.io", "v1beta1", "monitoring", "prometheus-adapter")
		// register=false: the APIServices stay as they are (the migration's
		// first step), which also keeps Helm from refusing to adopt them.
		out, err := install("delegate.customMetrics=auto", "apiServices.register=false")
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf(`"--delegate-custom-metrics=https://%s.%s.svc:%d"`, svc.Name, svc.Namespace, ptr.Deref(svc.Port, 443))
		if !strings.Contains(out, want) {
			t.Errorf("rendered without %s:\n%.2000s", want, out)
		}
	})
	t.Run("auto: the previous owner kept by an earlier release", func(t *testing.T) {
		const url = "https://keda-operator-metrics-apiserver.keda.svc:443"
		// As the earlier release left it: Helm's, holding the delegate.
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Name: release + "-tidal-adapter-delegate", Namespace: ns,
				Labels:      map[string]string{"app.kubernetes.io/managed-by": "Helm"},
				Annotations: map[string]string{"meta.helm.sh/release-name": release, "meta.helm.sh/release-namespace": ns},
			},
			Data: map[string]string{"external.url": url},
		}
		if _, err := h.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer func() {
			_ = h.Client.CoreV1().ConfigMaps(ns).Delete(context.Background(), cm.Name, metav1.DeleteOptions{})
		}()
		out, err := install("delegate.externalMetrics=auto", "apiServices.register=false")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, `"--delegate-external-metrics=`+url+`"`) {
			t.Errorf("rendered without --delegate-external-metrics=%s:\n%.2000s", url, out)
		}
	})
}
