package provider_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/klog/v2"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/tidal-autoscaler/tidal/adapter/discovery"
	"github.com/tidal-autoscaler/tidal/adapter/internal/promtest"
	"github.com/tidal-autoscaler/tidal/adapter/objects"
	"github.com/tidal-autoscaler/tidal/adapter/prom"
	"github.com/tidal-autoscaler/tidal/adapter/provider"
)

// fakeObjects is an objects.Lister over a fixed set of objects.
type fakeObjects map[string]map[string]labels.Set // "resource/namespace" -> name -> labels

func (f fakeObjects) Names(_ context.Context, gvr schema.GroupVersionResource, ns string, sel labels.Selector) ([]string, error) {
	if sel != nil {
		_ = sel.String() // as the informer lister's cache key
	}
	var out []string
	for name, l := range f[gvr.Resource+"/"+ns] {
		if sel == nil || sel.Matches(l) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, nil
}

func (f fakeObjects) Exists(_ context.Context, gvr schema.GroupVersionResource, ns, name string) (bool, error) {
	_, ok := f[gvr.Resource+"/"+ns][name]
	return ok, nil
}

const rules = `
rules:
- seriesQuery: 'http_requests_total{namespace!="",pod!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
      pod: {resource: pod}
      service: {resource: service}
  name: {matches: "^(.*)_total$", as: "${1}_per_second"}
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)'
externalRules:
- seriesQuery: 'queue_messages{queue!=""}'
  resources: {namespaced: false}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (queue)'
`

type fixture struct {
	srv *promtest.Server
	p   *provider.Provider
	// values by pod name; NaN allowed. Queue values by queue.
	pods, queues map[string]float64
}

const sampleTime = 1700000000.5

func newFixture(t testing.TB, promURL func(*prom.Options)) *fixture {
	t.Helper()
	return newFixtureWith(t, promURL, nil)
}

// newFixtureWith is newFixture with the provider's options changed by opts.
func newFixtureWith(t testing.TB, promURL func(*prom.Options), opts func(*provider.Options)) *fixture {
	t.Helper()
	f := &fixture{
		srv:    promtest.New(t),
		pods:   map[string]float64{"web-1": 0.3125, "web-2": 1.0005, "web-3": 2, "nan-1": math.NaN()},
		queues: map[string]float64{"q1": 5, "q2": 7.25, "q3": math.NaN()},
	}
	f.srv.SetSeries(`http_requests_total{namespace!="",pod!=""}`,
		map[string]string{"__name__": "http_requests_total", "namespace": "a", "pod": "web-1", "service": "web"})
	f.srv.SetSeries(`queue_messages{queue!=""}`, map[string]string{"__name__": "queue_messages", "queue": "q1"})
	f.srv.OnQuery(func(q string) promtest.Response {
		var out []promtest.Sample
		switch {
		case strings.Contains(q, "queue_messages"):
			for name, v := range f.queues {
				if strings.Contains(q, `queue="`) && !strings.Contains(q, `queue="`+name+`"`) {
					continue
				}
				out = append(out, promtest.Sample{Labels: map[string]string{"queue": name}, Value: v, Time: sampleTime})
			}
		case strings.Contains(q, `pod=`):
			for name, v := range f.pods {
				if strings.Contains(q, name) {
					out = append(out, promtest.Sample{Labels: map[string]string{"pod": name}, Value: v, Time: sampleTime})
				}
			}
		case strings.Contains(q, `service="web"`):
			out = append(out, promtest.Sample{Labels: map[string]string{"service": "web"}, Value: 12.5, Time: sampleTime})
		case strings.Contains(q, `namespace="a"`):
			out = append(out, promtest.Sample{Labels: map[string]string{"namespace": "a"}, Value: 42, Time: sampleTime})
		}
		return promtest.Response{Vector: out}
	})
	d := discovery.New(discovery.Options{Interval: time.Minute})
	d.SetRules(f.srv.Rules(t, rules, promURL))
	if err := d.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	objs := fakeObjects{
		"pods/a": {
			"web-1": {"app": "web"}, "web-2": {"app": "web"}, "web-3": {"app": "web", "canary": "true"},
			"nan-1": {"app": "nan"}, "idle-1": {"app": "idle"},
		},
		"services/a":  {"web": {}},
		"namespaces/": {"a": {}},
	}
	o := provider.Options{Discovery: d, Mapper: promtest.Mapper(), Objects: objs}
	if opts != nil {
		opts(&o)
	}
	f.p = provider.New(o)
	return f
}

var (
	pods       = schema.GroupResource{Resource: "pods"}
	metricName = "http_requests_per_second"
)

func info(gr schema.GroupResource) cmprovider.CustomMetricInfo {
	return cmprovider.CustomMetricInfo{GroupResource: gr, Metric: metricName, Namespaced: true}
}

func TestGetMetricByName(t *testing.T) {
	f := newFixture(t, nil)
	tests := []struct {
		name        string
		gr          schema.GroupResource
		ns, obj     string
		metric      string
		wantValue   string
		wantVersion string
		wantKind    string
		wantCode    int32
		wantText    string
	}{
		{name: "pod, the precision Prometheus returned (not 312m or 313m)", gr: pods, ns: "a", obj: "web-1", wantValue: "312500u", wantVersion: "v1", wantKind: "Pod"},
		{name: "pod, four decimals kept", gr: pods, ns: "a", obj: "web-2", wantValue: "1000500u", wantVersion: "v1", wantKind: "Pod"},
		{name: "singular resource name", gr: schema.GroupResource{Resource: "pod"}, ns: "a", obj: "web-3", wantValue: "2", wantVersion: "v1", wantKind: "Pod"},
		{name: "service", gr: schema.GroupResource{Resource: "services"}, ns: "a", obj: "web", wantValue: "12500m", wantVersion: "v1", wantKind: "Service"},
		{name: "the namespace itself", gr: schema.GroupResource{Resource: "namespaces"}, obj: "a", wantValue: "42", wantVersion: "v1", wantKind: "Namespace"},
		{name: "object that does not exist", gr: pods, ns: "a", obj: "gone", wantCode: 404, wantText: `"gone" not found`},
		{name: "object without series", gr: pods, ns: "a", obj: "idle-1", wantCode: 404, wantText: metricName},
		{name: "unknown metric", gr: pods, ns: "a", obj: "web-1", metric: "nope", wantCode: 404, wantText: "nope"},
		{name: "metric not served for the resource", gr: schema.GroupResource{Group: "apps", Resource: "deployments"}, ns: "a", obj: "web", wantCode: 404, wantText: metricName},
		{name: "unknown resource", gr: schema.GroupResource{Resource: "widgets"}, ns: "a", obj: "w", wantCode: 404, wantText: metricName},
		{name: "NaN is no value: 404 naming the metric and the object, not 500", gr: pods, ns: "a", obj: "nan-1", wantCode: 404, wantText: metricName + " for pods nan-1"},
		{name: "no namespace for a namespaced resource: 404 saying it needs one", gr: pods, ns: "", obj: "web-1", wantCode: 404, wantText: "pods is namespaced, so the request needs one"},
		{name: "the namespace of a cluster-scoped resource is not needed", gr: schema.GroupResource{Resource: "namespaces"}, ns: "", obj: "a", wantValue: "42", wantVersion: "v1", wantKind: "Namespace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := info(tt.gr)
			if tt.metric != "" {
				in.Metric = tt.metric
			}
			v, err := f.p.GetMetricByName(context.Background(), types.NamespacedName{Namespace: tt.ns, Name: tt.obj}, in, labels.Everything())
			if tt.wantCode != 0 {
				if code := apierrors.ReasonForError(err); err == nil || apierrors.APIStatus(err.(apierrors.APIStatus)).Status().Code != tt.wantCode {
					t.Fatalf("err = %v (%s), want code %d", err, code, tt.wantCode)
				}
				if !strings.Contains(err.Error(), tt.wantText) {
					t.Errorf("err = %q, want it to mention %q", err, tt.wantText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := v.Value.String(); got != tt.wantValue {
				t.Errorf("value = %s, want %s", got, tt.wantValue)
			}
			if v.DescribedObject.APIVersion != tt.wantVersion || v.DescribedObject.Kind != tt.wantKind || v.DescribedObject.Name != tt.obj {
				t.Errorf("describedObject = %+v, want %s %s %s", v.DescribedObject, tt.wantVersion, tt.wantKind, tt.obj)
			}
			if v.Timestamp.UnixMilli() != int64(sampleTime*1000) {
				t.Errorf("timestamp = %v, want the sample's", v.Timestamp)
			}
			if v.WindowSeconds == nil || *v.WindowSeconds != 120 {
				t.Errorf("windowSeconds = %v, want 120 from [2m]", v.WindowSeconds)
			}
		})
	}
}

func TestGetMetricBySelector(t *testing.T) {
	f := newFixture(t, nil)
	tests := []struct {
		name      string
		selector  string
		ns        string // "-" for none; "a" otherwise
		metricSel string
		want      string
		wantCode  int32
	}{
		{name: "label selector", selector: "app=web", want: "web-1=312500u web-2=1000500u web-3=2"},
		{name: "label and metric selector", selector: "app=web,canary!=true", metricSel: "code!=500", want: "web-1=312500u web-2=1000500u"},
		{name: "no object matches: empty list", selector: "app=none", want: ""},
		{name: "objects without series: empty list", selector: "app=idle", want: ""},
		{name: "NaN left out", selector: "app in (web,nan)", want: "web-1=312500u web-2=1000500u web-3=2"},
		{name: "NaN only: empty list, not 500", selector: "app=nan", want: ""},
		{name: "no namespace for a namespaced resource: 404", ns: "-", selector: "app=web", wantCode: 404},
		{name: "metric selector Prometheus cannot express", selector: "app=web", metricSel: "code>4", wantCode: 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sel, err := labels.Parse(tt.selector)
			if err != nil {
				t.Fatal(err)
			}
			msel := labels.Everything()
			if tt.metricSel != "" {
				if msel, err = labels.Parse(tt.metricSel); err != nil {
					t.Fatal(err)
				}
			}
			ns := "a"
			if tt.ns == "-" {
				ns = ""
			}
			list, err := f.p.GetMetricBySelector(context.Background(), ns, sel, info(pods), msel)
			if tt.wantCode != 0 {
				var st apierrors.APIStatus
				if err == nil || !asStatus(err, &st) || st.Status().Code != tt.wantCode {
					t.Fatalf("err = %v, want code %d", err, tt.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if list.Items == nil {
				t.Error("items are nil: the list would be served as null, not []")
			}
			var got []string
			for _, it := range list.Items {
				got = append(got, fmt.Sprintf("%s=%s", it.DescribedObject.Name, it.Value.String()))
				if tt.metricSel != "" && it.Metric.Selector == nil {
					t.Errorf("%s: metric selector not echoed", it.DescribedObject.Name)
				}
			}
			if strings.Join(got, " ") != tt.want {
				t.Errorf("got %q, want %q", strings.Join(got, " "), tt.want)
			}
		})
	}
	// A long list of names goes to Prometheus in one query.
	if n := len(f.srv.Requests("/api/v1/query")); n == 0 {
		t.Error("no query reached Prometheus")
	}
}

// countingSelector counts calls of String.
type countingSelector struct {
	labels.Selector
	calls *int
}

func (s countingSelector) String() string {
	*s.calls++
	return s.Selector.String()
}

// TestSelectorStringOncePerRequest: the object lister and the query memo
// share one String of the request's selector.
func TestSelectorStringOncePerRequest(t *testing.T) {
	f := newFixture(t, nil)
	sel, err := labels.Parse("app=web")
	if err != nil {
		t.Fatal(err)
	}
	var calls int
	list, err := f.p.GetMetricBySelector(context.Background(), "a", countingSelector{sel, &calls}, info(pods), labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 3 {
		t.Fatalf("%d items, want 3", len(list.Items))
	}
	if calls != 1 {
		t.Errorf("selector.String called %d times, want 1", calls)
	}
}

func asStatus(err error, st *apierrors.APIStatus) bool {
	s, ok := err.(apierrors.APIStatus)
	*st = s
	return ok
}

func TestGetExternalMetric(t *testing.T) {
	f := newFixture(t, nil)
	tests := []struct {
		name     string
		ns       string
		selector string
		metric   string
		want     string
		wantCode int32
	}{
		{name: "every sample, with labels; NaN left out", ns: "a", want: "q1=5 q2=7250m"},
		{name: "without namespace", ns: "", selector: "queue=q2", want: "q2=7250m"},
		{name: "NaN only: empty list, not 500", ns: "a", selector: "queue=q3", want: ""},
		{name: "no sample: empty list", ns: "a", selector: "queue=none", want: ""},
		{name: "unknown metric", ns: "a", metric: "nope", wantCode: 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sel := labels.Everything()
			if tt.selector != "" {
				sel = labels.SelectorFromSet(labels.Set{"queue": strings.TrimPrefix(tt.selector, "queue=")})
			}
			m := "queue_messages"
			if tt.metric != "" {
				m = tt.metric
			}
			list, err := f.p.GetExternalMetric(context.Background(), tt.ns, sel, cmprovider.ExternalMetricInfo{Metric: m})
			if tt.wantCode != 0 {
				var st apierrors.APIStatus
				if err == nil || !asStatus(err, &st) || st.Status().Code != tt.wantCode || !strings.Contains(err.Error(), m) {
					t.Fatalf("err = %v, want code %d naming %s", err, tt.wantCode, m)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if list.Items == nil {
				t.Error("items are nil: the list would be served as null, not []")
			}
			var got []string
			for _, it := range list.Items {
				got = append(got, fmt.Sprintf("%s=%s", it.MetricLabels["queue"], it.Value.String()))
				if it.Timestamp.UnixMilli() != int64(sampleTime*1000) {
					t.Errorf("timestamp %v, want the sample's", it.Timestamp)
				}
			}
			sort.Strings(got)
			if strings.Join(got, " ") != tt.want {
				t.Errorf("got %q, want %q", strings.Join(got, " "), tt.want)
			}
		})
	}
	// namespaced: false: the HPA's namespace is not in the query.
	for _, r := range f.srv.Requests("/api/v1/query") {
		if q := r.Form.Get("query"); strings.Contains(q, "queue_messages") && strings.Contains(q, "namespace") {
			t.Errorf("query %q limits a non-namespaced external rule to a namespace", q)
		}
	}
}

func TestPrometheusDownIsServiceUnavailable(t *testing.T) {
	f := newFixture(t, nil)
	// Discovery succeeded; now Prometheus goes away.
	f.srv.Close()
	_, err := f.p.GetMetricByName(context.Background(), types.NamespacedName{Namespace: "a", Name: "web-1"}, info(pods), labels.Everything())
	if !apierrors.IsServiceUnavailable(err) || !strings.Contains(err.Error(), `"default"`) {
		t.Fatalf("err = %v, want 503 naming the backend", err)
	}
	// The refused connection answers, not the query timeout running out.
	if !strings.Contains(err.Error(), "is unavailable") || strings.Contains(err.Error(), "did not answer in time") {
		t.Errorf("err = %v, want the backend unavailable, not timed out", err)
	}
}

// scopeRules serve one series through prometheus-adapter's documented
// template, and two external metrics, one without the request's namespace.
const scopeRules = `
rules:
- seriesQuery: '{namespace!="",__name__!~"^container_.*"}'
  name: {matches: "^(.*)_total$"}
  resources: {template: "<<.Resource>>"}
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)'
externalRules:
- seriesQuery: 'queue_messages{queue!=""}'
  resources: {overrides: {namespace: {resource: namespace}}}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (queue)'
- seriesQuery: 'global_backlog{queue!=""}'
  resources: {namespaced: false}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (queue)'
`

// What API discovery lists, with which scope: each resource's own (the
// cluster's), so namespaces/<metric> is never namespaced; external
// metrics are namespaced unless their rule says namespaced: false.
func TestDiscoveryScopes(t *testing.T) {
	srv := promtest.New(t)
	srv.SetSeries(`{namespace!="",__name__!~"^container_.*"}`,
		map[string]string{"__name__": "http_requests_total", "namespace": "shop", "pod": "web-1", "job": "kubernetes-pods", "service": "web", "verb": "GET"},
		map[string]string{"__name__": "volume_writes_total", "namespace": "shop", "storageclass": "fast"},
	)
	srv.SetSeries(`queue_messages{queue!=""}`, map[string]string{"__name__": "queue_messages", "namespace": "shop", "queue": "q1"})
	srv.SetSeries(`global_backlog{queue!=""}`, map[string]string{"__name__": "global_backlog", "queue": "q1"})
	d := discovery.New(discovery.Options{Interval: time.Minute})
	d.SetRules(srv.Rules(t, scopeRules, nil))
	if err := d.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	p := provider.New(provider.Options{Discovery: d, Mapper: promtest.Mapper(), Objects: fakeObjects{}})

	custom := map[string]bool{}
	for _, m := range p.ListAllMetrics() {
		custom[m.GroupResource.String()+"/"+m.Metric] = m.Namespaced
	}
	external := map[string]bool{}
	for _, r := range p.ExternalResources().ListAPIResources() {
		external[r.Name] = r.Namespaced
		if r.Kind != "ExternalMetricValueList" || len(r.Verbs) != 1 || r.Verbs[0] != "get" {
			t.Errorf("%s: kind %s, verbs %v", r.Name, r.Kind, r.Verbs)
		}
	}
	tests := []struct {
		name       string
		listed     map[string]bool
		metric     string
		namespaced bool
	}{
		{"pods", custom, "pods/http_requests", true},
		{"the job label is batch/v1 jobs", custom, "jobs.batch/http_requests", true},
		{"services", custom, "services/http_requests", true},
		{"namespaces are cluster-scoped beside namespaced resources", custom, "namespaces/http_requests", false},
		{"namespaces of another series", custom, "namespaces/volume_writes", false},
		{"a cluster-scoped resource as the cluster says", custom, "storageclasses.storage.k8s.io/volume_writes", false},
		{"external metric of a namespaced rule", external, "queue_messages", true},
		{"external metric of a rule with namespaced: false", external, "global_backlog", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			namespaced, ok := tt.listed[tt.metric]
			if !ok {
				t.Fatalf("%s not listed; listed: %v", tt.metric, tt.listed)
			}
			if namespaced != tt.namespaced {
				t.Errorf("%s namespaced = %v, want %v", tt.metric, namespaced, tt.namespaced)
			}
		})
	}
	if len(custom) != 6 || len(external) != 2 {
		t.Errorf("listed %v and %v, want 6 custom and 2 external metrics", custom, external)
	}
}

// TestQueryErrorsDoNotCarryTheQuery: a failed query answers an error naming
// the metric, the rule and the backend, never the PromQL text nor
// Prometheus's message, which quotes it (any client allowed to read a
// metric would read them, and the HPA controller copies them into
// events); both are in the adapter's log.
func TestQueryErrorsDoNotCarryTheQuery(t *testing.T) {
	const promMessage = `1:5: parse error: unexpected "}" in sum(rate(secret_series{token="x"}[2m]))`
	tests := []struct {
		name     string
		resp     promtest.Response
		down     bool
		external bool
		wantCode int32
		want     string
	}{
		{name: "rejected query (400 bad_data)", resp: promtest.Response{Status: 400, ErrorType: "bad_data", Error: promMessage},
			wantCode: 500, want: `query for metric "http_requests_per_second" (rules[0]) failed: Prometheus backend "default" failed the query; see the adapter's log`},
		{name: "failed external query (422 execution)", external: true, resp: promtest.Response{Status: 422, ErrorType: "execution", Error: promMessage},
			wantCode: 500, want: `query for metric "queue_messages" (externalRules[0]) failed: Prometheus backend "default" failed the query; see the adapter's log`},
		{name: "Prometheus down (a GET: the query is in the URL)", down: true,
			wantCode: 503, want: `query for metric "http_requests_per_second" (rules[0]) failed: Prometheus backend "default" is unavailable; see the adapter's log`},
		{name: "Prometheus down, external", down: true, external: true,
			wantCode: 503, want: `query for metric "queue_messages" (externalRules[0]) failed: Prometheus backend "default" is unavailable; see the adapter's log`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := captureKlog(t)
			f := newFixture(t, nil)
			var queries []string
			f.srv.OnQuery(func(q string) promtest.Response {
				queries = append(queries, q)
				return tt.resp
			})
			if tt.down {
				f.srv.Close()
			}
			var err error
			if tt.external {
				_, err = f.p.GetExternalMetric(context.Background(), "a", labels.Everything(), cmprovider.ExternalMetricInfo{Metric: "queue_messages"})
			} else {
				_, err = f.p.GetMetricByName(context.Background(), types.NamespacedName{Namespace: "a", Name: "web-1"}, info(pods), labels.Everything())
			}
			var st apierrors.APIStatus
			if !errors.As(err, &st) || st.Status().Code != tt.wantCode || st.Status().Message != tt.want {
				t.Fatalf("err = %v, want %d %q", err, tt.wantCode, tt.want)
			}
			for _, leak := range append(queries, promMessage, "sum(", "{", "127.0.0.1") {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("the error %q carries %q", err, leak)
				}
			}
			klog.Flush()
			if !strings.Contains(logs.String(), "Prometheus query failed") || !strings.Contains(logs.String(), "sum(") {
				t.Errorf("log %q, want the failed query", logs)
			}
		})
	}
}

// captureKlog sends klog's output to the returned buffer for the test.
func captureKlog(t *testing.T) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	klog.LogToStderr(false)
	klog.SetOutput(&buf)
	t.Cleanup(func() {
		klog.SetOutput(os.Stderr)
		klog.LogToStderr(true)
	})
	return &buf
}

// TestOneNamespaceOnly: with objects read in one namespace (--namespace),
// the provider serves that namespace and its namespace object, and
// answers other namespaces with the lister's 403 unwrapped (not a 503:
// trying again will not help).
func TestOneNamespaceOnly(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	web1 := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web-1", Labels: map[string]string{"app": "web"}}}
	client := metadatafake.NewSimpleMetadataClient(scheme, web1)
	f := newFixtureWith(t, nil, func(o *provider.Options) {
		o.Objects = objects.NewNamespacedInformerLister(t.Context(), client, "a")
	})
	if v, err := f.p.GetMetricByName(t.Context(), types.NamespacedName{Namespace: "a", Name: "web-1"}, info(pods), labels.Everything()); err != nil || v.Value.String() != "312500u" {
		t.Errorf("pod a/web-1 = %v, %v; want 312500u", v, err)
	}
	if v, err := f.p.GetMetricByName(t.Context(), types.NamespacedName{Name: "a"}, info(schema.GroupResource{Resource: "namespaces"}), labels.Everything()); err != nil || v.Value.String() != "42" {
		t.Errorf("namespace a = %v, %v; want 42", v, err)
	}
	sel := labels.SelectorFromSet(labels.Set{"app": "web"})
	for name, call := range map[string]func() error{
		"an object in another namespace": func() error {
			_, err := f.p.GetMetricByName(t.Context(), types.NamespacedName{Namespace: "b", Name: "web-1"}, info(pods), labels.Everything())
			return err
		},
		"a selector in another namespace": func() error {
			_, err := f.p.GetMetricBySelector(t.Context(), "b", sel, info(pods), labels.Everything())
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			err := call()
			st, ok := err.(apierrors.APIStatus)
			if !ok || st.Status().Code != 403 || !strings.Contains(err.Error(), "--namespace=a") {
				t.Errorf("err = %v (%T), want the 403 naming --namespace=a, unwrapped", err, err)
			}
		})
	}
}
