package metrics

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"runtime/debug"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/rest"
	metricsapi "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
	metricsscheme "k8s.io/metrics/pkg/client/clientset/versioned/scheme"

	"github.com/tidal-autoscaler/tidal/internal/raceflag"
)

// podMetricsServer serves a namespace's PodMetrics list of n pods as
// metrics.k8s.io does, in protobuf or JSON as asked; a LIST in namespace
// "forbidden" gets a 403 Status. It returns the protobuf body's size.
func podMetricsServer(t testing.TB, n int) (*httptest.Server, int) {
	list := &metricsapi.PodMetricsList{TypeMeta: metav1.TypeMeta{Kind: "PodMetricsList", APIVersion: "metrics.k8s.io/v1beta1"}}
	for i := range n {
		list.Items = append(list.Items, metricsapi.PodMetrics{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Namespace: ns, Labels: map[string]string{"app": fmt.Sprintf("web-%d", i/5)}},
			Timestamp:  metav1.NewTime(now), Window: metav1.Duration{Duration: 15e9},
			Containers: []metricsapi.ContainerMetrics{{Name: "app", Usage: corev1.ResourceList{"cpu": resource.MustParse("51m")}}},
		})
	}
	pb := protobuf.NewSerializer(metricsscheme.Scheme, metricsscheme.Scheme)
	protoBody, err := k8sruntime.Encode(metricsscheme.Codecs.EncoderForVersion(pb, metricsapi.SchemeGroupVersion), list)
	if err != nil {
		t.Fatal(err)
	}
	jsonBody, err := k8sruntime.Encode(metricsscheme.Codecs.LegacyCodec(metricsapi.SchemeGroupVersion), list)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/apis/metrics.k8s.io/v1beta1/namespaces/forbidden/pods":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,"message":"pods.metrics.k8s.io is forbidden"}`)
		case r.URL.Path != "/apis/metrics.k8s.io/v1beta1/namespaces/"+ns+"/pods" || r.URL.Query().Get("labelSelector") != "app=web-0":
			http.Error(w, "unexpected request "+r.URL.String(), http.StatusBadRequest)
		case r.Header.Get("Accept") == k8sruntime.ContentTypeProtobuf:
			w.Header().Set("Content-Type", k8sruntime.ContentTypeProtobuf)
			_, _ = w.Write(protoBody)
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(jsonBody)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, len(protoBody)
}

func podMetricsClient(t testing.TB, url, contentType string) *metricsclient.Clientset {
	c, err := metricsclient.NewForConfig(&rest.Config{Host: url, QPS: -1, ContentConfig: rest.ContentConfig{AcceptContentTypes: contentType, ContentType: contentType}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestBufferedList: a real clientset's PodMetrics are listed through the
// reused buffer, with the request, the decoding (protobuf or JSON) and the
// errors of the typed client.
func TestBufferedList(t *testing.T) {
	srv, _ := podMetricsServer(t, 10)
	for _, contentType := range []string{k8sruntime.ContentTypeProtobuf, k8sruntime.ContentTypeJSON} {
		t.Run(contentType, func(t *testing.T) {
			c := podMetricsClient(t, srv.URL, contentType).MetricsV1beta1()
			if _, ok := c.RESTClient().(*rest.RESTClient); !ok {
				t.Fatal("not a REST client")
			}
			read := podMetricsList(c)
			opts := metav1.ListOptions{LabelSelector: "app=web-0"}
			for range 2 { // the second read reuses the first's buffer
				got, err := read(context.Background(), ns, opts)
				if err != nil {
					t.Fatal(err)
				}
				typed, err := c.PodMetricses(ns).List(context.Background(), opts)
				if err != nil {
					t.Fatal(err)
				}
				if want := fromPodMetrics(typed.Items); len(got.items) != 10 || !reflect.DeepEqual(got, want) {
					t.Errorf("read %+v, want the typed client's list converted, %+v", got, want)
				}
			}
			if _, err := read(context.Background(), "forbidden", opts); !apierrors.IsForbidden(err) {
				t.Errorf("error %v, want the Forbidden Status", err)
			}
		})
	}
}

// TestBufferedListAllocatesLess: a list read through the reused buffer
// allocates less than the typed client's, by twice its body here
// (io.ReadAll grows a new buffer for every list); the body is the bar.
// Garbage collection is off while it measures, as a collection
// empties the pool, and the race detector's pool drops buffers at random.
func TestBufferedListAllocatesLess(t *testing.T) {
	if raceflag.Enabled {
		t.Skip("the race detector's sync.Pool drops a quarter of the buffers put back")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	srv, size := podMetricsServer(t, 1000)
	c := podMetricsClient(t, srv.URL, k8sruntime.ContentTypeProtobuf).MetricsV1beta1()
	opts := metav1.ListOptions{LabelSelector: "app=web-0"}
	buffered := podMetricsList(c)
	typed := typedList(c)
	perList := func(read listPodMetrics) uint64 {
		const lists = 10
		if _, err := read(context.Background(), ns, opts); err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range lists {
			if _, err := read(context.Background(), ns, opts); err != nil {
				t.Fatal(err)
			}
		}
		runtime.ReadMemStats(&after)
		return (after.TotalAlloc - before.TotalAlloc) / lists
	}
	b, ty := perList(buffered), perList(typed)
	t.Logf("bytes per list: %d buffered, %d typed; body %d", b, ty, size)
	if ty < b+uint64(size) {
		t.Errorf("a list allocated %d bytes buffered, %d typed; want at least the body's %d bytes less", b, ty, size)
	}
}
