// Command testadapter runs sigs.k8s.io/custom-metrics-apiserver's
// test-adapter as a second owner of the metrics APIs in Tidal's tests: its
// provider (test-adapter/provider) and its server (AdapterBase) unchanged,
// as upstream's test-adapter/main.go wires them, with two differences a
// test here needs:
//
//   - the endpoint that writes values listens on --write-address
//     (upstream: ":8080", every interface; tests here use loopback only);
//   - POST /write-external/{metric}?labels=k=v with a quantity body adds an
//     external metric value (any namespace), beside the provider's fixed
//     ones, so a test can serve a KEDA-shaped metric
//     (s0-prometheus-queue{scaledobject.keda.sh/name=x}) and move it.
package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/emicklei/go-restful/v3"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-base/logs"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/metrics/pkg/apis/external_metrics"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/apiserver/metrics"
	basecmd "sigs.k8s.io/custom-metrics-apiserver/pkg/cmd"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/provider"
	fakeprov "sigs.k8s.io/custom-metrics-apiserver/test-adapter/provider"
)

// written adds external values written over HTTP to the upstream provider.
type written struct {
	provider.MetricsProvider
	mu     sync.Mutex
	values map[string][]external_metrics.ExternalMetricValue
}

func (w *written) GetExternalMetric(ctx context.Context, namespace string, sel labels.Selector, info provider.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
	w.mu.Lock()
	vs, ok := w.values[info.Metric]
	w.mu.Unlock()
	if !ok {
		return w.MetricsProvider.GetExternalMetric(ctx, namespace, sel, info)
	}
	out := &external_metrics.ExternalMetricValueList{}
	for _, v := range vs {
		if sel.Matches(labels.Set(v.MetricLabels)) {
			v.Timestamp = metav1.Now()
			out.Items = append(out.Items, v)
		}
	}
	return out, nil
}

func (w *written) ListAllExternalMetrics() []provider.ExternalMetricInfo {
	out := w.MetricsProvider.ListAllExternalMetrics()
	w.mu.Lock()
	defer w.mu.Unlock()
	for m := range w.values {
		out = append(out, provider.ExternalMetricInfo{Metric: m})
	}
	return out
}

// write handles POST /write-external/{metric}?labels=k=v,... with the
// value (a quantity) as the body; the same labels replace the old value.
func (w *written) write(rw http.ResponseWriter, r *http.Request) {
	metric := strings.TrimPrefix(r.URL.Path, "/write-external/")
	lbls, err := labels.ConvertSelectorToLabelsMap(r.URL.Query().Get("labels"))
	body, _ := io.ReadAll(r.Body)
	q, qerr := resource.ParseQuantity(strings.TrimSpace(string(body)))
	if r.Method != http.MethodPost || metric == "" || err != nil || qerr != nil {
		http.Error(rw, "POST /write-external/{metric}?labels=k=v with a quantity body", http.StatusBadRequest)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.values == nil {
		w.values = map[string][]external_metrics.ExternalMetricValue{}
	}
	vs := w.values[metric]
	for i, v := range vs {
		if labels.Equals(v.MetricLabels, lbls) {
			vs = append(vs[:i], vs[i+1:]...)
			break
		}
	}
	w.values[metric] = append(vs, external_metrics.ExternalMetricValue{MetricName: metric, MetricLabels: lbls, Value: q})
	rw.WriteHeader(http.StatusNoContent)
}

func main() {
	logs.InitLogs()
	defer logs.FlushLogs()

	cmd := &basecmd.AdapterBase{Name: "test-adapter"}
	writeAddr := cmd.Flags().String("write-address", "127.0.0.1:8080", "Where the endpoints that write values listen.")
	logs.AddFlags(cmd.Flags())
	if err := cmd.Flags().Parse(os.Args); err != nil {
		klog.Fatalf("unable to parse flags: %v", err)
	}

	client, err := cmd.DynamicClient()
	if err != nil {
		klog.Fatalf("unable to construct dynamic client: %v", err)
	}
	mapper, err := cmd.RESTMapper()
	if err != nil {
		klog.Fatalf("unable to construct discovery REST mapper: %v", err)
	}
	upstream, ws := fakeprov.NewFakeProvider(client, mapper)
	p := &written{MetricsProvider: upstream}
	cmd.WithCustomMetrics(p)
	cmd.WithExternalMetrics(p)
	if err := metrics.RegisterMetrics(legacyregistry.Register); err != nil {
		klog.Fatalf("unable to register metrics: %v", err)
	}

	container := restful.NewContainer()
	container.Add(ws)
	container.ServeMux.HandleFunc("/write-external/", p.write)
	go func() {
		server := &http.Server{Addr: *writeAddr, Handler: container, ReadHeaderTimeout: 3 * time.Second}
		klog.Fatal(server.ListenAndServe())
	}()
	if err := cmd.Run(context.Background()); err != nil {
		klog.Fatalf("unable to run custom metrics adapter: %v", err)
	}
}
