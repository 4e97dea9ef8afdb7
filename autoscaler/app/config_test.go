package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
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
	o := parse(t, "--kubeconfig="+kubeconfig, "--health-probe-bind-address=127.0.0.1:0", "--secure-port=0")
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

// TestKubeAPITimeout: a request to an API server that never answers fails
// after --kube-api-timeout instead of holding a worker, while a watch
// stays open longer than that (informers must not be cut off).
func TestKubeAPITimeout(t *testing.T) {
	gotGet := make(chan struct{})
	released := make(chan struct{})
	t.Cleanup(func() { close(released) })
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		pod := func(name string) string {
			return fmt.Sprintf(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":%q,"namespace":"ns","resourceVersion":"1"}}`, name)
		}
		switch {
		case r.URL.Query().Get("watch") == "true":
			fmt.Fprintf(w, `{"type":"ADDED","object":%s}`+"\n", pod("first"))
			w.(http.Flusher).Flush()
			select {
			case <-gotGet: // the GET has failed: the watch outlived the timeout
			case <-r.Context().Done():
				return
			}
			fmt.Fprintf(w, `{"type":"ADDED","object":%s}`+"\n", pod("second"))
			w.(http.Flusher).Flush()
			select {
			case <-released:
			case <-r.Context().Done():
			}
		case r.URL.Path == "/api/v1/namespaces/ns/pods/held":
			// An API server that hangs; answers after 5 s in case the
			// client waits that long, so that the test fails rather than
			// hangs. When the client gives up first the handler aborts:
			// returning would send an empty 200, which could reach the
			// client before its own timeout error does.
			select {
			case <-r.Context().Done():
				panic(http.ErrAbortHandler)
			case <-time.After(5 * time.Second):
				fmt.Fprint(w, pod("held"))
			}
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
	o := parse(t, "--kubeconfig="+kubeconfig, "--health-probe-bind-address=127.0.0.1:0", "--secure-port=0", "--kube-api-timeout=200ms")
	cfg, err := o.Config()
	if err != nil {
		t.Fatalf("Config() = %v", err)
	}
	defer cfg.HealthListener.Close()
	pods := cfg.Client.CoreV1().Pods("ns")

	w, err := pods.Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()
	next := func() string {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return "the watch ended"
			}
			if p, ok := ev.Object.(*corev1.Pod); ok {
				return p.Name
			}
			return fmt.Sprintf("%s %T", ev.Type, ev.Object)
		case <-time.After(10 * time.Second):
			return "no event in 10 s"
		}
	}
	if got := next(); got != "first" {
		t.Fatalf("watch: %s, want pod first", got)
	}

	start := time.Now()
	_, err = pods.Get(context.Background(), "held", metav1.GetOptions{})
	t.Logf("GET returned after %v: %v", time.Since(start), err)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("GET of a request the server holds: err = %v, want the request timeout", err)
	}
	close(gotGet)
	if got := next(); got != "second" {
		t.Errorf("watch after the request timeout: %s, want pod second", got)
	}
}

// TestQueryValue: queryValue answers as url.ParseQuery(query).Get(key)
// does, and reads a plain query without allocating.
func TestQueryValue(t *testing.T) {
	tests := []struct{ name, query string }{
		{"empty", ""},
		{"watch", "watch=true"},
		{"client-go's watch", "allowWatchBookmarks=true&resourceVersion=123&timeout=5m21s&timeoutSeconds=321&watch=true"},
		{"a list", "limit=500&resourceVersion=0"},
		{"the first of two", "watch=1&watch=false"},
		{"no value", "watch"},
		{"empty value", "watch=&x=1"},
		{"empty pairs", "&&watch=true&"},
		{"a longer key", "watchers=true"},
		{"escaped key", "wat%63h=true"},
		{"escaped value", "watch=tru%65"},
		{"plus", "watch=a+b"},
		{"semicolon", "x=1;watch=true&watch=1"},
		{"bad escape", "watch=%zz&watch=true"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, _ := url.ParseQuery(tt.query)
			if got, want := queryValue(tt.query, "watch"), v.Get("watch"); got != want {
				t.Errorf("queryValue(%q) = %q, want %q", tt.query, got, want)
			}
		})
	}
	plain := tests[2].query
	if n := testing.AllocsPerRun(100, func() { queryValue(plain, "watch") }); n != 0 {
		t.Errorf("a plain query allocated %v times, want 0", n)
	}
}
