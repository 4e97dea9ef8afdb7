package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apiserver/pkg/authentication/request/anonymous"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	genericapiserver "k8s.io/apiserver/pkg/server"
	restclient "k8s.io/client-go/rest"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	cmv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	"k8s.io/metrics/pkg/apis/metrics"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	cmapiserver "sigs.k8s.io/custom-metrics-apiserver/pkg/apiserver"
	msapi "sigs.k8s.io/metrics-server/pkg/api"
)

const (
	protobuf = "application/vnd.kubernetes.protobuf"
	json     = "application/json"
)

// decoder reads what the benchmark reads (test/bench/adapter).
var decoder = func() runtime.Decoder {
	s := runtime.NewScheme()
	utilruntime.Must(cmv1beta2.AddToScheme(s))
	utilruntime.Must(metricsv1beta1.AddToScheme(s))
	return serializer.NewCodecFactory(s).UniversalDeserializer()
}()

// names are the described pods of a decoded MetricValueList or
// PodMetricsList, in order.
func names(t *testing.T, b []byte) []string {
	t.Helper()
	obj, _, err := decoder.Decode(b, nil, nil)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	var out []string
	switch l := obj.(type) {
	case *cmv1beta2.MetricValueList:
		for _, it := range l.Items {
			out = append(out, it.DescribedObject.Namespace+"/"+it.DescribedObject.Name)
		}
	case *metricsv1beta1.PodMetricsList:
		for _, it := range l.Items {
			out = append(out, it.Namespace+"/"+it.Name)
		}
	default:
		t.Fatalf("decoded a %T, want a metric list", obj)
	}
	return out
}

func wantNames(n int) []string {
	var out []string
	for i := range n {
		out = append(out, "bench/"+podName(i))
	}
	return out
}

func equal(a, b []string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

// TestServes starts the no-op's API groups in-process, on the generic API
// server's full handler chain (with an anonymous authenticator and an
// allow-all authorizer in place of the delegated ones), and asks as the
// benchmark does: every answer is the fixed list, in the content type
// asked, the same bytes every time, and written from the encodings kept
// (one per list and content type).
func TestServes(t *testing.T) {
	const items = 7
	cfg := genericapiserver.NewRecommendedConfig(cmapiserver.Codecs)
	cfg.Authentication.Authenticator = anonymous.NewAuthenticator(nil)
	cfg.Authorization.Authorizer = authorizerfactory.NewAlwaysAllowAuthorizer()
	// Not listened on: the test serves the handler chain itself.
	cfg.ExternalAddress = "127.0.0.1:443"
	cfg.LoopbackClientConfig = &restclient.Config{Host: "https://127.0.0.1:443"}
	cfg.OpenAPIConfig, cfg.OpenAPIV3Config = openAPIConfigs()
	server, err := (&cmapiserver.Config{GenericConfig: &cfg.Config}).Complete(nil).New("noop-test", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	encodings, err := install(server.GenericAPIServer, items, "bench", "http_requests_per_second", metav1.NewTime(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(server.GenericAPIServer.Handler)
	defer ts.Close()

	paths := []string{
		"/apis/custom.metrics.k8s.io/v1beta2/namespaces/bench/pods/*/http_requests_per_second?labelSelector=app%3Dweb",
		"/apis/metrics.k8s.io/v1beta1/namespaces/bench/pods?labelSelector=app%3Dweb",
	}
	for _, path := range paths {
		for _, accept := range []string{protobuf, json} {
			var first []byte
			for range 3 {
				req, _ := http.NewRequest(http.MethodGet, ts.URL+path, nil)
				req.Header.Set("Accept", accept)
				resp, err := ts.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("GET %s (%s): %s: %.300s", path, accept, resp.Status, body)
				}
				if ct := resp.Header.Get("Content-Type"); ct != accept {
					t.Errorf("GET %s (%s): Content-Type %q", path, accept, ct)
				}
				if got := names(t, body); !equal(got, wantNames(items)) {
					t.Errorf("GET %s (%s): items %v, want %v", path, accept, got, wantNames(items))
				}
				if first == nil {
					first = body
				} else if !bytes.Equal(body, first) {
					t.Errorf("GET %s (%s): the bytes changed between requests", path, accept)
				}
			}
		}
	}
	kept := 0
	encodings.encodings.Range(func(any, any) bool { kept++; return true })
	if kept != 4 {
		t.Errorf("%d encodings kept, want 4 (2 lists x 2 content types)", kept)
	}
}

// TestEncodedOnce: a fixed list is encoded the first time an encoder is
// asked for it and then written from those bytes (a change made to it
// afterwards, which the no-op never makes, does not show), for protobuf
// and JSON alike; other objects are encoded as usual.
func TestEncodedOnce(t *testing.T) {
	at := metav1.NewTime(time.Now())
	custom := customList(3, "bench", "m", at)
	pods := podMetricsList(3, "bench", at)
	e := newEncodedOnce(custom, pods)
	cases := []struct {
		codecs serializer.CodecFactory
		gv     runtime.GroupVersioner
		obj    runtime.Object
		other  runtime.Object
	}{
		{cmapiserver.Codecs, cmv1beta2.SchemeGroupVersion, custom, &custom_metrics.MetricValueList{}},
		{msapi.Codecs, metricsv1beta1.SchemeGroupVersion, pods, &metrics.PodMetricsList{}},
	}
	for _, c := range cases {
		ns := e.NegotiatedSerializer(c.codecs)
		for _, mediaType := range []string{protobuf, json} {
			info, ok := runtime.SerializerInfoForMediaType(ns.SupportedMediaTypes(), mediaType)
			if !ok {
				t.Fatalf("no %s serializer", mediaType)
			}
			encode := func(obj runtime.Object) []byte {
				// A new encoder per request, as the handlers negotiate one.
				b, err := runtime.Encode(ns.EncoderForVersion(info.Serializer, c.gv), obj)
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			plain, err := runtime.Encode(c.codecs.EncoderForVersion(info.Serializer, c.gv), c.obj)
			if err != nil {
				t.Fatal(err)
			}
			first := encode(c.obj)
			if !bytes.Equal(first, plain) {
				t.Errorf("%T %s: the kept bytes differ from the wrapped encoder's", c.obj, mediaType)
			}
			if got := names(t, first); !equal(got, wantNames(3)) {
				t.Errorf("%T %s: items %v, want %v", c.obj, mediaType, got, wantNames(3))
			}
			if again := encode(c.obj); !bytes.Equal(again, first) {
				t.Errorf("%T %s: the bytes changed between requests", c.obj, mediaType)
			}
			if got := names(t, encode(c.other)); len(got) != 0 {
				t.Errorf("%T %s: another (empty) list encoded as %v", c.obj, mediaType, got)
			}
		}
	}
	// Changed behind the cache's back, the lists are still written as
	// first encoded: the bytes are kept, not made again.
	custom.Items = custom.Items[:1]
	pods.Items = pods.Items[:1]
	for _, c := range cases {
		ns := e.NegotiatedSerializer(c.codecs)
		for _, mediaType := range []string{protobuf, json} {
			info, _ := runtime.SerializerInfoForMediaType(ns.SupportedMediaTypes(), mediaType)
			b, err := runtime.Encode(ns.EncoderForVersion(info.Serializer, c.gv), c.obj)
			if err != nil {
				t.Fatal(err)
			}
			if got := names(t, b); len(got) != 3 {
				t.Errorf("%T %s: %d items after the change, want the 3 first encoded", c.obj, mediaType, len(got))
			}
		}
	}
}
