package source

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/autoscaler/clustercache"
	"github.com/tidal-autoscaler/tidal/autoscaler/internal/jsonmeta"
	"github.com/tidal-autoscaler/tidal/autoscaler/internal/pbwire"
)

// haObject is a tidal HorizontalAutoscaler.
type haObject struct {
	*v1alpha1.HorizontalAutoscaler
}

var _ Object = haObject{}

func (o haObject) Runtime() runtime.Object { return o.HorizontalAutoscaler }
func (o haObject) HPASpec() *autoscalingv2.HorizontalPodAutoscalerSpec {
	return &o.Spec.HorizontalPodAutoscalerSpec
}
func (o haObject) HPAStatus() *autoscalingv2.HorizontalPodAutoscalerStatus {
	return &o.Status.HorizontalPodAutoscalerStatus
}
func (o haObject) SetTidalStatus(t *v1alpha1.TidalStatus) { o.Status.Tidal = t }
func (o haObject) StatusEqual(other Object) bool {
	ha, ok := other.(haObject)
	return ok && !statusDiffers(o.HPAStatus(), ha.HPAStatus()) && apiequality.Semantic.DeepEqual(&o.Status, &ha.Status)
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
func (o haObject) HistoryInAnnotation() bool {
	return (o.Status.Tidal == nil || o.Status.Tidal.History == "") && o.Annotations[HistoryAnnotation] != ""
}
func (o haObject) SetPersistedHistory(value string) {
	if o.Status.Tidal == nil {
		o.Status.Tidal = &v1alpha1.TidalStatus{}
	}
	o.Status.Tidal.History = value
}

func (o haObject) Extensions() Extensions { return crdExtensions(o.Spec.TidalSpec) }
func (o haObject) MetricFailures() int32 {
	if o.Status.Tidal == nil {
		return 0
	}
	return o.Status.Tidal.MetricFailures
}
func (o haObject) SetMetricFailures(n int32) {
	if o.Status.Tidal == nil {
		if n == 0 {
			return
		}
		o.Status.Tidal = &v1alpha1.TidalStatus{}
	}
	o.Status.Tidal.MetricFailures = n
}

// ObjectOfHA is the Object of ha, which it modifies in place.
func ObjectOfHA(ha *v1alpha1.HorizontalAutoscaler) Object { return haObject{ha} }

// them to and from the typed object on every reconcile, cost more CPU than
// the rest of a reconcile.
type crdSource struct {
	informer cache.SharedIndexInformer
	writer   StatusWriter
}

// StatusWriter writes a HorizontalAutoscaler's status subresource.
type StatusWriter interface {
	UpdateStatus(ctx context.Context, ha *v1alpha1.HorizontalAutoscaler) error
}

// CRDSourceWith reconciles the HorizontalAutoscalers of informer, writing
// their status with writer: for tests, and for transports other than
// NewHorizontalAutoscalerClients'. The caller runs the informer.
func CRDSourceWith(informer cache.SharedIndexInformer, writer StatusWriter) Source {
	return &crdSource{informer: informer, writer: writer}
}

// CRDSource reconciles the HorizontalAutoscalers listed and watched
// through clients.Watch, writing their status through clients.Status (see
// NewHorizontalAutoscalerClients); its informer resyncs every resync and
// caches objects without their managed fields (StripManagedFields). Run
// the informer (Informer().RunWithContext).
func CRDSource(clients HAClients, resync time.Duration) Source {
	return CRDSourceIn(clients, metav1.NamespaceAll, resync)
}

// CRDSourceIn is CRDSource for the HorizontalAutoscalers of one namespace
// (metav1.NamespaceAll: every namespace), listed and watched there only,
// so that a Role in that namespace is enough.
func CRDSourceIn(clients HAClients, namespace string, resync time.Duration) Source {
	client := clients.Watch
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list := &v1alpha1.HorizontalAutoscalerList{}
			err := client.Get().Namespace(namespace).Resource(v1alpha1.Resource).VersionedParams(&opts, haParams).Do(ctx).Into(list)
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.Watch = true
			return client.Get().Namespace(namespace).Resource(v1alpha1.Resource).VersionedParams(&opts, haParams).Watch(ctx)
		},
	}
	// A reflector drops the watched objects of a type other than its
	// example's: with deferral, or echoes kept, the watch also sends
	// deferredHAs.
	var example runtime.Object = &v1alpha1.HorizontalAutoscaler{}
	if clients.defers || clients.echoes != nil {
		example = nil
	}
	inf := cache.NewSharedIndexInformer(lw, example, resync,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	_ = inf.SetTransform(clustercache.CustomResourceTransform) // fails only once started
	return &crdSource{informer: inf, writer: restStatusWriter{
		put:    newStatusPutter(clients.Status, clients.StatusUserAgent, crdAnswer, clients.StatusLimiter, v1alpha1.SchemeGroupVersion, v1alpha1.Resource),
		echoes: clients.echoes,
		cache:  inf.GetIndexer(),
	}}
}

// restStatusWriter writes statuses with put and, with echoes set, records
// there each write and the object it stored, known from the object in
// cache that the write was computed from (see echoes).
type restStatusWriter struct {
	put    statusPutter
	echoes *echoes
	cache  cache.Indexer
}

func (w restStatusWriter) UpdateStatus(ctx context.Context, ha *v1alpha1.HorizontalAutoscaler) error {
	body, err := encodeStatusBody(haStatusBody{TypeMeta: haTypeMeta, ObjectMeta: ha.ObjectMeta, Status: ha.Status})
	if err != nil {
		return fmt.Errorf("cannot encode the status of %s %s/%s: %w", v1alpha1.Kind, ha.Namespace, ha.Name, err)
	}
	from := w.cachedAt(ha.Namespace, ha.Name, ha.ResourceVersion)
	var inFlight *write
	if from != nil {
		inFlight = w.echoes.begin(ha.Namespace, ha.Name)
	}
	version, err := w.put.put(ctx, ha.Namespace, ha.Name, body)
	if inFlight != nil {
		var stored *v1alpha1.HorizontalAutoscaler
		if err == nil {
			stored, _ = storedObject(from, &ha.Status, body, version)
		}
		w.echoes.finish(inFlight, stored)
	}
	return err
}

// cachedAt is the cached object namespace/name if echoes are kept and it
// is at version: the object a write conditioned on version replaces
// (nil: none such, or the echo may be in already).
func (w restStatusWriter) cachedAt(namespace, name, version string) *v1alpha1.HorizontalAutoscaler {
	if w.echoes == nil {
		return nil
	}
	obj, ok, _ := w.cache.GetByKey(namespace + "/" + name)
	if !ok {
		return nil
	}
	var ha *v1alpha1.HorizontalAutoscaler
	switch o := obj.(type) {
	case *v1alpha1.HorizontalAutoscaler:
		ha = o
	case *deferredHA:
		// Read already: the write was computed from it.
		ha, _ = o.full()
	}
	if ha == nil || ha.ResourceVersion != version {
		return nil
	}
	return ha
}

// haStatusBody is the body of a HorizontalAutoscaler's status write: the
// object without its spec. kube-apiserver ignores the spec a write to
// /status sends: the status strategy keeps everything of the stored
// object but its status, and the field manager leaves the spec's owners
// as they were (spec is the subresource's reset field, left out of the
// comparison that moves ownership). Sent anyway, the spec was encoded,
// then decoded, pruned and defaulted by kube-apiserver, for every write.
// Only a mutating admission webhook on horizontalautoscalers/status would
// see the difference (validating admission sees the object as stored).
type haStatusBody struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Status            v1alpha1.HorizontalAutoscalerStatus `json:"status"`
}

var haTypeMeta = metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.Kind}

// statusPutter writes objects of one resource to their status subresource
// through client.
type statusPutter struct {
	client rest.Interface
	// prefix is the path of every namespace's resources, up to the
	// namespace ("/apis/GROUP/VERSION/namespaces"), after the host's.
	prefix, resource string
	// userAgent is set on each request as client's transport would set
	// it: client-go's User-Agent round tripper copies every request (and
	// its headers) that comes without one (3% of the controller's
	// allocations at 1,000 autoscalers).
	userAgent string
	// accept asks for the written object's metadata alone as the answer
	// (metadataAnswer), which put discards anyway.
	accept   string
	throttle throttle
}

// newStatusPutter writes the status of resource of gv through client,
// whose API path is /apis (a host's own path, as a proxy's, comes first)
// and whose transport sends userAgent (empty: none set), waiting on
// limiter (nil: none) before each write; client has no limiter of its own
// (statusConfig). accept is the Accept header of the writes (see
// metadataAnswer).
func newStatusPutter(client rest.Interface, userAgent, accept string, limiter flowcontrol.RateLimiter, gv schema.GroupVersion, resource string) statusPutter {
	p := statusPutter{client: client, prefix: "/apis/" + gv.String() + "/namespaces", resource: resource, userAgent: userAgent, accept: accept}
	// The URL client-go's metrics template would make of every write.
	template := client.Put().AbsPath(p.prefix, "{namespace}", resource, "{name}", "status").Param("fieldManager", "{value}").URL()
	p.throttle = newThrottle(limiter, *template)
	return p
}

// put writes obj to the status subresource of namespace/name and returns
// the resourceVersion the answer gives (see answerVersion); it decodes
// nothing else: the informer delivers the written object. The answer is
// read into a pooled buffer (the connection is then reused), where Do's
// io.ReadAll grew a new buffer for each answer, 6% of the controller's
// allocations at 1,000 autoscalers; a failure is the Status error Do
// gives. The field manager is set as the query parameter
// metav1.UpdateOptions would give: converting the options by
// reflection cost 6% of a status write in a profile. The path is given
// whole (AbsPath), as Namespace, Resource, Name and SubResource would
// build it: client-go builds a request's URL four times (its rate limiter's
// and latency's metrics, the request, its log), and from those parts each
// time with three path.Join (6% of the allocations at 1,000 autoscalers).
//
// body is a runtime.Object, encoded by client's serializer, or a JSON
// document.
func (p statusPutter) put(ctx context.Context, namespace, name string, body any) (resourceVersion string, err error) {
	for _, part := range [...]struct{ what, value string }{{"namespace", namespace}, {"name", name}} {
		msgs := content.IsPathSegmentName(part.value)
		if part.value == "" {
			msgs = []string{"may not be empty"}
		}
		if len(msgs) > 0 {
			return "", fmt.Errorf("cannot write the status of %s %q in namespace %q: its %s %s", p.resource, name, namespace, part.what, strings.Join(msgs, ", "))
		}
	}
	if err := p.throttle.wait(ctx); err != nil {
		return "", err
	}
	req := p.client.Put().AbsPath(p.prefix, namespace, p.resource, name, "status").
		Param("fieldManager", FieldManager).
		Body(body)
	if _, ok := body.([]byte); ok {
		req.SetHeader("Content-Type", runtime.ContentTypeJSON) // Body sets it for objects only
	}
	if p.userAgent != "" {
		req.SetHeader("User-Agent", p.userAgent)
	}
	req.SetHeader("Accept", p.accept)
	answer, err := req.Stream(ctx)
	if err != nil {
		return "", err
	}
	defer answer.Close()
	buf := answerBuffers.Get().(*[maxAnswer]byte)
	defer answerBuffers.Put(buf)
	n, err := io.ReadFull(answer, buf[:])
	switch err {
	case io.EOF, io.ErrUnexpectedEOF: // the whole answer
		return answerVersion(buf[:n]), nil
	case nil: // not the metadata asked for: a whole object, left unread
		_, err = io.Copy(io.Discard, answer)
	}
	return "", err
}

// answerBuffers hold status writes' answers while their resourceVersion is
// read: a kilobyte or two of metadata each.
var answerBuffers = sync.Pool{New: func() any { return new([maxAnswer]byte) }}

// maxAnswer is the longest answer whose resourceVersion put reads.
const maxAnswer = 32 << 10

// answerVersion is the resourceVersion of the object a status write's
// answer describes, in protobuf (see protobufAnswerVersion) or JSON (""
// where the answer is neither, or not such an object: the write succeeded
// anyway).
func answerVersion(answer []byte) string {
	if bytes.HasPrefix(answer, pbwire.Prefix) {
		return protobufAnswerVersion(answer)
	}
	h, ok := jsonmeta.ReadHead(answer)
	if !ok {
		return ""
	}
	return h.ResourceVersion
}

// Field numbers of metav1.PartialObjectMetadata and metav1.ObjectMeta
// (k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto).
const (
	partialObjectMetadataMetadata = 1
	objectMetaResourceVersion     = 6
)

// protobufAnswerVersion is answerVersion for a protobuf
// PartialObjectMetadata: it steps over the other fields by their lengths,
// where reading the JSON answer scanned every byte of its managed fields
// (2% of crd mode's CPU at 1,000 autoscalers). A field repeated takes its
// last value, as the generated decoder's merge does; "" for any other
// kind, or a malformed answer.
func protobufAnswerVersion(answer []byte) string {
	e, err := pbwire.ReadEnvelope(answer)
	if err != nil || string(e.APIVersion) != "meta.k8s.io/v1" || string(e.Kind) != "PartialObjectMetadata" {
		return ""
	}
	var version []byte
	err = pbwire.Each(e.Raw, func(f pbwire.Field) error {
		if f.Num != partialObjectMetadataMetadata {
			return nil
		}
		meta, err := f.BytesOf("PartialObjectMetadata.metadata")
		if err != nil {
			return err
		}
		return pbwire.Each(meta, func(f pbwire.Field) error {
			var err error
			if f.Num == objectMetaResourceVersion {
				version, err = f.BytesOf("ObjectMeta.resourceVersion")
			}
			return err
		})
	})
	if err != nil {
		return ""
	}
	return string(version)
}

// partialMetadata is the media type parameter asking kube-apiserver to
// answer with the object's metadata.k8s.io PartialObjectMetadata, which it
// honours for every verb of every resource, custom ones included.
const partialMetadata = ";as=PartialObjectMetadata;g=meta.k8s.io;v=v1"

// crdAnswer is the Accept header of crd mode's status writes: the
// metadata in protobuf first, which kube-apiserver encodes for custom
// resources too (for the types of meta.k8s.io, not for the resource
// itself), then metadataAnswer of JSON, the client's type, in which
// errors come.
var crdAnswer = runtime.ContentTypeProtobuf + partialMetadata + "," + metadataAnswer(runtime.ContentTypeJSON)

// metadataAnswer is the Accept header of a status write whose client
// accepts accept: each of its media types as PartialObjectMetadata first,
// then the types themselves. The answer to a write is discarded, so its
// metadata is enough; kube-apiserver then encodes, and the writer reads,
// a fraction of the object (no spec, no status) for every reconcile whose
// metrics moved. The plain types after them keep the write working where a
// server (or a proxy) refuses the transform, and are what errors come in.
func metadataAnswer(accept string) string {
	var b strings.Builder
	types := strings.Split(accept, ",")
	for _, t := range types {
		if t = strings.TrimSpace(t); t != "" {
			b.WriteString(t + partialMetadata + ",")
		}
	}
	b.WriteString(accept)
	return b.String()
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
	switch o := obj.(type) {
	case *v1alpha1.HorizontalAutoscaler:
		return haObject{o}, nil
	case *deferredHA:
		ha, err := o.full()
		if err != nil {
			return nil, err
		}
		return haObject{ha}, nil
	default:
		return nil, fmt.Errorf("%s %s/%s: informer returned a %T", v1alpha1.Kind, namespace, name, obj)
	}
}

func (s *crdSource) UpdateStatus(ctx context.Context, obj Object) error {
	ha, ok := obj.(haObject)
	if !ok {
		return fmt.Errorf("crd mode cannot write a %T", obj.Runtime())
	}
	return s.writer.UpdateStatus(ctx, ha.HorizontalAutoscaler)
}
