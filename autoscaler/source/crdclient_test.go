package source

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
)

// TestHAClientsProtocols lists HorizontalAutoscalers and writes a status
// through a TLS server that speaks HTTP/2 and HTTP/1.1, as kube-apiserver
// does: the list (and so the watch) goes over HTTP/2, the status write over
// HTTP/1.1 when the workers fit in the transport's idle connections, over
// HTTP/2 when they do not; both clients take from one rate limiter.
func TestHAClientsProtocols(t *testing.T) {
	var (
		mu     sync.Mutex
		proto  = map[string]string{}
		status string // the status write's method and request URI
	)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind := "list"
		if strings.HasSuffix(r.URL.Path, "/status") {
			kind = "status"
		}
		mu.Lock()
		proto[kind] = r.Proto
		if kind == "status" {
			status = r.Method + " " + r.URL.RequestURI()
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if kind == "list" {
			_, _ = w.Write([]byte(`{"apiVersion":"autoscaling.tidal.dev/v1alpha1","kind":"HorizontalAutoscalerList","metadata":{"resourceVersion":"1"},"items":[]}`))
			return
		}
		_, _ = w.Write([]byte(`{"apiVersion":"autoscaling.tidal.dev/v1alpha1","kind":"HorizontalAutoscaler","metadata":{"name":"web","namespace":"ns"}}`))
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL, QPS: 50, Burst: 100, TLSClientConfig: rest.TLSClientConfig{
		CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}),
	}}

	for _, tc := range []struct {
		name       string
		workers    int
		wantStatus string
	}{
		{"default workers write over HTTP/1.1", 5, "HTTP/1.1"},
		{"as many workers as idle connections", maxHTTP1StatusWriters, "HTTP/1.1"},
		{"more workers than idle connections stay on HTTP/2", maxHTTP1StatusWriters + 1, "HTTP/2.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clients, err := NewHorizontalAutoscalerClients(cfg, tc.workers)
			if err != nil {
				t.Fatal(err)
			}
			if clients.Status.GetRateLimiter() != clients.Watch.GetRateLimiter() {
				t.Error("the status writes have a rate limiter of their own; want the watch client's")
			}
			ctx := context.Background()
			list := &v1alpha1.HorizontalAutoscalerList{}
			if err := clients.Watch.Get().Resource(v1alpha1.Resource).Do(ctx).Into(list); err != nil {
				t.Fatal(err)
			}
			ha := &v1alpha1.HorizontalAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}}
			if err := CRDSource(clients, 0).UpdateStatus(ctx, haObject{ha}); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if proto["list"] != "HTTP/2.0" {
				t.Errorf("list over %q, want HTTP/2.0", proto["list"])
			}
			if proto["status"] != tc.wantStatus {
				t.Errorf("status write over %q, want %s", proto["status"], tc.wantStatus)
			}
			// The field manager names Tidal in the object's managedFields.
			if want := "PUT /apis/autoscaling.tidal.dev/v1alpha1/namespaces/ns/horizontalautoscalers/web/status?fieldManager=" + FieldManager; status != want {
				t.Errorf("status write %q, want %q", status, want)
			}
		})
	}
}
