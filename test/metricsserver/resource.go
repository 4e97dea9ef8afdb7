package metricsserver

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/metrics/pkg/apis/metrics"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// resourceScheme holds metrics.k8s.io's internal and v1beta1 types only
// (not v1), so v1beta1 is the group's only and preferred version, as with
// metrics-server.
var (
	resourceScheme = runtime.NewScheme()
	resourceCodecs = serializer.NewCodecFactory(resourceScheme)
)

func init() {
	utilruntime.Must(metrics.AddToScheme(resourceScheme))
	utilruntime.Must(metricsv1beta1.AddToScheme(resourceScheme))
	utilruntime.Must(resourceScheme.SetVersionPriority(metricsv1beta1.SchemeGroupVersion))
	metav1.AddToGroupVersion(resourceScheme, schema.GroupVersion{Version: "v1"})
	resourceScheme.AddUnversionedTypes(schema.GroupVersion{Version: "v1"},
		&metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{})
}

// installResourceMetrics serves metrics.k8s.io/v1beta1 pods on server.
func installResourceMetrics(server *genericapiserver.GenericAPIServer, store *store, pods ranker, window time.Duration, now func() time.Time) error {
	info := genericapiserver.NewDefaultAPIGroupInfo(metrics.GroupName, resourceScheme, metav1.ParameterCodec, resourceCodecs)
	info.PrioritizedVersions = []schema.GroupVersion{metricsv1beta1.SchemeGroupVersion}
	info.VersionedResourcesStorageMap[metricsv1beta1.SchemeGroupVersion.Version] = map[string]rest.Storage{
		"pods": &podMetricsStorage{store: store, pods: pods, window: window, now: now},
	}
	return server.InstallAPIGroup(&info)
}

// podMetricsStorage is the read-only REST storage of PodMetrics.
type podMetricsStorage struct {
	store  *store
	pods   ranker
	window time.Duration
	now    func() time.Time
}

var (
	_ rest.Storage              = (*podMetricsStorage)(nil)
	_ rest.KindProvider         = (*podMetricsStorage)(nil)
	_ rest.Scoper               = (*podMetricsStorage)(nil)
	_ rest.Getter               = (*podMetricsStorage)(nil)
	_ rest.Lister               = (*podMetricsStorage)(nil)
	_ rest.SingularNameProvider = (*podMetricsStorage)(nil)
)

var podMetricsResource = schema.GroupResource{Group: metrics.GroupName, Resource: "pods"}

func (s *podMetricsStorage) New() runtime.Object     { return &metrics.PodMetrics{} }
func (s *podMetricsStorage) Destroy()                {}
func (s *podMetricsStorage) Kind() string            { return "PodMetrics" }
func (s *podMetricsStorage) NamespaceScoped() bool   { return true }
func (s *podMetricsStorage) GetSingularName() string { return "pod" }
func (s *podMetricsStorage) NewList() runtime.Object { return &metrics.PodMetricsList{} }

func (s *podMetricsStorage) ConvertToTable(ctx context.Context, obj runtime.Object, opts runtime.Object) (*metav1.Table, error) {
	return rest.NewDefaultTableConvertor(podMetricsResource).ConvertToTable(ctx, obj, opts)
}

func (s *podMetricsStorage) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	selector := labels.Everything()
	if opts != nil && opts.LabelSelector != nil {
		selector = opts.LabelSelector
	}
	pods, ranks, err := s.pods.selected(genericapirequest.NamespaceValue(ctx), selector)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	list := &metrics.PodMetricsList{}
	for _, pod := range pods {
		if m, ok := s.podMetrics(pod, ranks[pod.UID]); ok {
			list.Items = append(list.Items, m)
		}
	}
	return list, nil
}

func (s *podMetricsStorage) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	pod, rank, err := s.pods.named(genericapirequest.NamespaceValue(ctx), name)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if pod != nil {
		if m, ok := s.podMetrics(pod, rank); ok {
			return &m, nil
		}
	}
	return nil, apierrors.NewNotFound(podMetricsResource, name)
}

// podMetrics returns the usage of the pod's containers that have values,
// sidecars (init containers that keep running) included, as the kubelet
// reports them to metrics-server; false when none has.
func (s *podMetricsStorage) podMetrics(pod *corev1.Pod, rank int) (metrics.PodMetrics, bool) {
	m := metrics.PodMetrics{
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace, Labels: pod.Labels,
			CreationTimestamp: metav1.NewTime(s.now()),
		},
		Timestamp: metav1.NewTime(s.now()),
		Window:    metav1.Duration{Duration: s.window},
	}
	containers := slices.Clone(pod.Spec.Containers)
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			containers = append(containers, c)
		}
	}
	for _, c := range containers {
		if usage := s.store.containerUsage(pod, c.Name, rank); len(usage) > 0 {
			m.Containers = append(m.Containers, metrics.ContainerMetrics{Name: c.Name, Usage: usage})
		}
	}
	return m, len(m.Containers) > 0
}

// resourceMetricsOpenAPI describes metrics.k8s.io/v1beta1's pod types; the
// generic server builds its field managers from these models.
func resourceMetricsOpenAPI(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	str := spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"string"}}}
	refTo := func(name string) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Ref: ref(name)}}
	}
	array := func(of spec.Schema) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"array"}, Items: &spec.SchemaOrArray{Schema: &of}}}
	}
	object := func(props map[string]spec.Schema, required ...string) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"object"}, Properties: props, Required: required}}
	}
	quantity := resource.Quantity{}.OpenAPIModelName()
	objectMeta, listMeta := metav1.ObjectMeta{}.OpenAPIModelName(), metav1.ListMeta{}.OpenAPIModelName()
	timeName, durationName := metav1.Time{}.OpenAPIModelName(), metav1.Duration{}.OpenAPIModelName()
	container := metricsv1beta1.ContainerMetrics{}.OpenAPIModelName()
	pod := metricsv1beta1.PodMetrics{}.OpenAPIModelName()
	usage := refTo(quantity)
	return map[string]common.OpenAPIDefinition{
		container: {
			Schema: object(map[string]spec.Schema{
				"name": str,
				"usage": {SchemaProps: spec.SchemaProps{Type: []string{"object"},
					AdditionalProperties: &spec.SchemaOrBool{Allows: true, Schema: &usage}}},
			}, "name", "usage"),
			Dependencies: []string{quantity},
		},
		pod: {
			Schema: object(map[string]spec.Schema{
				"kind": str, "apiVersion": str,
				"metadata":   refTo(objectMeta),
				"timestamp":  refTo(timeName),
				"window":     refTo(durationName),
				"containers": array(refTo(container)),
			}, "timestamp", "window", "containers"),
			Dependencies: []string{objectMeta, timeName, durationName, container},
		},
		metricsv1beta1.PodMetricsList{}.OpenAPIModelName(): {
			Schema: object(map[string]spec.Schema{
				"kind": str, "apiVersion": str,
				"metadata": refTo(listMeta),
				"items":    array(refTo(pod)),
			}, "items"),
			Dependencies: []string{listMeta, pod},
		},
	}
}
