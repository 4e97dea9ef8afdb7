package controller

import (
	"context"
	"fmt"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	autoscalingclient "k8s.io/client-go/kubernetes/typed/autoscaling/v2"
	autoscalinglisters "k8s.io/client-go/listers/autoscaling/v2"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/autoscaler/clustercache"
	"github.com/tidal-autoscaler/tidal/autoscaler/internal/jsonmeta"
)

// fieldManager names the autoscaler in managedFields of what it writes.
const fieldManager = "tidal-autoscaler"

// Object is one autoscaler, whatever its kind: the reconciler reads its
// spec and writes its status through this interface. An Object is the
// reconciler's own copy, never the informer cache's.
type Object interface {
	metav1.Object
	// Runtime is the API object, for events.
	Runtime() runtime.Object
	// HPASpec is the autoscaling/v2 spec.
	HPASpec() *autoscalingv2.HorizontalPodAutoscalerSpec
	// HPAStatus is the autoscaling/v2 status; the reconciler modifies it
	// in place.
	HPAStatus() *autoscalingv2.HorizontalPodAutoscalerStatus
	// SetTidalStatus sets tidal's addition to the status (nil removes it);
	// kinds without one ignore it.
	SetTidalStatus(*v1alpha1.TidalStatus)
	// StatusEqual reports whether the whole status, tidal's addition
	// included, equals other's (apimachinery's semantic equality).
	StatusEqual(other Object) bool
	// DeepCopy returns an independent copy.
	DeepCopy() Object
	// PersistedHistory is the stored history (behavior.History.Encode);
	// "" when none.
	PersistedHistory() string
	// SetPersistedHistory stores value with the next status write (see
	// HistoryAnnotation).
	SetPersistedHistory(value string)
}

// Source is the kind of object the controller reconciles. Its two
// implementations are CRDSource and NativeSource.
type Source interface {
	// Kind names the objects, e.g. "HorizontalAutoscaler".
	Kind() string
	// Informer delivers the objects' events; the controller adds its
	// handlers and waits for it to sync. The caller starts it.
	Informer() cache.SharedIndexInformer
	// Get returns a copy of the object from the informer cache, or an
	// error for which apierrors.IsNotFound is true when it is gone.
	Get(namespace, name string) (Object, error)
	// UpdateStatus writes the object's status subresource.
	UpdateStatus(ctx context.Context, obj Object) error
}

// hpaObject is an autoscaling/v2 HorizontalPodAutoscaler.
type hpaObject struct {
	*autoscalingv2.HorizontalPodAutoscaler
}

var _ Object = hpaObject{}

func (o hpaObject) Runtime() runtime.Object { return o.HorizontalPodAutoscaler }
func (o hpaObject) HPASpec() *autoscalingv2.HorizontalPodAutoscalerSpec {
	return &o.Spec
}
func (o hpaObject) HPAStatus() *autoscalingv2.HorizontalPodAutoscalerStatus {
	return &o.Status
}
func (o hpaObject) SetTidalStatus(*v1alpha1.TidalStatus) {}
func (o hpaObject) StatusEqual(other Object) bool {
	return apiequality.Semantic.DeepEqual(o.HPAStatus(), other.HPAStatus())
}
func (o hpaObject) DeepCopy() Object {
	return hpaObject{o.HorizontalPodAutoscaler.DeepCopy()}
}

// An HPA's status update keeps metadata changes (its status strategy
// resets only the spec), so the annotation travels with the status.
func (o hpaObject) PersistedHistory() string { return o.Annotations[HistoryAnnotation] }
func (o hpaObject) SetPersistedHistory(value string) {
	if o.Annotations == nil {
		o.Annotations = map[string]string{}
	}
	o.Annotations[HistoryAnnotation] = value
}

// haObject is a tidal HorizontalAutoscaler.
type haObject struct {
	*v1alpha1.HorizontalAutoscaler
}

var _ Object = haObject{}

func (o haObject) Runtime() runtime.Object { return o.HorizontalAutoscaler }
func (o haObject) HPASpec() *autoscalingv2.HorizontalPodAutoscalerSpec {
	return &o.Spec
}
func (o haObject) HPAStatus() *autoscalingv2.HorizontalPodAutoscalerStatus {
	return &o.Status.HorizontalPodAutoscalerStatus
}
func (o haObject) SetTidalStatus(t *v1alpha1.TidalStatus) { o.Status.Tidal = t }
func (o haObject) StatusEqual(other Object) bool {
	ha, ok := other.(haObject)
	return ok && apiequality.Semantic.DeepEqual(&o.Status, &ha.Status)
}
func (o haObject) DeepCopy() Object {
	return haObject{o.HorizontalAutoscaler.DeepCopy()}
}

// A custom resource's status update drops metadata changes, so the
// history is a status field; the annotation, where an earlier tidal kept
// it, is read when the field is empty.
func (o haObject) PersistedHistory() string {
	if o.Status.Tidal != nil && o.Status.Tidal.History != "" {
		return o.Status.Tidal.History
	}
	return o.Annotations[HistoryAnnotation]
}
func (o haObject) SetPersistedHistory(value string) {
	if o.Status.Tidal == nil {
		o.Status.Tidal = &v1alpha1.TidalStatus{}
	}
	o.Status.Tidal.History = value
}

// nativeSource reconciles autoscaling/v2 HorizontalPodAutoscalers.
type nativeSource struct {
	informer cache.SharedIndexInformer
	lister   autoscalinglisters.HorizontalPodAutoscalerLister
	client   autoscalingclient.HorizontalPodAutoscalersGetter
}

// NativeSource reconciles autoscaling/v2 HorizontalPodAutoscalers from the
// factory's informer, writing status through client.
func NativeSource(factory informers.SharedInformerFactory, client autoscalingclient.HorizontalPodAutoscalersGetter) Source {
	inf := factory.Autoscaling().V2().HorizontalPodAutoscalers()
	return &nativeSource{informer: inf.Informer(), lister: inf.Lister(), client: client}
}

func (s *nativeSource) Kind() string                        { return "HorizontalPodAutoscaler" }
func (s *nativeSource) Informer() cache.SharedIndexInformer { return s.informer }

func (s *nativeSource) Get(namespace, name string) (Object, error) {
	hpa, err := s.lister.HorizontalPodAutoscalers(namespace).Get(name)
	if err != nil {
		return nil, err
	}
	return hpaObject{hpa.DeepCopy()}, nil
}

func (s *nativeSource) UpdateStatus(ctx context.Context, obj Object) error {
	hpa, ok := obj.(hpaObject)
	if !ok {
		return fmt.Errorf("native mode cannot write a %T", obj.Runtime())
	}
	_, err := s.client.HorizontalPodAutoscalers(hpa.Namespace).UpdateStatus(ctx, hpa.HorizontalPodAutoscaler, metav1.UpdateOptions{FieldManager: fieldManager})
	return err
}

// crdSource reconciles HorizontalAutoscalers from a typed informer over a
// JSON REST client: the dynamic client's unstructured maps, and converting
// them to and from the typed object on every reconcile, cost more CPU than
// the rest of a reconcile.
type crdSource struct {
	informer cache.SharedIndexInformer
	writer   haStatusWriter
}

// haStatusWriter writes a HorizontalAutoscaler's status subresource.
type haStatusWriter interface {
	UpdateStatus(ctx context.Context, ha *v1alpha1.HorizontalAutoscaler) error
}

var (
	haScheme = func() *runtime.Scheme {
		s := runtime.NewScheme()
		utilruntime.Must(v1alpha1.AddToScheme(s))
		return s
	}()
	haParams = runtime.NewParameterCodec(haScheme)
)

// haJSON is the HorizontalAutoscaler client's only serializer:
// apimachinery's JSON serializer, as CodecFactory.WithoutConversion builds
// it, except that a document's kind is read by jsonmeta, and so are a
// watch event's envelope and the frames of the watch stream. Every write
// of the controller comes back through the watch; without those full
// encoding/json passes (framing the stream, the kind of the event, then of
// its object, and the envelope's own) a watch stream decodes faster
// (BenchmarkWatchDecode).
type haJSON struct{ info runtime.SerializerInfo }

func newHAJSON() haJSON {
	s := kjson.NewSerializerWithOptions(jsonmeta.MetaFactory{}, haScheme, haScheme, kjson.SerializerOptions{})
	return haJSON{runtime.SerializerInfo{
		MediaType:        runtime.ContentTypeJSON,
		MediaTypeType:    "application",
		MediaTypeSubType: "json",
		EncodesAsText:    true,
		Serializer:       s,
		StreamSerializer: &runtime.StreamSerializerInfo{EncodesAsText: true, Serializer: eventSerializer{Serializer: s}, Framer: jsonmeta.Framer},
	}}
}

// eventSerializer decodes watch events with jsonmeta.Event, and anything
// else (or an event it cannot be sure of) with the JSON serializer. Its
// input is a frame of a watch stream, which jsonmeta.Framer has not
// validated: Event and the object's decoder do. The object's
// metadata.managedFields are cut out before it is decoded (and not
// validated): the informer would drop them (StripManagedFields), and they
// are 40% of the bytes of the controller's own writes coming back.
type eventSerializer struct {
	runtime.Serializer
	// keepManagedFields decodes them too (for BenchmarkWatchDecode).
	keepManagedFields bool
}

// watchEventKind is what the JSON serializer reports decoding a
// WatchEvent as (the scheme's first kind for the type).
var watchEventKind = func() schema.GroupVersionKind {
	kinds, _, err := haScheme.ObjectKinds(&metav1.WatchEvent{})
	utilruntime.Must(err)
	return kinds[0]
}()

func (s eventSerializer) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if ev, ok := into.(*metav1.WatchEvent); ok {
		if typ, obj, ok := jsonmeta.Event(data); ok {
			ev.Type = typ
			ev.Object = runtime.RawExtension{}
			// A copy either way, as it must be: frames' buffers are reused.
			if slim, ok := s.withoutManagedFields(obj); ok {
				ev.Object.Raw = slim
			} else if obj != nil {
				ev.Object.Raw = append([]byte(nil), obj...)
			}
			gvk := watchEventKind
			return into, &gvk, nil
		}
	}
	return s.Serializer.Decode(data, defaults, into)
}

// withoutManagedFields is jsonmeta.WithoutManagedFields, unless the
// managed fields are kept (then it does not look for them).
func (s eventSerializer) withoutManagedFields(obj []byte) ([]byte, bool) {
	if s.keepManagedFields {
		return nil, false
	}
	return jsonmeta.WithoutManagedFields(obj)
}

func (n haJSON) SupportedMediaTypes() []runtime.SerializerInfo {
	return []runtime.SerializerInfo{n.info}
}

func (n haJSON) EncoderForVersion(e runtime.Encoder, gv runtime.GroupVersioner) runtime.Encoder {
	return runtime.WithVersionEncoder{Version: gv, Encoder: e, ObjectTyper: haScheme}
}

func (n haJSON) DecoderToVersion(d runtime.Decoder, _ runtime.GroupVersioner) runtime.Decoder {
	return runtime.WithoutVersionDecoder{Decoder: d}
}

// NewHorizontalAutoscalerClient returns a REST client for
// autoscaling.tidal.dev/v1alpha1 speaking JSON (custom resources have no
// protobuf) with cfg's credentials and rate limits.
func NewHorizontalAutoscalerClient(cfg *rest.Config) (rest.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &v1alpha1.SchemeGroupVersion
	c.APIPath = "/apis"
	c.ContentType = runtime.ContentTypeJSON
	c.AcceptContentTypes = runtime.ContentTypeJSON
	c.NegotiatedSerializer = newHAJSON()
	return rest.RESTClientFor(c)
}

// CRDSource reconciles tidal's HorizontalAutoscalers in all namespaces
// through client (see NewHorizontalAutoscalerClient); its informer
// resyncs every resync and caches objects without their managed fields
// (StripManagedFields). Run the informer (Informer().RunWithContext).
func CRDSource(client rest.Interface, resync time.Duration) Source {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list := &v1alpha1.HorizontalAutoscalerList{}
			err := client.Get().Resource(v1alpha1.Resource).VersionedParams(&opts, haParams).Do(ctx).Into(list)
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.Watch = true
			return client.Get().Resource(v1alpha1.Resource).VersionedParams(&opts, haParams).Watch(ctx)
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &v1alpha1.HorizontalAutoscaler{}, resync,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	_ = inf.SetTransform(clustercache.StripManagedFields) // fails only once started
	return &crdSource{informer: inf, writer: restStatusWriter{client}}
}

type restStatusWriter struct{ client rest.Interface }

// UpdateStatus sends the object and does not decode the answer: the
// informer delivers the written object.
func (w restStatusWriter) UpdateStatus(ctx context.Context, ha *v1alpha1.HorizontalAutoscaler) error {
	return w.client.Put().Namespace(ha.Namespace).Resource(v1alpha1.Resource).Name(ha.Name).SubResource("status").
		VersionedParams(&metav1.UpdateOptions{FieldManager: fieldManager}, haParams).
		Body(ha).Do(ctx).Error()
}

func (s *crdSource) Kind() string                        { return v1alpha1.Kind }
func (s *crdSource) Informer() cache.SharedIndexInformer { return s.informer }

func (s *crdSource) Get(namespace, name string) (Object, error) {
	obj, exists, err := s.informer.GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, apierrors.NewNotFound(v1alpha1.GroupVersionResource.GroupResource(), name)
	}
	ha, ok := obj.(*v1alpha1.HorizontalAutoscaler)
	if !ok {
		return nil, fmt.Errorf("%s %s/%s: informer returned a %T", v1alpha1.Kind, namespace, name, obj)
	}
	return haObject{ha.DeepCopy()}, nil
}

func (s *crdSource) UpdateStatus(ctx context.Context, obj Object) error {
	ha, ok := obj.(haObject)
	if !ok {
		return fmt.Errorf("crd mode cannot write a %T", obj.Runtime())
	}
	return s.writer.UpdateStatus(ctx, ha.HorizontalAutoscaler)
}
