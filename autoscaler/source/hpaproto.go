package source

import (
	"context"
	"slices"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	autoscalingclient "k8s.io/client-go/kubernetes/typed/autoscaling/v2"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/tidal-autoscaler/tidal/autoscaler/internal/pbwire"
)

// hpaProtobuf is the negotiated serializer of native mode's
// HorizontalPodAutoscaler watch: client-go's, except that a protobuf
// HorizontalPodAutoscaler decoded on its own (each object of a watch
// stream, where every status write comes back) is read out of its
// runtime.Unknown envelope in place, with pbwire, instead of through the
// envelope's generated decoder, which copies the whole object first (5%
// of the controller's allocations at 1,000 autoscalers), and each event of
// the stream is read out of its frame in place (watchEventDecoder).
// Everything else, lists and other kinds included, goes to client-go's
// serializer.
type hpaProtobuf struct{ runtime.NegotiatedSerializer }

func newHPAProtobuf() hpaProtobuf {
	return hpaProtobuf{rest.CodecFactoryForGeneratedClient(scheme.Scheme, scheme.Codecs).WithoutConversion()}
}

func (n hpaProtobuf) SupportedMediaTypes() []runtime.SerializerInfo {
	infos := slices.Clone(n.NegotiatedSerializer.SupportedMediaTypes())
	for i := range infos {
		if infos[i].MediaType == runtime.ContentTypeProtobuf {
			infos[i].Serializer = hpaProtoDecoder{infos[i].Serializer}
			if infos[i].StreamSerializer != nil {
				stream := *infos[i].StreamSerializer // shared with client-go's factory
				stream.Serializer = watchEventDecoder{stream.Serializer}
				infos[i].StreamSerializer = &stream
			}
		}
	}
	return infos
}

// hpaProtoDecoder decodes a protobuf autoscaling/v2 HorizontalPodAutoscaler
// into a new object as apimachinery's protobuf serializer does (the
// object's own generated Unmarshal, its kind set from the envelope), and
// passes anything else, or anything it cannot read, to that serializer,
// so that its answer, or its error, is the one returned.
type hpaProtoDecoder struct{ runtime.Serializer }

var hpaKind = autoscalingv2.SchemeGroupVersion.WithKind("HorizontalPodAutoscaler")

func (d hpaProtoDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if into == nil && defaults == nil {
		env, err := pbwire.ReadEnvelope(data)
		if err == nil && string(env.APIVersion) == "autoscaling/v2" && string(env.Kind) == hpaKind.Kind {
			hpa := &autoscalingv2.HorizontalPodAutoscaler{}
			if hpa.Unmarshal(env.Raw) == nil {
				gvk := hpaKind
				hpa.SetGroupVersionKind(gvk)
				return hpa, &gvk, nil
			}
		}
	}
	return d.Serializer.Decode(data, defaults, into)
}

// watchEventDecoder decodes one frame of a protobuf watch stream into a
// metav1.WatchEvent as apimachinery's raw protobuf serializer does, except
// that the event's object is a slice of the frame, not a copy (the copy
// was 6% of the controller's allocations at 1,000 autoscalers). That is
// safe where client-go's watch decoder uses it: it decodes the object
// (into a new object, whose decoders copy what they keep) before it reads
// the next frame into the same buffer. Anything else, or anything it cannot
// read, goes to that serializer, so that its answer, or its error, is the
// one returned.
type watchEventDecoder struct{ runtime.Serializer }

// protoWatchEventKind is what the raw protobuf serializer (client-go's
// scheme's) reports decoding a WatchEvent as.
var protoWatchEventKind = watchEventKindIn(scheme.Scheme)

func (d watchEventDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if ev, ok := into.(*metav1.WatchEvent); ok && ev != nil && defaults == nil && len(data) > 0 {
		if typ, obj, err := pbwire.ReadWatchEvent(data); err == nil {
			ev.Type, ev.Object = eventType(typ), runtime.RawExtension{Raw: obj}
			gvk := protoWatchEventKind
			return ev, &gvk, nil
		}
	}
	return d.Serializer.Decode(data, defaults, into)
}

// eventType returns the watch event type named b, without a new string
// for the five the API sends.
func eventType(b []byte) string {
	for _, t := range [...]watch.EventType{watch.Added, watch.Modified, watch.Deleted, watch.Bookmark, watch.Error} {
		if string(b) == string(t) {
			return string(t)
		}
	}
	return string(b)
}

// NewHPAWatchClient returns native mode's REST client for listing and
// watching autoscaling/v2 HorizontalPodAutoscalers: protobuf, decoded by
// hpaProtobuf, with cfg's credentials, taking from limiter (the
// clientset's, shared with the other informers).
func NewHPAWatchClient(cfg *rest.Config, limiter flowcontrol.RateLimiter) (rest.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &autoscalingv2.SchemeGroupVersion
	c.APIPath = "/apis"
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	c.NegotiatedSerializer = newHPAProtobuf()
	c.RateLimiter = limiter
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	return rest.RESTClientFor(c)
}

// UseHPAWatchClient makes factory's HorizontalPodAutoscaler informer list
// and watch through client (NewHPAWatchClient's) in namespace
// (metav1.NamespaceAll: every namespace), with the factory's resync and
// transform, as its own informer would. Call it before anything asks the
// factory for that informer.
func UseHPAWatchClient(factory informers.SharedInformerFactory, client rest.Interface, namespace string) {
	hpas := autoscalingclient.New(client).HorizontalPodAutoscalers(namespace)
	factory.InformerFor(&autoscalingv2.HorizontalPodAutoscaler{}, func(_ kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		lw := &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				return hpas.List(ctx, opts)
			},
			WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				return hpas.Watch(ctx, opts)
			},
		}
		return cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, hpas),
			&autoscalingv2.HorizontalPodAutoscaler{},
			cache.SharedIndexInformerOptions{ResyncPeriod: resync, Indexers: cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}})
	})
}
