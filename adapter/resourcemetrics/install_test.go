package resourcemetrics_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/util/compatibility"
	metadatafake "k8s.io/client-go/metadata/fake"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	msapi "sigs.k8s.io/metrics-server/pkg/api"

	"github.com/tidal-autoscaler/tidal/adapter/internal/promtest"
	"github.com/tidal-autoscaler/tidal/adapter/objects"
	"github.com/tidal-autoscaler/tidal/adapter/resourcemetrics"
	"github.com/tidal-autoscaler/tidal/adapter/ruleset"
)

// fakeCaches is an objects.CacheLister over fixed pods and nodes.
type fakeCaches struct {
	objs     map[string][]runtime.Object
	selected *sync.Map
}

func (f fakeCaches) GenericLister(_ context.Context, gvr schema.GroupVersionResource) (cache.GenericLister, error) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range f.objs[gvr.Resource] {
		if err := idx.Add(o); err != nil {
			return nil, err
		}
	}
	return cache.NewGenericLister(idx, gvr.GroupResource()), nil
}

// Select answers like objects.CacheLister.Select, from a new index each
// time, but hands every caller the same slice for the same question, as
// the remembered answers do (so -race sees a storage that modifies it).
func (f fakeCaches) Select(ctx context.Context, gvr schema.GroupVersionResource, namespace string, selector labels.Selector) ([]*metav1.PartialObjectMetadata, error) {
	key := gvr.Resource + "/" + namespace + "?" + selector.String()
	if v, ok := f.selected.Load(key); ok {
		return v.([]*metav1.PartialObjectMetadata), nil
	}
	l, err := f.GenericLister(ctx, gvr)
	if err != nil {
		return nil, err
	}
	objs, err := l.ByNamespace(namespace).List(selector)
	if namespace == "" {
		objs, err = l.List(selector)
	}
	if err != nil {
		return nil, err
	}
	var out []*metav1.PartialObjectMetadata
	for _, o := range objs {
		out = append(out, o.(*metav1.PartialObjectMetadata))
	}
	slices.SortFunc(out, func(a, b *metav1.PartialObjectMetadata) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	v, _ := f.selected.LoadOrStore(key, out)
	return v.([]*metav1.PartialObjectMetadata), nil
}

func (fakeCaches) InScope(schema.GroupVersionResource, string) error { return nil }

func (fakeCaches) Names(context.Context, schema.GroupVersionResource, string, labels.Selector) ([]string, error) {
	return nil, nil
}

func (fakeCaches) Exists(context.Context, schema.GroupVersionResource, string, string) (bool, error) {
	return true, nil
}

// defaultCaches hold pods ns/a, ns/b, ns/c, other/d and nodes n, m.
var defaultCaches = fakeCaches{selected: &sync.Map{}, objs: map[string][]runtime.Object{
	"pods": {pod("ns", "a"), pod("ns", "b"), pod("ns", "c"), pod("other", "d")},
	"nodes": {
		&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "n"}},
		&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "m"}},
	},
}}

// serve installs metrics.k8s.io with Install on an in-process apiserver
// (no authentication or authorization) and returns its URL.
func serve(t *testing.T, p *resourcemetrics.Provider) string {
	t.Helper()
	return serveFrom(t, p, defaultCaches)
}

// serveFrom is serve with pods and nodes from caches.
func serveFrom(t *testing.T, p *resourcemetrics.Provider, caches objects.Lister) string {
	t.Helper()
	cfg := genericapiserver.NewRecommendedConfig(msapi.Codecs)
	cfg.EffectiveVersion = compatibility.DefaultBuildEffectiveVersion()
	cfg.ExternalAddress = "127.0.0.1:443"
	cfg.LoopbackClientConfig = &restclient.Config{}
	namer := openapinamer.NewDefinitionNamer(resourcemetrics.Scheme)
	cfg.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(resourcemetrics.GetOpenAPIDefinitions, namer)
	server, err := cfg.Complete().New("test", genericapiserver.NewEmptyDelegate())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := resourcemetrics.Install(ctx, server, p, caches); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(server.Handler)
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestServedErrors(t *testing.T) {
	tests := []struct {
		name       string
		resp       promtest.Response
		down       bool
		wantCode   int
		wantReason metav1.StatusReason
		wantText   string
	}{
		{
			name:       "Prometheus unreachable is 503 naming the backend",
			down:       true,
			wantCode:   http.StatusServiceUnavailable,
			wantReason: metav1.StatusReasonServiceUnavailable,
			wantText:   `Prometheus backend "default"`,
		},
		{
			name:       "Prometheus answering 503 is 503 naming the backend",
			resp:       promtest.Response{Status: 503, ErrorType: "unavailable", Error: "down"},
			wantCode:   http.StatusServiceUnavailable,
			wantReason: metav1.StatusReasonServiceUnavailable,
			wantText:   `Prometheus backend "default"`,
		},
		{
			name:       "a query Prometheus rejects is 500 naming the backend, not the query",
			resp:       promtest.Response{Status: 400, ErrorType: "bad_data", Error: `parse error: unexpected "}" in sum(secret{token="x"})`},
			wantCode:   http.StatusInternalServerError,
			wantReason: metav1.StatusReasonInternalError,
			wantText:   `Prometheus backend "default" failed the query; see the adapter's log`,
		},
	}
	paths := []string{
		"/apis/metrics.k8s.io/v1beta1/namespaces/ns/pods/a",
		"/apis/metrics.k8s.io/v1beta1/namespaces/ns/pods",
		"/apis/metrics.k8s.io/v1beta1/pods",
		"/apis/metrics.k8s.io/v1beta1/nodes/n",
		"/apis/metrics.k8s.io/v1beta1/nodes",
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := promtest.New(t)
			// The handler runs on the server's goroutines, several at
			// once (CPU and memory are asked in parallel).
			var mu sync.Mutex
			var queries []string
			srv.OnQuery(func(q string) promtest.Response {
				mu.Lock()
				defer mu.Unlock()
				queries = append(queries, q)
				return tt.resp
			})
			set := srv.Rules(t, strings.Replace(rulesTemplate, "WINDOW", "", 1), nil)
			if tt.down {
				srv.Close()
			}
			base := serve(t, resourcemetrics.New(resourcemetrics.Options{Rules: func() *ruleset.Set { return set }}))
			for _, path := range paths {
				resp, err := http.Get(base + path)
				if err != nil {
					t.Fatal(err)
				}
				var st metav1.Status
				err = json.NewDecoder(resp.Body).Decode(&st)
				resp.Body.Close()
				if err != nil {
					t.Fatalf("%s: %v", path, err)
				}
				if resp.StatusCode != tt.wantCode || int(st.Code) != tt.wantCode || st.Reason != tt.wantReason || !strings.Contains(st.Message, tt.wantText) {
					t.Errorf("GET %s = %d %s %q, want %d %s mentioning %q", path, resp.StatusCode, st.Reason, st.Message, tt.wantCode, tt.wantReason, tt.wantText)
				}
				// Neither the query nor Prometheus's message, which
				// quotes it, nor the URL a GET carries it in.
				mu.Lock()
				leaks := append(slices.Clone(queries), "sum(", "secret", "127.0.0.1")
				mu.Unlock()
				for _, leak := range leaks {
					if strings.Contains(st.Message, leak) {
						t.Errorf("GET %s: message %q carries %q", path, st.Message, leak)
					}
				}
			}
		})
	}
}

// TestServed checks the storage against what metrics-server's answers:
// selectors, order, objects without samples and tables.
func TestServed(t *testing.T) {
	p, _ := setup(t, "", []promtest.Sample{
		c("ns", "a", "app", 0.25), c("ns", "b", "app", 0.5), c("other", "d", "app", 1), n("n", 2),
	}, []promtest.Sample{
		c("ns", "a", "app", 1<<20), c("ns", "b", "app", 2<<20), c("other", "d", "app", 3<<20), n("n", 4<<20),
	})
	base := serve(t, p)
	const table = "application/json;as=Table;v=v1;g=meta.k8s.io"
	tests := []struct {
		name, path, accept string
		want               string
	}{
		{"namespaced list, sorted, pods without samples left out", "/namespaces/ns/pods", "", "200 ns/a ns/b"},
		{"list in all namespaces", "/pods", "", "200 ns/a ns/b other/d"},
		{"label selector", "/namespaces/ns/pods?labelSelector=app%3Db", "", "200 ns/b"},
		{"field selector", "/pods?fieldSelector=metadata.namespace%3Dother", "", "200 other/d"},
		{"get", "/namespaces/ns/pods/b", "", "200 ns/b"},
		{"get a pod without samples", "/namespaces/ns/pods/c", "", "404"},
		{"get a pod that does not exist", "/namespaces/ns/pods/zz", "", "404"},
		{"nodes", "/nodes", "", "200 n"},
		{"node field selector matching a node without samples: empty list", "/nodes?fieldSelector=metadata.name%3Dm", "", "200 []"},
		{"namespace without pods: empty list, not null", "/namespaces/empty/pods", "", "200 []"},
		{"label selector matching no pod: empty list", "/namespaces/ns/pods?labelSelector=app%3Dnone", "", "200 []"},
		{"label selector matching pods without samples: empty list", "/namespaces/ns/pods?labelSelector=app%3Dc", "", "200 []"},
		{"field selector matching no node: empty list", "/nodes?fieldSelector=metadata.name%3Dzz", "", "200 []"},
		{"get a node without samples", "/nodes/m", "", "404"},
		{"pod table: summed usage per resource, then the window", "/namespaces/ns/pods", table, "200 Name cpu memory Window | a 250m 1Mi 3m0s | b 500m 2Mi 3m0s"},
		{"node table", "/nodes/n", table, "200 Name cpu memory Window | n 2 4Mi 3m0s"},
	}
	for _, version := range []string{"v1beta1", "v1"} {
		for _, tt := range tests {
			t.Run(version+"/"+tt.name, func(t *testing.T) {
				servedPath(t, base, version, tt.path, tt.accept, tt.want)
			})
		}
	}
}

// servedPath checks GET /apis/metrics.k8s.io/VERSION+path: the status and
// the objects' names (or the table's cells) as want says, and that an
// object or list is of VERSION.
func servedPath(t *testing.T, base, version, path, accept, want string) {
	tt := struct{ path, accept, want string }{path, accept, want}
	{
		{
			req, err := http.NewRequest(http.MethodGet, base+"/apis/metrics.k8s.io/"+version+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.accept != "" {
				req.Header.Set("Accept", tt.accept)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			var body struct {
				Items []struct {
					metav1.ObjectMeta `json:"metadata"`
				} `json:"items"`
				metav1.ObjectMeta `json:"metadata"`
				Columns           []metav1.TableColumnDefinition `json:"columnDefinitions"`
				Rows              []metav1.TableRow              `json:"rows"`
			}
			var fields map[string]json.RawMessage
			if err := json.Unmarshal(raw, &body); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(raw, &fields); err != nil {
				t.Fatal(err)
			}
			got := []string{fmt.Sprint(resp.StatusCode)}
			switch {
			case resp.StatusCode != http.StatusOK:
			case tt.accept != "":
				for _, c := range body.Columns {
					got = append(got, c.Name)
				}
				for _, r := range body.Rows {
					got = append(got, "|")
					for _, cell := range r.Cells {
						got = append(got, fmt.Sprint(cell))
					}
				}
			case body.Name != "":
				got = append(got, body.Namespace+"/"+body.Name)
			case len(body.Items) == 0:
				got = append(got, string(fields["items"])) // [] or null
			default:
				for _, m := range body.Items {
					if m.Namespace == "" {
						got = append(got, m.Name)
					} else {
						got = append(got, m.Namespace+"/"+m.Name)
					}
				}
			}
			if g := strings.Join(got, " "); g != tt.want {
				t.Errorf("GET %s = %q, want %q", tt.path, g, tt.want)
			}
			var apiVersion string
			_ = json.Unmarshal(fields["apiVersion"], &apiVersion)
			if resp.StatusCode == http.StatusOK && tt.accept == "" && apiVersion != "metrics.k8s.io/"+version {
				t.Errorf("GET %s: apiVersion %q, want metrics.k8s.io/%s", tt.path, apiVersion, version)
			}
		}
	}
}

// Concurrent requests for one shared list, in JSON and in protobuf, all
// get the bytes of its one encoding per media type (run with -race: the
// list is shared while apimachinery's encoder writes its TypeMeta).
func TestServedShared(t *testing.T) {
	p := podsAB(t, time.Minute, func() time.Time { return time.Unix(1800000000, 0) })
	a, b := pod("ns", "a"), pod("ns", "b")
	a.ResourceVersion, b.ResourceVersion = "10", "11"
	base := serveFrom(t, p, fakeCaches{selected: &sync.Map{}, objs: map[string][]runtime.Object{"pods": {a, b}, "nodes": nil}})

	const protobuf = "application/vnd.kubernetes.protobuf"
	bodies := map[string]map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			accept := []string{"application/json", protobuf}[i%2]
			for range 10 {
				req, _ := http.NewRequest(http.MethodGet, base+"/apis/metrics.k8s.io/v1beta1/namespaces/ns/pods", nil)
				req.Header.Set("Accept", accept)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != accept {
					t.Errorf("%s: %s %s", accept, resp.Status, resp.Header.Get("Content-Type"))
					return
				}
				mu.Lock()
				if bodies[accept] == nil {
					bodies[accept] = map[string]int{}
				}
				bodies[accept][string(body)]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, accept := range []string{"application/json", protobuf} {
		if len(bodies[accept]) != 1 {
			t.Fatalf("%s: %d different bodies, want one", accept, len(bodies[accept]))
		}
		for body := range bodies[accept] {
			obj, _, err := msapi.Codecs.UniversalDeserializer().Decode([]byte(body), nil, nil)
			l, ok := obj.(*metricsv1beta1.PodMetricsList)
			if err != nil || !ok || len(l.Items) != 2 || l.Items[0].Name != "a" || l.Items[1].Containers[0].Usage.Cpu().MilliValue() != 500 {
				t.Errorf("%s: %v %#v", accept, err, obj)
			}
		}
	}
}

// API discovery of metrics.k8s.io lists v1 and v1beta1 and prefers v1, in
// every discovery document: kubectl top asks for v1 when it is listed.
func TestServedDiscovery(t *testing.T) {
	srv := promtest.New(t)
	set := srv.Rules(t, strings.Replace(rulesTemplate, "WINDOW", "", 1), nil)
	base := serve(t, resourcemetrics.New(resourcemetrics.Options{Rules: func() *ruleset.Set { return set }}))
	get := func(t *testing.T, path, accept string, into any) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d %s", path, resp.StatusCode, body)
		}
		if err := json.Unmarshal(body, into); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, body)
		}
	}
	// preferred and served of metrics.k8s.io in each document.
	tests := []struct {
		name string
		read func(t *testing.T) (preferred string, served []string)
	}{
		{"the group (/apis/metrics.k8s.io)", func(t *testing.T) (string, []string) {
			var g metav1.APIGroup
			get(t, "/apis/metrics.k8s.io", "", &g)
			return g.PreferredVersion.GroupVersion, groupVersions(g)
		}},
		{"the group list (/apis)", func(t *testing.T) (string, []string) {
			var l metav1.APIGroupList
			get(t, "/apis", "", &l)
			for _, g := range l.Groups {
				if g.Name == "metrics.k8s.io" {
					return g.PreferredVersion.GroupVersion, groupVersions(g)
				}
			}
			t.Fatalf("/apis does not list metrics.k8s.io: %+v", l)
			return "", nil
		}},
		{"aggregated discovery (/apis, apidiscovery.k8s.io/v2), whose first version is preferred", func(t *testing.T) (string, []string) {
			var l struct {
				Items []struct {
					Metadata metav1.ObjectMeta `json:"metadata"`
					Versions []struct {
						Version string `json:"version"`
					} `json:"versions"`
				} `json:"items"`
			}
			get(t, "/apis", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", &l)
			for _, g := range l.Items {
				if g.Metadata.Name == "metrics.k8s.io" && len(g.Versions) > 0 {
					var served []string
					for _, v := range g.Versions {
						served = append(served, "metrics.k8s.io/"+v.Version)
					}
					return served[0], served
				}
			}
			t.Fatalf("aggregated /apis does not list metrics.k8s.io: %+v", l)
			return "", nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			preferred, served := tt.read(t)
			if strings.Join(served, ",") != "metrics.k8s.io/v1,metrics.k8s.io/v1beta1" || preferred != "metrics.k8s.io/v1" {
				t.Errorf("preferred %q, versions %v; want metrics.k8s.io/v1 of metrics.k8s.io/v1 and v1beta1", preferred, served)
			}
		})
	}
}

func groupVersions(g metav1.APIGroup) []string {
	var out []string
	for _, v := range g.Versions {
		out = append(out, v.GroupVersion)
	}
	return out
}

// TestServedInOneNamespace: an adapter that reads objects in one
// namespace (--namespace) serves PodMetrics there, answers other
// namespaces and lists across namespaces with a 403 saying what to do,
// and serves no NodeMetrics (its discovery has no nodes).
func TestServedInOneNamespace(t *testing.T) {
	p, _ := setup(t, "", []promtest.Sample{
		c("ns", "a", "app", 0.25), c("ns", "b", "app", 0.5), c("other", "d", "app", 1), n("n", 2),
	}, []promtest.Sample{
		c("ns", "a", "app", 1<<20), c("ns", "b", "app", 2<<20), c("other", "d", "app", 3<<20), n("n", 4<<20),
	})
	scheme := runtime.NewScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var objs []runtime.Object
	for _, o := range defaultCaches.objs["pods"] {
		p := o.(*metav1.PartialObjectMetadata).DeepCopy()
		p.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"} // the fake client files objects by kind
		objs = append(objs, p)
	}
	client := metadatafake.NewSimpleMetadataClient(scheme, objs...)
	base := serveFrom(t, p, objects.NewNamespacedInformerLister(t.Context(), client, "ns"))
	for _, tt := range []struct{ name, path, want string }{
		{"its namespace", "/namespaces/ns/pods", "200 ns/a ns/b"},
		{"a pod of its namespace", "/namespaces/ns/pods/b", "200 ns/b"},
		{"another namespace", "/namespaces/other/pods", "403"},
		{"a pod of another namespace", "/namespaces/other/pods/d", "403"},
		{"across namespaces", "/pods", "403"},
		{"nodes are not served", "/nodes", "404"},
	} {
		t.Run(tt.name, func(t *testing.T) { servedPath(t, base, "v1beta1", tt.path, "", tt.want) })
	}
	resp, err := http.Get(base + "/apis/metrics.k8s.io/v1beta1/namespaces/other/pods")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "--namespace=ns") {
		t.Errorf("the 403 does not say why: %s", body)
	}
	var rl metav1.APIResourceList
	resp, err = http.Get(base + "/apis/metrics.k8s.io/v1beta1")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&rl)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var served []string
	for _, r := range rl.APIResources {
		served = append(served, r.Name)
	}
	if !slices.Equal(served, []string{"pods"}) {
		t.Errorf("discovery serves %q, want pods only", served)
	}
}
