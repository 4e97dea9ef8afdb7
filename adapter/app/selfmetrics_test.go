package app

import (
	"net/http"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestSelfMetricsNeedAuthorization: the adapter's own metrics on /metrics
// are authorized by the cluster (a SubjectAccessReview), as every path but
// the probes, so that the query and rule details they carry are not
// public; the probes answer anyone, because the kubelet probes without
// credentials.
func TestSelfMetricsNeedAuthorization(t *testing.T) {
	// Registered first so that it runs after the server has stopped. The
	// generic server's healthz "log" check starts one process-wide
	// wait.Forever goroutine on first use and never stops it.
	t.Cleanup(func() { goleak.VerifyNone(t, goleak.IgnoreAnyFunction("k8s.io/apimachinery/pkg/util/wait.Forever")) })
	cluster := newFakeCluster(t)
	s := serve(t, strings.TrimPrefix(cluster.URL, "https://"))

	tests := []struct {
		name     string
		admin    bool
		path     string
		wantCode int
		// wantReview: the refusal came from the cluster's answer.
		wantReview bool
		wantBody   string
	}{
		{name: "anonymous /metrics is forbidden", path: "/metrics", wantCode: http.StatusForbidden, wantReview: true},
		{name: "anonymous /healthz is allowed", path: "/healthz", wantCode: http.StatusOK},
		{name: "anonymous /livez is allowed", path: "/livez", wantCode: http.StatusOK},
		{name: "anonymous /readyz is allowed", path: "/readyz", wantCode: http.StatusOK},
		// The admin's success shows /metrics exists and holds the adapter's
		// metrics, so the refusals above are not for a missing path.
		{name: "system:masters reads the adapter's metrics", admin: true, path: "/metrics", wantCode: http.StatusOK, wantBody: "tidal_adapter_config_generation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, user := s.anonymous, "system:anonymous"
			if tt.admin {
				c, user = s.admin, "tester" // clientCerts' common name
			}
			cluster.reviewed("", "") // forget the reviews of earlier cases
			code, body := s.get(t, c, tt.path)
			if code != tt.wantCode {
				t.Fatalf("GET %s = %d %.300s, want %d", tt.path, code, body, tt.wantCode)
			}
			if tt.wantBody != "" && !strings.Contains(body, tt.wantBody) {
				t.Errorf("GET %s does not contain %s", tt.path, tt.wantBody)
			}
			if got := cluster.reviewed(user, tt.path); got != tt.wantReview {
				t.Errorf("SubjectAccessReview for %s on %s: %v, want %v", user, tt.path, got, tt.wantReview)
			}
		})
	}
}
