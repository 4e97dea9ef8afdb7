package source

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	autoscalingclient "k8s.io/client-go/kubernetes/typed/autoscaling/v2"
	autoscalinglisters "k8s.io/client-go/listers/autoscaling/v2"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
)

// DecisionAnnotation holds, on a native HorizontalPodAutoscaler, the
// decision of the reconcile that last wrote its status (a
// v1alpha1.Decision as JSON): what a HorizontalAutoscaler keeps in
// status.tidal.decision, for tidal explain.
const DecisionAnnotation = "autoscaling.tidal.dev/decision"

// DecisionOfAnnotation decodes DecisionAnnotation; nil, nil when absent.
func DecisionOfAnnotation(annotations map[string]string) (*v1alpha1.Decision, error) {
	v, ok := annotations[DecisionAnnotation]
	if !ok {
		return nil, nil
	}
	var d v1alpha1.Decision
	if err := json.Unmarshal([]byte(v), &d); err != nil {
		return nil, fmt.Errorf("annotation %s is not a decision tidal wrote: %v", DecisionAnnotation, err)
	}
	return &d, nil
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

// SetTidalStatus keeps the decision in DecisionAnnotation. It goes with
// a status write the reconcile makes anyway, never causes one (StatusEqual
// ignores it): the annotation explains the status it was written with.
func (o hpaObject) SetTidalStatus(t *v1alpha1.TidalStatus) {
	if t == nil || t.Decision == nil {
		delete(o.Annotations, DecisionAnnotation)
		return
	}
	b, err := json.Marshal(t.Decision)
	if err != nil {
		return // a Decision always encodes; nothing to explain otherwise
	}
	if o.Annotations == nil {
		o.Annotations = map[string]string{}
	}
	o.Annotations[DecisionAnnotation] = string(b)
}

// StatusEqual compares the status and the annotation that holds tidal's
// status (MetricFailuresAnnotation); the history annotation is written
// when history.Store says so.
func (o hpaObject) StatusEqual(other Object) bool {
	return !statusDiffers(o.HPAStatus(), other.HPAStatus()) && apiequality.Semantic.DeepEqual(o.HPAStatus(), other.HPAStatus()) &&
		o.MetricFailures() == other.MetricFailures()
}
func (o hpaObject) DeepCopy() Object {
	return hpaObject{o.HorizontalPodAutoscaler.DeepCopy()}
}

// An HPA's status update keeps metadata changes (its status strategy
// resets only the spec), so the annotation travels with the status.
func (o hpaObject) PersistedHistory() string { return o.Annotations[HistoryAnnotation] }

// HistoryInAnnotation is true: an HPA has no status field of tidal's, and
// whoever may edit the HPA may write the annotation, so a history whose
// times are in the future is rejected (see history.Store.Get).
func (o hpaObject) HistoryInAnnotation() bool { return true }
func (o hpaObject) SetPersistedHistory(value string) {
	if o.Annotations == nil {
		o.Annotations = map[string]string{}
	}
	o.Annotations[HistoryAnnotation] = value
}

func (o hpaObject) Extensions() Extensions { return annotationExtensions(o.Annotations) }
func (o hpaObject) MetricFailures() int32  { return metricFailuresOfAnnotation(o.Annotations) }
func (o hpaObject) SetMetricFailures(n int32) {
	if n == 0 {
		delete(o.Annotations, MetricFailuresAnnotation)
		return
	}
	if o.Annotations == nil {
		o.Annotations = map[string]string{}
	}
	o.Annotations[MetricFailuresAnnotation] = strconv.Itoa(int(n))
}

// ObjectOfHPA is the Object of hpa, which it modifies in place.
func ObjectOfHPA(hpa *autoscalingv2.HorizontalPodAutoscaler) Object { return hpaObject{hpa} }

// nativeSource reconciles autoscaling/v2 HorizontalPodAutoscalers.
type nativeSource struct {
	informer cache.SharedIndexInformer
	lister   autoscalinglisters.HorizontalPodAutoscalerLister
	writer   HPAStatusWriter
}

// HPAStatusWriter writes a HorizontalPodAutoscaler's status subresource.
type HPAStatusWriter interface {
	UpdateStatus(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler) error
}

// NativeSource reconciles autoscaling/v2 HorizontalPodAutoscalers from the
// factory's informer, writing status through client (a clientset's, or a
// fake's in tests).
func NativeSource(factory informers.SharedInformerFactory, client autoscalingclient.HorizontalPodAutoscalersGetter) Source {
	return NativeSourceWith(factory, typedHPAWriter{client})
}

// NativeSourceWith is NativeSource writing status with writer, such as
// NewHPAStatusWriter's.
func NativeSourceWith(factory informers.SharedInformerFactory, writer HPAStatusWriter) Source {
	inf := factory.Autoscaling().V2().HorizontalPodAutoscalers()
	return &nativeSource{informer: inf.Informer(), lister: inf.Lister(), writer: writer}
}

type typedHPAWriter struct {
	client autoscalingclient.HorizontalPodAutoscalersGetter
}

func (w typedHPAWriter) UpdateStatus(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler) error {
	_, err := w.client.HorizontalPodAutoscalers(hpa.Namespace).UpdateStatus(ctx, hpa, metav1.UpdateOptions{FieldManager: FieldManager})
	return err
}

// NewHPAStatusWriter writes HorizontalPodAutoscalers' status as crd mode
// writes HorizontalAutoscalers' (NewHorizontalAutoscalerClients): over
// HTTP/1.1 when workers fit in client-go's idle connections, taking from
// limiter (the clientset's, shared with the informers), without decoding
// the answer (the informer delivers the written object). cfg gives the
// credentials and the content type (protobuf, as the clientset's).
func NewHPAStatusWriter(cfg *rest.Config, limiter flowcontrol.RateLimiter, workers int) (HPAStatusWriter, error) {
	sc := statusConfig(cfg, workers)
	if sc.UserAgent == "" {
		sc.UserAgent = rest.DefaultKubernetesUserAgent() // as the typed client would
	}
	c, err := autoscalingclient.NewForConfig(sc)
	if err != nil {
		return nil, err
	}
	accept := sc.AcceptContentTypes
	if accept == "" {
		accept = sc.ContentType
	}
	if accept == "" {
		accept = runtime.ContentTypeJSON // the typed client's default
	}
	return restHPAWriter{newStatusPutter(c.RESTClient(), sc.UserAgent, metadataAnswer(accept), limiter, autoscalingv2.SchemeGroupVersion, "horizontalpodautoscalers")}, nil
}

type restHPAWriter struct{ put statusPutter }

func (w restHPAWriter) UpdateStatus(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler) error {
	_, err := w.put.put(ctx, hpa.Namespace, hpa.Name, hpa)
	return err
}

func (s *nativeSource) Kind() string                        { return "HorizontalPodAutoscaler" }
func (s *nativeSource) Informer() cache.SharedIndexInformer { return s.informer }

func (s *nativeSource) Get(namespace, name string) (Object, error) {
	hpa, err := s.lister.HorizontalPodAutoscalers(namespace).Get(name)
	if err != nil {
		return nil, err
	}
	return hpaObject{hpa}, nil
}

func (s *nativeSource) UpdateStatus(ctx context.Context, obj Object) error {
	hpa, ok := obj.(hpaObject)
	if !ok {
		return fmt.Errorf("native mode cannot write a %T", obj.Runtime())
	}
	return s.writer.UpdateStatus(ctx, hpa.HorizontalPodAutoscaler)
}

// crdSource reconciles HorizontalAutoscalers from a typed informer over a
