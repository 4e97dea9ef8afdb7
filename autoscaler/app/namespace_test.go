package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestNamespaceRestrictsTheInformers: with --namespace the autoscaler
// lists and watches autoscalers and pods in that namespace only, so that
// a Role there is all it needs; without, across the cluster.
func TestNamespaceRestrictsTheInformers(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string // path prefixes every list of these kinds must have
	}{
		// crd mode also lists HPAs, for the other-writer guard.
		{name: "--namespace", args: []string{"--namespace=team-a"},
			want: []string{"/api/v1/namespaces/team-a/pods", "/apis/autoscaling.tidal.dev/v1alpha1/namespaces/team-a/horizontalautoscalers",
				"/apis/autoscaling/v2/namespaces/team-a/horizontalpodautoscalers"}},
		{name: "native mode", args: []string{"--namespace=team-a", "--mode=native"},
			want: []string{"/api/v1/namespaces/team-a/pods", "/apis/autoscaling/v2/namespaces/team-a/horizontalpodautoscalers"}},
		{name: "cluster-wide by default",
			want: []string{"/api/v1/pods", "/apis/autoscaling.tidal.dev/v1alpha1/horizontalautoscalers", "/apis/autoscaling/v2/horizontalpodautoscalers"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				mu    sync.Mutex
				paths []string
			)
			srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				paths = append(paths, r.URL.Path)
				mu.Unlock()
				http.NotFound(w, r)
			}))
			defer srv.Close()
			cfg := newConfigFor(t, srv.URL, append([]string{"--leader-elect=false", "--secure-port=0"}, tc.args...)...)
			cfg.HealthListener.Close()

			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- cfg.Reconciler.Run(ctx) }()
			seen := func() []string {
				mu.Lock()
				defer mu.Unlock()
				return slices.Clone(paths)
			}
			all := func(prefix string) bool {
				return slices.ContainsFunc(seen(), func(p string) bool { return strings.HasPrefix(p, prefix) })
			}
			for deadline := time.Now().Add(10 * time.Second); slices.ContainsFunc(tc.want, func(w string) bool { return !all(w) }); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					break
				}
			}
			cancel()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the controller did not stop")
			}
			for _, w := range tc.want {
				if !all(w) {
					t.Errorf("no list or watch of %s; requests: %q", w, seen())
				}
			}
			for _, p := range seen() {
				kind := p[strings.LastIndex(p, "/")+1:]
				if kind != "pods" && kind != "horizontalautoscalers" && kind != "horizontalpodautoscalers" {
					continue
				}
				if !slices.ContainsFunc(tc.want, func(w string) bool { return p == w }) {
					t.Errorf("request to %s, want only %q", p, tc.want)
				}
			}
		})
	}
}

// TestRunnerRunsAgain: a replica that lost the lease and won it back runs
// the controller again with informers of its own; an informer factory
// once shut down would start nothing, and the second term would never
// list pods.
func TestRunnerRunsAgain(t *testing.T) {
	var (
		mu    sync.Mutex
		lists int
	)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/pods" && r.URL.Query().Get("watch") == "" {
			mu.Lock()
			lists++
			mu.Unlock()
		}
		http.NotFound(w, r)
	}))
	defer srv.Close()
	cfg := newConfigFor(t, srv.URL, "--leader-elect=false", "--secure-port=0")
	cfg.HealthListener.Close()
	podLists := func() int {
		mu.Lock()
		defer mu.Unlock()
		return lists
	}
	for term := 1; term <= 2; term++ {
		before := podLists()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- cfg.Reconciler.Run(ctx) }()
		for deadline := time.Now().Add(10 * time.Second); podLists() == before; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Errorf("term %d: no pod list within 10s", term)
				break
			}
		}
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("term %d: Run() = %v", term, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("term %d: the controller did not stop", term)
		}
	}
}
