package source

import (
	"bytes"
	"fmt"

	jsonv2 "github.com/go-json-experiment/json"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/autoscaler/internal/jsonmeta"
)

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

// newJSONSerializer is apimachinery's JSON serializer for haScheme, with
// the kind read by jsonmeta.
func newJSONSerializer() runtime.Serializer {
	return kjson.NewSerializerWithOptions(jsonmeta.MetaFactory{}, haScheme, haScheme, kjson.SerializerOptions{})
}

func newHAJSON(deferred Deferred, echoes *echoes) haJSON {
	s := newJSONSerializer()
	return haJSON{runtime.SerializerInfo{
		MediaType:        runtime.ContentTypeJSON,
		MediaTypeType:    "application",
		MediaTypeSubType: "json",
		EncodesAsText:    true,
		Serializer:       haDecoder{Serializer: s, deferred: deferred, echoes: echoes},
		StreamSerializer: &runtime.StreamSerializerInfo{EncodesAsText: true, Serializer: eventSerializer{Serializer: s}, Framer: jsonmeta.Framer},
	}}
}

// haDecoder decodes a HorizontalAutoscaler into a new object with
// encoding/json/v2's semantics (github.com/go-json-experiment/json, the
// module the standard library's package mirrors): about twice as fast as
// the JSON serializer's sigs.k8s.io/json, with half the allocations
// (BenchmarkHADecode), and it decodes every object of the watch, where
// the controller's own status writes come back. For what the apiserver
// sends for this CRD (valid JSON, pruned to the schema's fields, whose
// names match the Go tags exactly) both give the same object: v2 matches
// names case-sensitively as sigs.k8s.io/json does, ignores unknown
// members, and calls the UnmarshalJSON of metav1.Time and
// resource.Quantity; the types hold no interface values, where
// sigs.k8s.io/json's int preservation would differ. Where v2 refuses
// (duplicate names, invalid UTF-8, a value of the wrong type) the JSON
// serializer decodes the document, so its answer, or its error, is the
// one returned. Anything else (another kind, decoding into an object)
// goes to the JSON serializer as before.
//
// With echoes set, a HorizontalAutoscaler that a status write of this
// controller stored is not decoded: echoes holds it already, or will once
// the write's answer is read (then it is a deferredHA until read). The
// client only lists, which decodes into a list, and watches. With
// deferred set, a HorizontalAutoscaler it names is decoded as a
// deferredHA: its metadata now, the rest when first read.
type haDecoder struct {
	runtime.Serializer
	deferred Deferred
	echoes   *echoes
}

func (d haDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if into == nil && (d.deferred != nil || d.echoes != nil) {
		if h, ok := jsonmeta.ReadHead(data); ok && h.APIVersion == haAPIVersion && h.Kind == haKind.Kind {
			gvk := haKind
			obj, pending := d.echoes.take(h.Namespace, h.Name, h.ResourceVersion)
			if obj != nil {
				return obj, &gvk, nil
			}
			if pending != nil {
				if obj, ok := newDeferredHA(data, h.Metadata, d.echoOr(pending, h.ResourceVersion)); ok {
					return obj, &gvk, nil
				}
			}
			if obj, ok := d.deferHA(h, data); ok {
				return obj, &gvk, nil
			}
		}
	}
	if into == nil {
		if gvk, err := (jsonmeta.MetaFactory{}).Interpret(data); err == nil && *gvk == haKind {
			ha := &v1alpha1.HorizontalAutoscaler{}
			if jsonv2.Unmarshal(data, ha) == nil {
				return ha, gvk, nil
			}
		}
	}
	return d.Serializer.Decode(data, defaults, into)
}

// echoOr decodes the object at version that came while w was in flight:
// it is what w stored, if w stored that version; decoded otherwise.
func (d haDecoder) echoOr(w *write, version string) func([]byte) (*v1alpha1.HorizontalAutoscaler, error) {
	return func(data []byte) (*v1alpha1.HorizontalAutoscaler, error) {
		if obj, ok := d.echoes.resolve(w, version); ok {
			return obj, nil
		}
		return d.decodeHA(data)
	}
}

// decodeHA decodes a HorizontalAutoscaler as Decode does.
func (d haDecoder) decodeHA(data []byte) (*v1alpha1.HorizontalAutoscaler, error) {
	ha := &v1alpha1.HorizontalAutoscaler{}
	if jsonv2.Unmarshal(data, ha) == nil {
		return ha, nil
	}
	obj, _, err := d.Serializer.Decode(data, nil, nil)
	if err != nil {
		return nil, err
	}
	if ha, ok := obj.(*v1alpha1.HorizontalAutoscaler); ok {
		return ha, nil
	}
	return nil, fmt.Errorf("decoded a %T, not a %s", obj, v1alpha1.Kind)
}

// haKind is the group, version and kind of a HorizontalAutoscaler.
var haKind = v1alpha1.SchemeGroupVersion.WithKind(v1alpha1.Kind)

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
// WatchEvent as.
var watchEventKind = watchEventKindIn(haScheme)

// watchEventKindIn is what a serializer of s reports decoding a WatchEvent
// as: s's first kind for the type, registered by every group version.
func watchEventKindIn(s *runtime.Scheme) schema.GroupVersionKind {
	kinds, _, err := s.ObjectKinds(&metav1.WatchEvent{})
	utilruntime.Must(err)
	return kinds[0]
}

func (s eventSerializer) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if ev, ok := into.(*metav1.WatchEvent); ok {
		if typ, obj, ok := s.event(data); ok {
			ev.Type = typ
			ev.Object = runtime.RawExtension{Raw: obj}
			gvk := watchEventKind
			return into, &gvk, nil
		}
	}
	return s.Serializer.Decode(data, defaults, into)
}

// event is jsonmeta.EventWithoutManagedFields, or, where the managed
// fields are kept, jsonmeta.Event with the object copied. A copy either
// way, as it must be: frames' buffers are reused.
func (s eventSerializer) event(data []byte) (typ string, obj []byte, ok bool) {
	if !s.keepManagedFields {
		return jsonmeta.EventWithoutManagedFields(data)
	}
	typ, obj, ok = jsonmeta.Event(data)
	return typ, bytes.Clone(obj), ok
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

// HAClients are crd mode's REST clients for autoscaling.tidal.dev/v1alpha1.
type HAClients struct {
	// Watch lists and watches HorizontalAutoscalers.
	Watch rest.Interface
	// Status writes their status subresource.
	Status rest.Interface
	// StatusUserAgent is the User-Agent Status's transport sends (none
	// set: Go's own).
	StatusUserAgent string
	// StatusLimiter is the rate limiter a status write waits on (Watch's):
	// Status has none of its own (see throttle).
	StatusLimiter flowcontrol.RateLimiter
	// defers: Watch may decode objects as deferredHAs.
	defers bool
	// echoes are the objects Status wrote, which Watch takes instead of
	// decoding them (nil: none kept).
	echoes *echoes
}

// EchoesReused is how many objects the watch took from the status
// writes' answers instead of decoding them.
func (c HAClients) EchoesReused() uint64 {
	if c.echoes == nil {
		return 0
	}
	return c.echoes.reused.Load()
}

// maxHTTP1StatusWriters is how many workers may write statuses over
// HTTP/1.1: client-go's transports keep 25 idle connections per host, and
// a writer beyond them would open (and handshake) a connection per write.
const maxHTTP1StatusWriters = 25

// NewHorizontalAutoscalerClients returns crd mode's REST clients, speaking
// JSON (custom resources have no protobuf) with cfg's credentials and one
// rate limiter between them. workers is how many status writes may be in
// flight at once. Status writes go over HTTP/1.1, each on a connection of
// its own, when there are at most maxHTTP1StatusWriters of them: a
// request there costs the client less CPU than an HTTP/2 stream (no
// header compression, stream flow control or read-loop handoff), and a
// controller writes a status for every reconcile whose metrics moved.
// What HTTP/2 adds, its pings noticing a dead connection, the status
// writes do not need: each has the request timeout. The watch stays on
// HTTP/2, where the pings keep a silent connection from deafening the
// informer.
//
// Watched objects that deferred names (nil: none) are decoded when first
// read (see Deferred).
func NewHorizontalAutoscalerClients(cfg *rest.Config, workers int, deferred Deferred) (HAClients, error) {
	echoes := newEchoes()
	watch, err := newHAClient(cfg, deferred, echoes)
	if err != nil {
		return HAClients{}, err
	}
	status, err := newHAClient(statusConfig(cfg, workers), nil, nil)
	if err != nil {
		return HAClients{}, err
	}
	return HAClients{Watch: watch, Status: status, StatusUserAgent: cfg.UserAgent, StatusLimiter: watch.GetRateLimiter(), defers: deferred != nil, echoes: echoes}, nil
}

// statusConfig is cfg for the status writes of workers workers: over
// HTTP/1.1 when they fit in client-go's idle connections (see
// NewHorizontalAutoscalerClients), over HTTP/2 when not; without a rate
// limiter, since the writer waits on the shared one itself (throttle).
func statusConfig(cfg *rest.Config, workers int) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.RateLimiter, c.QPS = nil, -1 // client-go makes no limiter for a negative QPS
	if workers <= maxHTTP1StatusWriters {
		c.TLSClientConfig.NextProtos = []string{"http/1.1"}
	}
	return c
}

// newHAClient returns a REST client for autoscaling.tidal.dev/v1alpha1
// speaking JSON with cfg's credentials and rate limits, deferring the
// decode of the watched objects deferred names and taking those echoes
// holds.
func newHAClient(cfg *rest.Config, deferred Deferred, echoes *echoes) (rest.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &v1alpha1.SchemeGroupVersion
	c.APIPath = "/apis"
	c.ContentType = runtime.ContentTypeJSON
	c.AcceptContentTypes = runtime.ContentTypeJSON
	c.NegotiatedSerializer = newHAJSON(deferred, echoes)
	return rest.RESTClientFor(c)
}
