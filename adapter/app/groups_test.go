package app

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	authorizationv1 "k8s.io/api/authorization/v1"
)

// served is an adapter run in-process by Config.Run, as
// TestRunWithoutCluster runs it.
type served struct {
	base string
	// anonymous sends no credentials; admin a client certificate of
	// system:masters, which is authorized without asking the cluster.
	anonymous, admin *http.Client
}

// get returns the status and body of GET path.
func (s *served) get(t *testing.T, c *http.Client, path string) (int, string) {
	t.Helper()
	resp, err := c.Get(s.base + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(body)
}

// serve runs the adapter with its cluster at cluster (host:port) and args
// after the flags TestRunWithoutCluster uses, waits until /readyz answers
// 200, and stops it when the test ends.
func serve(t *testing.T, cluster string, args ...string) *served {
	t.Helper()
	dir := t.TempDir()
	caFile := filepath.Join(dir, "client-ca.pem")
	clientCert := clientCerts(t, caFile)
	o := parse(t, append([]string{
		"--prometheus-url=http://prometheus.invalid:9090",
		"--kubeconfig=" + writeKubeconfig(t, dir, cluster),
		"--authentication-skip-lookup",
		"--client-ca-file=" + caFile,
		"--cert-dir=" + filepath.Join(dir, "certs"),
		"--bind-address=127.0.0.1",
	}, args...)...)
	cfg, ln := configOn(t, o)

	ctx, cancel := context.WithCancel(context.Background())
	var runErr error
	stopped := make(chan struct{})
	go func() { runErr = cfg.Run(ctx); close(stopped) }()

	anonTransport := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} // self-signed test certificate
	adminTransport := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{clientCert}}}
	s := &served{
		base:      "https://" + ln.Addr().String(),
		anonymous: &http.Client{Timeout: 5 * time.Second, Transport: anonTransport},
		admin:     &http.Client{Timeout: 5 * time.Second, Transport: adminTransport},
	}
	ready := false
	t.Cleanup(func() {
		cancel()
		select {
		case <-stopped:
			if ready && runErr != nil {
				t.Errorf("Run() = %v after cancel, want nil", runErr)
			}
		case <-time.After(30 * time.Second):
			t.Error("Run did not return within 30s of cancel")
		}
		anonTransport.CloseIdleConnections()
		adminTransport.CloseIdleConnections()
	})

	// The post-start hooks run after the port opens.
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := s.anonymous.Get(s.base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				ready = true
				return s
			}
		}
		select {
		case <-stopped:
			t.Fatalf("Run returned before the server was ready: %v", runErr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz not ready after 30s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// fakeCluster is a cluster API server that answers every
// SubjectAccessReview with "not allowed" and records them, and anything
// else at once with 404: the adapter's pod and node watches then fail
// without the client's connection-refused backoff, which outlives Run.
type fakeCluster struct {
	*httptest.Server

	mu      sync.Mutex
	reviews []authorizationv1.SubjectAccessReviewSpec
}

func newFakeCluster(t *testing.T) *fakeCluster {
	c := &fakeCluster{}
	c.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/apis/authorization.k8s.io/v1/subjectaccessreviews" {
			http.NotFound(w, r)
			return
		}
		var sar authorizationv1.SubjectAccessReview
		if err := json.NewDecoder(r.Body).Decode(&sar); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		c.reviews = append(c.reviews, sar.Spec)
		c.mu.Unlock()
		sar.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: false, Reason: "the test cluster allows no one"}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&sar)
	}))
	t.Cleanup(c.Close)
	return c
}

// reviewed reports whether the adapter asked the cluster whether user may
// get the non-resource path since the last call, and forgets the reviews.
func (c *fakeCluster) reviewed(user, path string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	reviews := c.reviews
	c.reviews = nil
	for _, s := range reviews {
		if s.User == user && s.NonResourceAttributes != nil && s.NonResourceAttributes.Path == path && s.NonResourceAttributes.Verb == "get" {
			return true
		}
	}
	return false
}

// resourceRules serve metrics.k8s.io. The template needs no cluster
// discovery to map resources, and with no custom or external rules there
// is nothing to discover, so the adapter is ready without Prometheus.
const resourceRules = `resourceRules:
  cpu:
    containerQuery: 'sum by (<<.GroupBy>>) (rate(container_cpu_usage_seconds_total{<<.LabelMatchers>>}[3m]))'
    nodeQuery: 'sum by (<<.GroupBy>>) (rate(node_cpu_usage_seconds_total{<<.LabelMatchers>>}[3m]))'
    resources: {template: "<<.Resource>>"}
    containerLabel: container
  memory:
    containerQuery: 'sum by (<<.GroupBy>>) (container_memory_working_set_bytes{<<.LabelMatchers>>})'
    nodeQuery: 'sum by (<<.GroupBy>>) (node_memory_working_set_bytes{<<.LabelMatchers>>})'
    resources: {template: "<<.Resource>>"}
    containerLabel: container
`

// TestEachAPIGroupCanBeSwitchedOff: each --enable-* flag set to false
// leaves its group out of the served discovery and its paths unserved,
// and leaves the other groups in, so a metrics-server or another adapter
// can own that group in the cluster.
func TestEachAPIGroupCanBeSwitchedOff(t *testing.T) {
	// Registered first so that it runs after every server has stopped. The
	// generic server's healthz "log" check starts one process-wide
	// wait.Forever goroutine on first use and never stops it.
	t.Cleanup(func() { goleak.VerifyNone(t, goleak.IgnoreAnyFunction("k8s.io/apimachinery/pkg/util/wait.Forever")) })
	const (
		custom   = "custom.metrics.k8s.io"
		external = "external.metrics.k8s.io"
		resource = "metrics.k8s.io"
	)
	versions := map[string][]string{custom: {"v1beta1", "v1beta2"}, external: {"v1beta1"}, resource: {"v1beta1"}}
	rules := writeFile(t, t.TempDir(), "rules.yaml", resourceRules)
	tests := []struct {
		name string
		flag string
		want []string
	}{
		{name: "all on", want: []string{custom, external, resource}},
		{name: "custom metrics off", flag: "--enable-custom-metrics=false", want: []string{external, resource}},
		{name: "external metrics off", flag: "--enable-external-metrics=false", want: []string{custom, resource}},
		{name: "resource metrics off", flag: "--enable-resource-metrics=false", want: []string{custom, external}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"--config=" + rules}
			if tt.flag != "" {
				args = append(args, tt.flag)
			}
			s := serve(t, strings.TrimPrefix(newFakeCluster(t).URL, "https://"), args...)

			code, body := s.get(t, s.admin, "/apis")
			if code != http.StatusOK {
				t.Fatalf("GET /apis = %d %s", code, body)
			}
			var list struct{ Groups []struct{ Name string } }
			if err := json.Unmarshal([]byte(body), &list); err != nil {
				t.Fatalf("GET /apis: %v: %s", err, body)
			}
			var got []string
			for _, g := range list.Groups {
				got = append(got, g.Name)
			}
			sort.Strings(got)
			want := append([]string(nil), tt.want...)
			sort.Strings(want)
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("/apis lists %v, want %v", got, want)
			}

			// The group's own paths follow discovery: a group left out of
			// /apis but still routed would answer the aggregator anyway.
			for group, vs := range versions {
				wantCode := http.StatusNotFound
				for _, w := range tt.want {
					if w == group {
						wantCode = http.StatusOK
					}
				}
				for _, path := range append([]string{"/apis/" + group}, prefixed("/apis/"+group+"/", vs)...) {
					if code, body := s.get(t, s.admin, path); code != wantCode {
						t.Errorf("GET %s = %d %.200s, want %d", path, code, body, wantCode)
					}
				}
			}
		})
	}
}

func prefixed(prefix string, ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = prefix + s
	}
	return out
}
