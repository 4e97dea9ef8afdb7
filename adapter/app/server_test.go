package app

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/client-go/kubernetes"
)

// closedAddress returns a loopback address nothing listens on, standing in
// for a cluster that is not there.
func closedAddress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// configOn validates o and builds its Config, serving on a fresh loopback
// port (port 0, without a race for the port); Run closes the listener.
func configOn(t *testing.T, o *Options) (*Config, net.Listener) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o.SecureServing.Listener = ln
	if errs := o.Validate(); len(errs) > 0 {
		t.Fatalf("Validate() = %v", errs)
	}
	cfg, err := o.Config()
	if err != nil {
		t.Fatalf("Config() = %v", err)
	}
	return cfg, ln
}

func writeKubeconfig(t *testing.T, dir, server string) string {
	t.Helper()
	return writeFile(t, dir, "kubeconfig", fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://%s", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: t}
contexts:
- name: ctx
  context: {cluster: c, user: u}
current-context: ctx
`, server))
}

// clientCerts writes a CA to caFile and returns a client certificate it
// signed for a member of system:masters, a group the adapter authorizes
// without asking the cluster.
func clientCerts(t *testing.T, caFile string) tls.Certificate {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey, clientKey := newKey(), newKey()
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	clientTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "tester", Organization: []string{"system:masters"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	clientDER, err := x509.CreateCertificate(rand.Reader, clientTmpl, ca, &clientKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{clientDER}, PrivateKey: clientKey}
}

// TestRunWithoutCluster serves the adapter in-process against a cluster
// address where nothing listens: the generic server needs the cluster only
// for delegated authentication lookups (skipped) and SubjectAccessReviews
// (not made for the probes, nor for system:masters).
func TestRunWithoutCluster(t *testing.T) {
	// The generic server's healthz "log" check starts one process-wide
	// wait.Forever goroutine on first use and never stops it.
	defer goleak.VerifyNone(t, goleak.IgnoreAnyFunction("k8s.io/apimachinery/pkg/util/wait.Forever"))
	dir := t.TempDir()
	certDir := filepath.Join(dir, "certs")
	caFile := filepath.Join(dir, "client-ca.pem")
	clientCert := clientCerts(t, caFile)

	o := parse(t,
		"--prometheus-url=http://prometheus.invalid:9090",
		"--kubeconfig="+writeKubeconfig(t, dir, closedAddress(t)),
		"--authentication-skip-lookup",
		"--client-ca-file="+caFile,
		"--cert-dir="+certDir,
		"--bind-address=127.0.0.1",
	)
	cfg, ln := configOn(t, o)
	for _, f := range []string{"tidal-adapter.crt", "tidal-adapter.key"} {
		if _, err := os.Stat(filepath.Join(certDir, f)); err != nil {
			t.Errorf("self-signed certificate not written to --cert-dir: %v", err)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cfg.Run(ctx) }()

	base := "https://" + ln.Addr().String()
	anonymous := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // self-signed test certificate
	}}
	admin := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{clientCert}},
	}}
	get := func(c *http.Client, path string) (int, string, error) {
		resp, err := c.Get(base + path)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}

	// Wait for readiness: the post-start hooks run after the port opens.
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body, err := get(anonymous, "/readyz")
		if err == nil && code == http.StatusOK {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("Run returned before the server was ready: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz not ready after 30s: code %d, err %v, body %s", code, err, body)
		}
		time.Sleep(100 * time.Millisecond)
	}

	for _, path := range []string{"/healthz", "/livez", "/readyz"} {
		if code, body, err := get(anonymous, path); err != nil || code != http.StatusOK {
			t.Errorf("anonymous GET %s = %d %q, %v; want 200", path, code, body, err)
		}
	}

	// Both metrics APIs are registered and answer from the empty provider.
	code, body, err := get(admin, "/apis")
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /apis = %d %q, %v", code, body, err)
	}
	for _, group := range []string{"custom.metrics.k8s.io", "external.metrics.k8s.io"} {
		if !strings.Contains(body, `"name":"`+group+`"`) {
			t.Errorf("/apis does not list %s: %s", group, body)
		}
	}
	// No profiling without --profiling, even for system:masters.
	if code, _, err := get(admin, "/debug/pprof/"); err != nil || code != http.StatusNotFound {
		t.Errorf("GET /debug/pprof/ = %d, %v; want 404", code, err)
	}
	notFound := []struct{ path, metric string }{
		{"/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/http_requests", "http_requests"},
		{"/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_depth", "queue_depth"},
	}
	for _, nf := range notFound {
		code, body, err := get(admin, nf.path)
		if err != nil {
			t.Fatalf("GET %s: %v", nf.path, err)
		}
		var status struct{ Reason, Message string }
		_ = json.Unmarshal([]byte(body), &status)
		if code != http.StatusNotFound || status.Reason != "NotFound" || !strings.Contains(status.Message, nf.metric) {
			t.Errorf("GET %s = %d %s; want 404 NotFound naming %s", nf.path, code, body, nf.metric)
		}
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run() = %v after cancel, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30s of cancel")
	}
	if _, err := anonymous.Get(base + "/healthz"); err == nil {
		t.Error("server still answers after Run returned")
	}
}

// TestConfigWithoutCluster documents what the adapter does with no cluster
// at all: it refuses to start and says which flag to set.
func TestConfigWithoutCluster(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	o := parse(t, "--prometheus-url=http://prometheus:9090")
	if errs := o.Validate(); len(errs) > 0 {
		t.Fatalf("Validate() = %v", errs)
	}
	_, err := o.Config()
	if err == nil || !strings.Contains(err.Error(), "--kubeconfig") {
		t.Fatalf("Config() = %v, want an error telling to set --kubeconfig", err)
	}
}

// TestKubeClientDoesNotAskForGzip: the adapter's cluster client sends no
// Accept-Encoding: gzip, so the API server does not compress the pod and
// node lists and watch streams its informers read.
func TestKubeClientDoesNotAskForGzip(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case got <- r.Header.Get("Accept-Encoding"):
		default:
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"major":"1","minor":"37","gitVersion":"v1.37.0"}`)
	}))
	defer srv.Close()
	dir := t.TempDir()
	o := parse(t,
		"--prometheus-url=http://prometheus.invalid:9090",
		"--kubeconfig="+writeKubeconfig(t, dir, strings.TrimPrefix(srv.URL, "https://")),
		"--authentication-skip-lookup",
		"--cert-dir="+filepath.Join(dir, "certs"),
		"--bind-address=127.0.0.1",
	)
	// A loopback listener on port 0: the default, 0.0.0.0:6443, is not
	// the test's to take (another test binary may hold it).
	cfg, ln := configOn(t, o)
	defer ln.Close()
	client, err := kubernetes.NewForConfig(cfg.Kube)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Discovery().ServerVersion(); err != nil {
		t.Fatalf("GET /version: %v", err)
	}
	if enc := <-got; enc != "" {
		t.Errorf("Accept-Encoding %q, want none", enc)
	}
}

// TestRunRejectsBadRuleFile: a rule file that does not load stops the
// adapter at start-up, with the file and every problem in the error, the
// parser's and the naming checks' alike (cli.Run then logs it and exits
// 1). The problems chosen need no cluster to find.
func TestRunRejectsBadRuleFile(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "rules.yaml", `rules:
- seriesQuery: 'http_requests_total{pod!=""}'
  seriesFilters:
  - is: "^http_(.*"
  resources:
    overrides:
      namespace: {resource: namespace}
      pod: {resource: pod}
      kubernetes_pod_name: {resource: pods}
  metricsQuery: sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)
`)
	o := parse(t,
		"--prometheus-url=http://prometheus.invalid:9090",
		"--kubeconfig="+writeKubeconfig(t, dir, closedAddress(t)),
		"--authentication-skip-lookup",
		"--cert-dir="+filepath.Join(dir, "certs"),
		"--bind-address=127.0.0.1",
		"--config="+rules,
	)
	cfg, ln := configOn(t, o)
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := cfg.Run(ctx)
	if err == nil {
		t.Fatal("Run() with a bad rule file = nil, want an error")
	}
	wants := []struct{ name, text string }{
		{"the flag and file", "--config " + rules + ":"},
		{"the parser's problem", rules + ":4:9: rules[0].seriesFilters[0].is is not a valid regular expression"},
		{"the naming check's problem", rules + `:8:23: rules[0].resources.overrides.pod: unknown resource "pod"`},
	}
	for _, w := range wants {
		t.Run(w.name, func(t *testing.T) {
			if !strings.Contains(err.Error(), w.text) {
				t.Errorf("Run() = %q, want it to contain %q", err, w.text)
			}
		})
	}
}
