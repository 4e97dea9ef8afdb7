package source

import (
	"cmp"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	goruntime "runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
)

// seen is what a protocolServer saw of the last list and status write.
type seen struct {
	mu          sync.Mutex
	proto       map[string]string // "list" or "status": the request's protocol
	status      string            // the status write's method and request URI
	contentType string            // the status write's
	accept      string            // the status write's Accept header
	body        []byte            // the status write's
}

// protocolServer is a TLS server that speaks HTTP/2 and HTTP/1.1, as
// kube-apiserver does. It answers a list with an empty
// HorizontalAutoscalerList and a status write with statusBody, and cfg
// reaches it.
func protocolServer(t *testing.T, statusBody string) (*rest.Config, *seen) {
	t.Helper()
	s := &seen{proto: map[string]string{}}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind := "list"
		if strings.HasSuffix(r.URL.Path, "/status") {
			kind = "status"
		}
		s.mu.Lock()
		s.proto[kind] = r.Proto
		if kind == "status" {
			s.status = r.Method + " " + r.URL.RequestURI()
			s.contentType = r.Header.Get("Content-Type")
			s.accept = r.Header.Get("Accept")
			s.body, _ = io.ReadAll(r.Body)
		}
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if kind == "list" {
			_, _ = w.Write([]byte(`{"apiVersion":"autoscaling.tidal.dev/v1alpha1","kind":"HorizontalAutoscalerList","metadata":{"resourceVersion":"1"},"items":[]}`))
			return
		}
		_, _ = w.Write([]byte(statusBody))
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL, QPS: 50, Burst: 100, TLSClientConfig: rest.TLSClientConfig{
		CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}),
	}}, s
}

// statusProtocolCases are the worker counts either side of client-go's
// idle connections per host, with the protocol the status writes use.
var statusProtocolCases = []struct {
	name       string
	workers    int
	wantStatus string
}{
	{"default workers write over HTTP/1.1", 5, "HTTP/1.1"},
	{"as many workers as idle connections", maxHTTP1StatusWriters, "HTTP/1.1"},
	{"more workers than idle connections stay on HTTP/2", maxHTTP1StatusWriters + 1, "HTTP/2.0"},
}

// TestHAClientsProtocols lists HorizontalAutoscalers and writes a status:
// the list (and so the watch) goes over HTTP/2, the status write over
// HTTP/1.1 when the workers fit in the transport's idle connections, over
// HTTP/2 when they do not; both take from one rate limiter, the status
// writes waiting on it themselves (throttle). The write sends the object
// without its spec and asks for its metadata alone as the answer.
func TestHAClientsProtocols(t *testing.T) {
	cfg, seen := protocolServer(t, `{"apiVersion":"autoscaling.tidal.dev/v1alpha1","kind":"HorizontalAutoscaler","metadata":{"name":"web","namespace":"ns"}}`)
	for _, tc := range statusProtocolCases {
		t.Run(tc.name, func(t *testing.T) {
			clients, err := NewHorizontalAutoscalerClients(cfg, tc.workers, nil)
			if err != nil {
				t.Fatal(err)
			}
			if clients.StatusLimiter != clients.Watch.GetRateLimiter() || clients.Status.GetRateLimiter() != nil {
				t.Error("the status writes have a rate limiter of their own; want them to wait on the watch client's, their client on none")
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
			seen.mu.Lock()
			defer seen.mu.Unlock()
			if seen.proto["list"] != "HTTP/2.0" {
				t.Errorf("list over %q, want HTTP/2.0", seen.proto["list"])
			}
			if seen.proto["status"] != tc.wantStatus {
				t.Errorf("status write over %q, want %s", seen.proto["status"], tc.wantStatus)
			}
			// The field manager names Tidal in the object's managedFields.
			if want := "PUT /apis/autoscaling.tidal.dev/v1alpha1/namespaces/ns/horizontalautoscalers/web/status?fieldManager=" + FieldManager; seen.status != want {
				t.Errorf("status write %q, want %q", seen.status, want)
			}
			if want := "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1," +
				"application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"; seen.accept != want {
				t.Errorf("status write accepts %q, want %q (the metadata alone in protobuf, else in JSON, else the object)", seen.accept, want)
			}
			if seen.contentType != runtime.ContentTypeJSON {
				t.Errorf("status write sent %q, want %s", seen.contentType, runtime.ContentTypeJSON)
			}
			checkHAStatusBody(t, seen.body)
		})
	}
}

// checkHAStatusBody fails t unless body is a HorizontalAutoscaler status
// write's: the kind, the metadata and the status, and no spec (the
// apiserver keeps the stored one).
func checkHAStatusBody(t *testing.T, body []byte) {
	t.Helper()
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("status write body %q: %v", body, err)
	}
	var members []string
	for k := range doc {
		members = append(members, k)
	}
	slices.Sort(members)
	if want := []string{"apiVersion", "kind", "metadata", "status"}; !slices.Equal(members, want) {
		t.Errorf("status write body has %q, want %q (no spec): %s", members, want, body)
	}
	if string(doc["apiVersion"]) != `"autoscaling.tidal.dev/v1alpha1"` || string(doc["kind"]) != `"HorizontalAutoscaler"` {
		t.Errorf("status write body is a %s %s, want an autoscaling.tidal.dev/v1alpha1 HorizontalAutoscaler", doc["apiVersion"], doc["kind"])
	}
}

// TestHPAStatusWriterProtocols writes an HPA's status as native mode does:
// in protobuf, over HTTP/1.1 when the workers fit in the transport's idle
// connections, waiting on the rate limiter given, and without decoding the
// answer (here one no decoder would take).
func TestHPAStatusWriterProtocols(t *testing.T) {
	cfg, seen := protocolServer(t, `not an object`)
	cfg.ContentType = runtime.ContentTypeProtobuf
	limiter := flowcontrol.NewTokenBucketRateLimiter(50, 100)
	for _, tc := range statusProtocolCases {
		t.Run(tc.name, func(t *testing.T) {
			w, err := NewHPAStatusWriter(cfg, limiter, tc.workers)
			if err != nil {
				t.Fatal(err)
			}
			if put := w.(restHPAWriter).put; put.throttle.limiter != limiter || put.client.GetRateLimiter() != nil {
				t.Error("the status writes have a rate limiter of their own; want them to wait on the one given, their client on none")
			}
			hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}}
			if err := w.UpdateStatus(context.Background(), hpa); err != nil {
				t.Fatal(err)
			}
			seen.mu.Lock()
			defer seen.mu.Unlock()
			if seen.proto["status"] != tc.wantStatus {
				t.Errorf("status write over %q, want %s", seen.proto["status"], tc.wantStatus)
			}
			if want := "PUT /apis/autoscaling/v2/namespaces/ns/horizontalpodautoscalers/web/status?fieldManager=" + FieldManager; seen.status != want {
				t.Errorf("status write %q, want %q", seen.status, want)
			}
			if seen.contentType != runtime.ContentTypeProtobuf {
				t.Errorf("status write sent %q, want %s", seen.contentType, runtime.ContentTypeProtobuf)
			}
			if want := runtime.ContentTypeProtobuf + partialMetadata + "," + runtime.ContentTypeProtobuf; seen.accept != want {
				t.Errorf("status write accepts %q, want %q (the metadata alone, else the object)", seen.accept, want)
			}
		})
	}
}

// TestMetadataAnswer: a status write asks for each media type its client
// accepts as PartialObjectMetadata first, then for the types themselves
// (what errors come in, and what a server refusing the transform sends).
func TestMetadataAnswer(t *testing.T) {
	for _, tc := range []struct{ name, accept, want string }{
		{"json", "application/json", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"},
		{"protobuf then json", "application/vnd.kubernetes.protobuf,application/json",
			"application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1," +
				"application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1," +
				"application/vnd.kubernetes.protobuf,application/json"},
		{"spaces after commas", "application/vnd.kubernetes.protobuf, application/json",
			"application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1," +
				"application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1," +
				"application/vnd.kubernetes.protobuf, application/json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := metadataAnswer(tc.accept); got != tc.want {
				t.Errorf("metadataAnswer(%q) = %q, want %q", tc.accept, got, tc.want)
			}
		})
	}
}

// TestStatusWriteKeepsNoAnswer: a status write drains the apiserver's
// answer without keeping it (Do's io.ReadAll grew a buffer as large as the
// object for every write), and a refused write is the Status error.
func TestStatusWriteKeepsNoAnswer(t *testing.T) {
	const answer = 256 << 10
	object := []byte(`{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","metadata":{"name":"web","annotations":{"a":"` + strings.Repeat("x", answer) + `"}}}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(r.URL.Path, "/namespaces/conflict/") {
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Conflict","code":409,"message":"the object has been modified"}`))
			return
		}
		_, _ = w.Write(object)
	}))
	t.Cleanup(srv.Close)
	w, err := NewHPAStatusWriter(&rest.Config{Host: srv.URL}, flowcontrol.NewFakeAlwaysRateLimiter(), 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}}
	if err := w.UpdateStatus(ctx, hpa); err != nil {
		t.Fatal(err)
	}
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // a collection would empty io.Discard's pool
	const writes = 20
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	for range writes {
		if err := w.UpdateStatus(ctx, hpa); err != nil {
			t.Fatal(err)
		}
	}
	goruntime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / writes; per > answer/4 {
		t.Errorf("a status write allocated %d bytes for a %d-byte answer; want under a quarter of it", per, answer)
	}
	conflict := hpa.DeepCopy()
	conflict.Namespace = "conflict"
	if err := w.UpdateStatus(ctx, conflict); !apierrors.IsConflict(err) {
		t.Errorf("a refused write returned %v, want the Conflict Status", err)
	}
}

// TestStatusPutterPath writes a status through statusPutter's whole path
// and through client-go's builder (Namespace, Resource, Name,
// SubResource), the reference: the same request URI, also under a host
// with a path of its own (a proxy's); a namespace or name that is not a
// path segment is refused before any request.
func TestStatusPutterPath(t *testing.T) {
	var mu sync.Mutex
	var uris []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		uris = append(uris, r.URL.RequestURI())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(srv.Close)
	hpa := &autoscalingv2.HorizontalPodAutoscaler{}
	for _, tc := range []struct {
		name, hostPath, namespace, object string
		wantErr                           bool
	}{
		{name: "host without a path", namespace: "ns", object: "web"},
		{name: "host with a path", hostPath: "/k8s/clusters/c1", namespace: "team-a", object: "web.v2"},
		{name: "empty namespace", namespace: "", object: "web", wantErr: true},
		{name: "name with a slash", namespace: "ns", object: "a/b", wantErr: true},
		{name: "name with a percent", namespace: "ns", object: "a%2Fb", wantErr: true},
		{name: "dot-dot name", namespace: "ns", object: "..", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &rest.Config{Host: srv.URL + tc.hostPath}
			w, err := NewHPAStatusWriter(cfg, flowcontrol.NewFakeAlwaysRateLimiter(), 1)
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			uris = nil
			mu.Unlock()
			_, err = w.(restHPAWriter).put.put(context.Background(), tc.namespace, tc.object, hpa)
			mu.Lock()
			got := uris
			mu.Unlock()
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.object)) || !strings.Contains(err.Error(), "may not") || len(got) != 0 {
					t.Fatalf("err %v after requests %q; want an error naming %q and no request", err, got, tc.object)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := w.(restHPAWriter).put.client.Put().Namespace(tc.namespace).Resource("horizontalpodautoscalers").
				Name(tc.object).SubResource("status").Param("fieldManager", FieldManager).URL().RequestURI()
			if len(got) != 1 || got[0] != want {
				t.Errorf("requests %q, want one to %q", got, want)
			}
		})
	}
}

// BenchmarkStatusPut writes an HPA's status to a local server that answers
// at once: what client-go and this package spend on one write.
func BenchmarkStatusPut(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	b.Cleanup(srv.Close)
	w, err := NewHPAStatusWriter(&rest.Config{Host: srv.URL}, flowcontrol.NewFakeAlwaysRateLimiter(), 1)
	if err != nil {
		b.Fatal(err)
	}
	hpa := wireHPA(1)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := w.UpdateStatus(ctx, hpa); err != nil {
			b.Fatal(err)
		}
	}
}

// TestStatusWriteUserAgent: a status write carries the User-Agent its
// client's transport would give it before it reaches that transport (so
// client-go's User-Agent round tripper passes it on instead of copying the
// request to set it), and the apiserver sees the same agent as before.
func TestStatusWriteUserAgent(t *testing.T) {
	var mu sync.Mutex
	var atServer string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		atServer = r.Header.Get("User-Agent")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		name, configured, want string
	}{
		{name: "native mode, an agent configured", configured: "tidal/v1 (test)", want: "tidal/v1 (test)"},
		{name: "native mode, client-go's default agent", want: rest.DefaultKubernetesUserAgent()},
		{name: "crd mode, an agent configured", configured: "tidal/v1 (test)", want: "tidal/v1 (test)"},
		{name: "crd mode, none configured", want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var atTransport string
			cfg := &rest.Config{Host: srv.URL, UserAgent: tc.configured, WrapTransport: func(rt http.RoundTripper) http.RoundTripper {
				return roundTripFunc(func(r *http.Request) (*http.Response, error) {
					if strings.HasSuffix(r.URL.Path, "/status") {
						atTransport = r.Header.Get("User-Agent")
					}
					return rt.RoundTrip(r)
				})
			}}
			ctx := context.Background()
			if strings.HasPrefix(tc.name, "native") {
				w, err := NewHPAStatusWriter(cfg, flowcontrol.NewFakeAlwaysRateLimiter(), 1)
				if err != nil {
					t.Fatal(err)
				}
				if err := w.UpdateStatus(ctx, &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}}); err != nil {
					t.Fatal(err)
				}
			} else {
				clients, err := NewHorizontalAutoscalerClients(cfg, 1, nil)
				if err != nil {
					t.Fatal(err)
				}
				ha := &v1alpha1.HorizontalAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}}
				if err := CRDSource(clients, 0).UpdateStatus(ctx, haObject{ha}); err != nil {
					t.Fatal(err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if atTransport != tc.want {
				t.Errorf("the write reached the transport with User-Agent %q, want %q", atTransport, tc.want)
			}
			if wantServer := cmp.Or(tc.want, "Go-http-client/1.1"); atServer != wantServer {
				t.Errorf("the apiserver saw User-Agent %q, want %q", atServer, wantServer)
			}
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
