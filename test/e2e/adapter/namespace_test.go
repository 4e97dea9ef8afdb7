package adapter

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tidal-autoscaler/tidal/test/harness"
)

// TestOneNamespace runs a second adapter with --namespace=e2e as a service
// account whose object reads are bound by a RoleBinding in e2e only (what
// the chart's adapter.watchNamespace installs), and reads it at its port
// as the HPA does: it serves the pods of e2e (so it needs no cluster-wide
// list or watch), answers another namespace and lists across namespaces
// with a 403 naming the flag, and its metrics.k8s.io discovery has no
// nodes.
func TestOneNamespace(t *testing.T) {
	h := need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a, err := h.StartAdapter(ctx, harness.AdapterOptions{
		Binary: env.tidal, RuleFile: env.ruleFile, Namespace: ns,
		Args: []string{"--metrics-relist-interval=5s", "--query-cache-ttl=0"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Process.Stop(10 * time.Second) }()
	cfg, err := h.RestConfigFor(harness.HPAServiceAccount)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Host = a.URL("")
	cfg.TLSClientConfig.CAData, cfg.TLSClientConfig.CAFile = h.CA.CertPEM, ""
	c := client(t, cfg)
	base := a.URL("")

	// Discovery lists the metric once the first relist ran.
	pods := "/apis/custom.metrics.k8s.io/v1beta2/namespaces/" + ns + "/pods/*/http_requests_per_second?labelSelector=app%3Dweb"
	if err := harness.WaitReady(ctx, a.Process, "pods/* in "+ns, time.Minute, func(context.Context) error {
		code, body := get(t, c, base, pods)
		if code != http.StatusOK {
			return fmt.Errorf("%d %s", code, body)
		}
		var l list
		if err := json.Unmarshal(body, &l); err != nil {
			return err
		}
		if len(l.Items) != len(env.pods) {
			return fmt.Errorf("%d items: %s", len(l.Items), body)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	code, body := get(t, c, base, "/apis/metrics.k8s.io/v1beta1/namespaces/"+ns+"/pods")
	if code != http.StatusOK {
		t.Errorf("PodMetrics in %s: %d %s", ns, code, body)
	}

	for _, path := range []string{
		"/apis/custom.metrics.k8s.io/v1beta2/namespaces/other/pods/*/http_requests_per_second",
		"/apis/metrics.k8s.io/v1beta1/namespaces/other/pods",
		"/apis/metrics.k8s.io/v1beta1/pods",
	} {
		code, body := get(t, c, base, path)
		var st metav1.Status
		_ = json.Unmarshal(body, &st)
		if code != http.StatusForbidden || !strings.Contains(st.Message, "--namespace="+ns) {
			t.Errorf("GET %s = %d %s, want 403 naming --namespace=%s", path, code, body, ns)
		}
	}
	// Its discovery lists no nodes (a request for them would be refused
	// by RBAC first for this identity, which may not list nodes).
	code, body = get(t, c, base, "/apis/metrics.k8s.io/v1beta1")
	var resources metav1.APIResourceList
	if err := json.Unmarshal(body, &resources); code != http.StatusOK || err != nil {
		t.Fatalf("metrics.k8s.io discovery: %d %s (%v)", code, body, err)
	}
	for _, r := range resources.APIResources {
		if r.Name == "nodes" {
			t.Errorf("metrics.k8s.io discovery lists nodes: an adapter of one namespace serves no NodeMetrics")
		}
	}
	// Its log shows no refused read: nothing was listed outside e2e.
	log, err := os.ReadFile(a.Process.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(log), "is forbidden") {
		t.Errorf("the adapter was refused a read; log %s", a.Process.LogPath())
	}
}
