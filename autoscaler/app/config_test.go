package app

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestClientsDoNotAskForGzip: the autoscaler's clients send no
// Accept-Encoding: gzip (Go's transport adds it unless told not to), so
// the API server does not compress the lists and watch streams they read.
func TestClientsDoNotAskForGzip(t *testing.T) {
	var (
		mu        sync.Mutex
		encodings = map[string]string{}
	)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		encodings[r.URL.Path] = r.Header.Get("Accept-Encoding")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/version":
			fmt.Fprint(w, `{"major":"1","minor":"37","gitVersion":"v1.37.0"}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
		}
	}))
	defer srv.Close()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: %q, insecure-skip-tls-verify: true}
contexts:
- name: ctx
  context: {cluster: c}
current-context: ctx
`, srv.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	o := parse(t, "--kubeconfig="+kubeconfig, "--health-probe-bind-address=127.0.0.1:0")
	cfg, err := o.Config()
	if err != nil {
		t.Fatalf("Config() = %v", err)
	}
	defer cfg.HealthListener.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cfg.Client.Discovery().ServerVersion(); err != nil {
		t.Fatalf("GET /version: %v", err)
	}
	// A 404 is fine: only the request's headers matter.
	_, _ = cfg.LeaderElectionClient.CoordinationV1().Leases("tidal-system").Get(ctx, "tidal-autoscaler", metav1.GetOptions{})

	mu.Lock()
	defer mu.Unlock()
	for _, path := range []string{"/version", "/apis/coordination.k8s.io/v1/namespaces/tidal-system/leases/tidal-autoscaler"} {
		got, ok := encodings[path]
		if !ok {
			t.Errorf("no request to %s", path)
			continue
		}
		if got != "" {
			t.Errorf("%s: Accept-Encoding %q, want none", path, got)
		}
	}
}
