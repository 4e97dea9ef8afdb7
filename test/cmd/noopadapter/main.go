// Command noopadapter is the ceiling of the adapter benchmarks
// (test/bench/adapter): an aggregated API server on the stack Tidal's
// adapter is built on (k8s.io/apiserver, custom-metrics-apiserver's
// AdapterBase and installer, metrics-server's metrics.k8s.io storage
// wiring), which answers every pods/* custom-metric request and every
// PodMetrics list with one list built at start, of --items items. It asks
// nothing of Prometheus or of the cluster, and encodes each list once per
// content type and version, then writes its bytes (as Tidal's adapter
// serves its cached answers: see encodedOnce), and authenticates and
// authorizes with the adapter's caches (internal/frontproxy,
// internal/authzcache), so what a request costs through it is what the
// apiserver stack and kube-apiserver's proxy cost.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	genericapi "k8s.io/apiserver/pkg/endpoints"
	"k8s.io/apiserver/pkg/endpoints/discovery"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/component-base/logs"
	"k8s.io/klog/v2"
	openapicommon "k8s.io/kube-openapi/pkg/common"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	"k8s.io/metrics/pkg/apis/metrics"
	cmapiserver "sigs.k8s.io/custom-metrics-apiserver/pkg/apiserver"
	cminstaller "sigs.k8s.io/custom-metrics-apiserver/pkg/apiserver/installer"
	basecmd "sigs.k8s.io/custom-metrics-apiserver/pkg/cmd"

	"github.com/tidal-autoscaler/tidal/internal/authzcache"
	"github.com/tidal-autoscaler/tidal/internal/frontproxy"
	generatedcore "sigs.k8s.io/custom-metrics-apiserver/pkg/generated/openapi/core"
	generatedcustommetrics "sigs.k8s.io/custom-metrics-apiserver/pkg/generated/openapi/custommetrics"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/provider"
	cmstorage "sigs.k8s.io/custom-metrics-apiserver/pkg/registry/custom_metrics"
	msapi "sigs.k8s.io/metrics-server/pkg/api"
	msopenapi "sigs.k8s.io/metrics-server/pkg/api/generated/openapi"
)

func main() {
	logs.InitLogs()
	defer logs.FlushLogs()

	cmd := &basecmd.AdapterBase{Name: "noop-adapter"}
	items := cmd.Flags().Int("items", 100, "Items in every answer.")
	namespace := cmd.Flags().String("namespace", "bench", "Namespace of the objects the answers describe.")
	metric := cmd.Flags().String("metric", "http_requests_per_second", "The one pods custom metric discovery lists.")
	logs.AddFlags(cmd.Flags())
	if err := cmd.Flags().Parse(os.Args); err != nil {
		klog.Fatalf("unable to parse flags: %v", err)
	}
	cmd.OpenAPIConfig, cmd.OpenAPIV3Config = openAPIConfigs()
	// The ceiling authenticates and authorizes as Tidal's adapter does
	// (adapter/app/config.go): the aggregator's certificate verified once,
	// allow decisions reused for a second.
	cfg, err := cmd.Config()
	if err != nil {
		klog.Fatalf("unable to build the server configuration: %v", err)
	}
	authn := &cfg.GenericConfig.Authentication
	authn.Authenticator = frontproxy.New(authn.RequestHeaderConfig, authn.Authenticator)
	if cfg.GenericConfig.Authorization.Authorizer != nil {
		cfg.GenericConfig.Authorization.Authorizer = authzcache.New(cfg.GenericConfig.Authorization.Authorizer)
	}
	// No custom metrics provider for the AdapterBase: its installer builds
	// the group's serializer where it cannot be wrapped; install does what
	// it does, with the serializer wrapped.
	server, err := cmd.Server()
	if err != nil {
		klog.Fatalf("unable to build the server: %v", err)
	}
	if _, err := install(server.GenericAPIServer, *items, *namespace, *metric, metav1.NewTime(time.Now())); err != nil {
		klog.Fatalf("unable to install the APIs: %v", err)
	}
	if err := cmd.Run(context.Background()); err != nil {
		klog.Fatalf("unable to run the no-op adapter: %v", err)
	}
}

// install serves custom.metrics.k8s.io and metrics.k8s.io on s, answering
// every pods/* request and every PodMetrics list with a list of items
// items built here, each encoded once per encoder: the encodedOnce it
// returns keeps the bytes.
func install(s *genericapiserver.GenericAPIServer, items int, namespace, metric string, at metav1.Time) (*encodedOnce, error) {
	custom := &fixedCustom{list: customList(items, namespace, metric, at), metric: metric}
	pods := &fixedStorage{kind: "PodMetrics", list: podMetricsList(items, namespace, at), newObj: func() runtime.Object { return &metrics.PodMetrics{} }}
	nodes := &fixedStorage{kind: "NodeMetrics", list: &metrics.NodeMetricsList{}, newObj: func() runtime.Object { return &metrics.NodeMetrics{} }, cluster: true}
	encodings := newEncodedOnce(custom.list, pods.list)
	if err := installCustomMetrics(s, custom, encodings); err != nil {
		return nil, fmt.Errorf("custom.metrics.k8s.io: %w", err)
	}
	info := msapi.Build(pods, nodes)
	info.NegotiatedSerializer = encodings.NegotiatedSerializer(info.NegotiatedSerializer)
	if err := s.InstallAPIGroup(&info); err != nil {
		return nil, fmt.Errorf("metrics.k8s.io: %w", err)
	}
	return encodings, nil
}

// installCustomMetrics is custom-metrics-apiserver's
// InstallCustomMetricsAPI (every version, discovery naming the first),
// with the group's serializer wrapped by encodings, as Tidal's adapter
// installs it (adapter/app/install.go).
func installCustomMetrics(s *genericapiserver.GenericAPIServer, p provider.CustomMetricsProvider, encodings *encodedOnce) error {
	groupInfo := genericapiserver.NewDefaultAPIGroupInfo(custom_metrics.GroupName, cmapiserver.Scheme, runtime.NewParameterCodec(cmapiserver.Scheme), cmapiserver.Codecs)
	groupInfo.NegotiatedSerializer = encodings.NegotiatedSerializer(groupInfo.NegotiatedSerializer)
	container := s.Handler.GoRestfulContainer
	for i, gv := range groupInfo.PrioritizedVersions {
		api := &cminstaller.MetricsAPIGroupVersion{
			DynamicStorage: cmstorage.NewREST(p),
			APIGroupVersion: &genericapi.APIGroupVersion{
				Root:             genericapiserver.APIGroupPrefix,
				GroupVersion:     gv,
				MetaGroupVersion: groupInfo.MetaGroupVersion,
				ParameterCodec:   groupInfo.ParameterCodec,
				Serializer:       groupInfo.NegotiatedSerializer,
				Creater:          groupInfo.Scheme,
				Convertor:        groupInfo.Scheme,
				UnsafeConvertor:  runtime.UnsafeObjectConvertor(groupInfo.Scheme),
				Typer:            groupInfo.Scheme,
				Namer:            runtime.Namer(meta.NewAccessor()),
			},
			ResourceLister: provider.NewCustomMetricResourceLister(p),
			Handlers:       &cminstaller.CMHandlers{},
		}
		if err := api.InstallREST(container); err != nil {
			return err
		}
		if i == 0 {
			v := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version}
			group := metav1.APIGroup{Name: gv.Group, Versions: []metav1.GroupVersionForDiscovery{v}, PreferredVersion: v}
			s.DiscoveryGroupManager.AddGroup(group)
			container.Add(discovery.NewAPIGroupHandler(s.Serializer, group).WebService())
		}
	}
	return nil
}

// openAPIConfigs describe custom.metrics.k8s.io and metrics.k8s.io, as
// Tidal's adapter does (the AdapterBase's default knows only the first).
func openAPIConfigs() (*openapicommon.Config, *openapicommon.OpenAPIV3Config) {
	getters := []openapicommon.GetOpenAPIDefinitions{generatedcore.GetOpenAPIDefinitions, generatedcustommetrics.GetOpenAPIDefinitions, msopenapi.GetOpenAPIDefinitions}
	defs := func(ref openapicommon.ReferenceCallback) map[string]openapicommon.OpenAPIDefinition {
		merged := map[string]openapicommon.OpenAPIDefinition{}
		for _, get := range getters {
			for name, def := range get(ref) {
				merged[name] = def
			}
		}
		return merged
	}
	namer := openapinamer.NewDefinitionNamer(cmapiserver.Scheme, msapi.Scheme)
	return genericapiserver.DefaultOpenAPIConfig(defs, namer), genericapiserver.DefaultOpenAPIV3Config(defs, namer)
}

// customList is the answer to every pods/* request: one value per pod.
func customList(n int, namespace, metric string, at metav1.Time) *custom_metrics.MetricValueList {
	window := int64(60)
	l := &custom_metrics.MetricValueList{}
	for i := range n {
		l.Items = append(l.Items, custom_metrics.MetricValue{
			DescribedObject: custom_metrics.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: namespace, Name: podName(i), UID: types.UID(fmt.Sprintf("noop-%d", i))},
			Metric:          custom_metrics.MetricIdentifier{Name: metric},
			Timestamp:       at,
			WindowSeconds:   &window,
			Value:           *resource.NewMilliQuantity(int64(i%10+1)*1000, resource.DecimalSI),
		})
	}
	return l
}

// podMetricsList is the answer to every PodMetrics list: an app container
// per pod, as the benchmark's rules serve.
func podMetricsList(n int, namespace string, at metav1.Time) *metrics.PodMetricsList {
	l := &metrics.PodMetricsList{}
	for i := range n {
		l.Items = append(l.Items, metrics.PodMetrics{
			ObjectMeta: metav1.ObjectMeta{Name: podName(i), Namespace: namespace, Labels: map[string]string{"app": "web"}},
			Timestamp:  at,
			Window:     metav1.Duration{Duration: time.Minute},
			Containers: []metrics.ContainerMetrics{{Name: "app", Usage: corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewMilliQuantity(int64(i%10+1)*100, resource.DecimalSI),
				corev1.ResourceMemory: *resource.NewQuantity(int64(i%10+1)*64<<20, resource.BinarySI),
			}}},
		})
	}
	return l
}

func podName(i int) string { return fmt.Sprintf("noop-%04d", i) }

// fixedCustom serves custom.metrics.k8s.io: the same list for every
// selector query, one pods metric in discovery.
type fixedCustom struct {
	list   *custom_metrics.MetricValueList
	metric string
}

var _ provider.CustomMetricsProvider = (*fixedCustom)(nil)

func (p *fixedCustom) GetMetricByName(context.Context, types.NamespacedName, provider.CustomMetricInfo, labels.Selector) (*custom_metrics.MetricValue, error) {
	return &p.list.Items[0], nil
}

func (p *fixedCustom) GetMetricBySelector(context.Context, string, labels.Selector, provider.CustomMetricInfo, labels.Selector) (*custom_metrics.MetricValueList, error) {
	return p.list, nil
}

func (p *fixedCustom) ListAllMetrics() []provider.CustomMetricInfo {
	return []provider.CustomMetricInfo{{GroupResource: schema.GroupResource{Resource: "pods"}, Namespaced: true, Metric: p.metric}}
}

// fixedStorage is a read-only REST storage answering every list with list.
type fixedStorage struct {
	kind    string
	list    runtime.Object
	newObj  func() runtime.Object
	cluster bool
}

var (
	_ rest.Storage              = (*fixedStorage)(nil)
	_ rest.KindProvider         = (*fixedStorage)(nil)
	_ rest.Scoper               = (*fixedStorage)(nil)
	_ rest.Lister               = (*fixedStorage)(nil)
	_ rest.Getter               = (*fixedStorage)(nil)
	_ rest.SingularNameProvider = (*fixedStorage)(nil)
)

func (s *fixedStorage) New() runtime.Object   { return s.newObj() }
func (s *fixedStorage) Destroy()              {}
func (s *fixedStorage) Kind() string          { return s.kind }
func (s *fixedStorage) NamespaceScoped() bool { return !s.cluster }
func (s *fixedStorage) GetSingularName() string {
	return map[bool]string{false: "pod", true: "node"}[s.cluster]
}
func (s *fixedStorage) NewList() runtime.Object { return s.list.DeepCopyObject() }

func (s *fixedStorage) List(context.Context, *metainternalversion.ListOptions) (runtime.Object, error) {
	return s.list, nil
}

func (s *fixedStorage) Get(_ context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	if l, ok := s.list.(*metrics.PodMetricsList); ok && len(l.Items) > 0 {
		return &l.Items[0], nil
	}
	return nil, fmt.Errorf("%s %q: the no-op adapter serves lists only", s.kind, name)
}

func (s *fixedStorage) ConvertToTable(ctx context.Context, obj, opts runtime.Object) (*metav1.Table, error) {
	return rest.NewDefaultTableConvertor(schema.GroupResource{Group: metrics.GroupName, Resource: s.GetSingularName() + "s"}).ConvertToTable(ctx, obj, opts)
}
