package explain

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/tidal-autoscaler/tidal/adapter/delegate"
)

// explain lists a delegate's metrics and the collisions with the rules,
// and says so when the delegate cannot be listed.
func TestExplainDelegate(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(metav1.APIResourceList{
			TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: "external.metrics.k8s.io/v1beta1",
			APIResources: []metav1.APIResource{{Name: "s0-prometheus-queue", Namespaced: true}, {Name: "queue_depth", Namespaced: true}},
		})
	}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	kc := &rest.Config{BearerToken: "t"}
	tests := []struct {
		name string
		url  string
		own  []string
		want []string
	}{
		{"a collision", srv.URL, []string{"queue_depth", "jobs_pending"}, []string{
			"external.metrics.k8s.io shared with " + srv.URL + ": it lists 2 metrics (s0-prometheus-queue, queue_depth); metrics no rule serves are asked there",
			"  served by both, answered by Tidal's rule: queue_depth",
		}},
		{"none", srv.URL, []string{"jobs_pending"}, []string{"  served by both: none"}},
		{"a delegate that does not answer", "https://127.0.0.1:1", nil, []string{"external.metrics.k8s.io shared with https://127.0.0.1:1: cannot list its metrics: "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := explainDelegate(&out, delegate.ExternalGroup, tt.url, ca, kc, 5*time.Second, tt.own); err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}
