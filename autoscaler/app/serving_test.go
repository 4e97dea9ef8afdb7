package app

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
)

// scraperToken is the one bearer token the fake cluster knows: the
// scraper's, whom it authorizes to get /metrics and /debug/pprof/.
const scraperToken = "scraper-token"

// fakeCluster answers TokenReviews (scraperToken is the user scraper) and
// SubjectAccessReviews (scraper may get /metrics and /debug/pprof/*, no
// one else anything) and records the reviews; anything else is a 404.
type fakeCluster struct {
	*httptest.Server

	mu      sync.Mutex
	reviews []authorizationv1.SubjectAccessReviewSpec
}

func newFakeCluster(t *testing.T) *fakeCluster {
	c := &fakeCluster{}
	c.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var out any
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/apis/authentication.k8s.io/v1/tokenreviews":
			var tr authenticationv1.TokenReview
			if err := json.NewDecoder(r.Body).Decode(&tr); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			if tr.Spec.Token == scraperToken {
				tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true,
					User: authenticationv1.UserInfo{Username: "scraper", Groups: []string{"system:authenticated"}}}
			}
			out = &tr
		case r.Method == http.MethodPost && r.URL.Path == "/apis/authorization.k8s.io/v1/subjectaccessreviews":
			var sar authorizationv1.SubjectAccessReview
			if err := json.NewDecoder(r.Body).Decode(&sar); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			c.mu.Lock()
			c.reviews = append(c.reviews, sar.Spec)
			c.mu.Unlock()
			nr := sar.Spec.NonResourceAttributes
			sar.Status.Allowed = sar.Spec.User == "scraper" && nr != nil && nr.Verb == "get" &&
				(nr.Path == "/metrics" || strings.HasPrefix(nr.Path, "/debug/pprof/"))
			if !sar.Status.Allowed {
				sar.Status.Reason = "the test cluster allows only the scraper"
			}
			out = &sar
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(c.Close)
	return c
}

// reviewed reports whether the cluster was asked whether user may get
// path since the last call, and forgets the reviews.
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

// get GETs url with token ("" for none) and returns the status and body.
func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} // the self-signed serving certificate
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestMetricsNeedAuthorization: /metrics is served on the secure port only,
// to whom the cluster authenticates (a TokenReview) and authorizes (a
// SubjectAccessReview for get on the non-resource URL), as
// kube-controller-manager serves its own; the probes answer anyone, on
// both ports, because the kubelet probes without credentials; the plain
// health port serves nothing else.
func TestMetricsNeedAuthorization(t *testing.T) {
	cluster := newFakeCluster(t)
	cfg := newConfigFor(t, cluster.URL, "--leader-elect=false", "--profiling")
	rec := &fakeReconciler{}
	rec.synced.Store(true)
	cfg.Reconciler = rec
	cancel, done := start(t, cfg)
	t.Cleanup(cluster.Close) // before start's goroutine check
	defer func() {
		cancel()
		if err := wait(t, done, 10*time.Second); err != nil {
			t.Errorf("Run() = %v after cancel", err)
		}
	}()
	probe(t, cfg, "/readyz")
	secure := "https://" + cfg.SecureServing.Listener.Addr().String()
	plain := "http://" + cfg.HealthListener.Addr().String()

	tests := []struct {
		name, url, token string
		wantCode         int
		// wantReview: the cluster was asked (for the scraper or anonymous).
		wantReview string
		wantBody   string
	}{
		{name: "anonymous /metrics is forbidden", url: secure + "/metrics", wantCode: http.StatusForbidden, wantReview: "system:anonymous"},
		{name: "an unknown token is unauthorized", url: secure + "/metrics", token: "stolen", wantCode: http.StatusUnauthorized},
		{name: "anonymous /debug/pprof/ is forbidden", url: secure + "/debug/pprof/", wantCode: http.StatusForbidden, wantReview: "system:anonymous"},
		{name: "the scraper reads /metrics", url: secure + "/metrics", token: scraperToken, wantCode: http.StatusOK, wantReview: "scraper", wantBody: "go_goroutines"},
		{name: "the scraper reads /debug/pprof/", url: secure + "/debug/pprof/", token: scraperToken, wantCode: http.StatusOK, wantReview: "scraper"},
		{name: "anonymous /healthz on the secure port", url: secure + "/healthz", wantCode: http.StatusOK},
		{name: "anonymous /readyz on the secure port", url: secure + "/readyz", wantCode: http.StatusOK},
		{name: "anonymous /livez on the secure port", url: secure + "/livez", wantCode: http.StatusOK},
		{name: "anonymous /healthz on the health port", url: plain + "/healthz", wantCode: http.StatusOK},
		{name: "anonymous /readyz on the health port", url: plain + "/readyz", wantCode: http.StatusOK},
		{name: "no /metrics on the health port", url: plain + "/metrics", wantCode: http.StatusNotFound},
		{name: "no /debug/pprof/ on the health port", url: plain + "/debug/pprof/", wantCode: http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cluster.reviewed("", "") // forget earlier reviews
			code, body := get(t, tt.url, tt.token)
			if code != tt.wantCode {
				t.Fatalf("GET %s = %d %.300s, want %d", tt.url, code, body, tt.wantCode)
			}
			if tt.wantBody != "" && !strings.Contains(body, tt.wantBody) {
				t.Errorf("GET %s does not contain %s", tt.url, tt.wantBody)
			}
			path := tt.url[strings.Index(tt.url[len("https://"):], "/")+len("https://"):]
			if tt.wantReview != "" && !cluster.reviewed(tt.wantReview, path) {
				t.Errorf("no SubjectAccessReview for %s on %s", tt.wantReview, path)
			}
			if tt.wantReview == "" && cluster.reviewed("system:anonymous", path) {
				t.Errorf("a SubjectAccessReview for a probe path %s", path)
			}
		})
	}
}

// TestSecurePortOff: --secure-port=0 serves no /metrics anywhere; the
// probes still answer on the health port.
func TestSecurePortOff(t *testing.T) {
	cfg := newConfig(t, "--leader-elect=false", "--secure-port=0")
	if cfg.SecureServing != nil {
		t.Fatal("--secure-port=0 still serves")
	}
	cfg.Reconciler = &fakeReconciler{}
	cancel, done := start(t, cfg)
	probe(t, cfg, "/healthz")
	if code := status(t, cfg, "/metrics"); code != http.StatusNotFound {
		t.Errorf("/metrics on the health port = %d, want 404", code)
	}
	cancel()
	if err := wait(t, done, 10*time.Second); err != nil {
		t.Error(err)
	}
}
