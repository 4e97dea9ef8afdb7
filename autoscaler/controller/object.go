package controller

import (
	"context"
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	autoscalingclient "k8s.io/client-go/kubernetes/typed/autoscaling/v2"
	autoscalinglisters "k8s.io/client-go/listers/autoscaling/v2"
	"k8s.io/client-go/tools/cache"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
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

// crdSource reconciles HorizontalAutoscalers through the dynamic client:
// no generated clientset is needed, objects are converted from
// unstructured on read and back on write.
type crdSource struct {
	informer cache.SharedIndexInformer
	lister   cache.GenericLister
	client   dynamic.NamespaceableResourceInterface
}

// CRDSource reconciles tidal's HorizontalAutoscalers from the dynamic
// factory's informer, writing status through client.
func CRDSource(factory dynamicinformer.DynamicSharedInformerFactory, client dynamic.Interface) Source {
	inf := factory.ForResource(v1alpha1.GroupVersionResource)
	return &crdSource{informer: inf.Informer(), lister: inf.Lister(), client: client.Resource(v1alpha1.GroupVersionResource)}
}

func (s *crdSource) Kind() string                        { return v1alpha1.Kind }
func (s *crdSource) Informer() cache.SharedIndexInformer { return s.informer }

func (s *crdSource) Get(namespace, name string) (Object, error) {
	obj, err := s.lister.ByNamespace(namespace).Get(name)
	if err != nil {
		return nil, err
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("%s %s/%s: informer returned a %T", v1alpha1.Kind, namespace, name, obj)
	}
	ha := &v1alpha1.HorizontalAutoscaler{}
	// FromUnstructured copies, so the cache is never modified.
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ha); err != nil {
		return nil, fmt.Errorf("decoding %s %s/%s: %w", v1alpha1.Kind, namespace, name, err)
	}
	return haObject{ha}, nil
}

func (s *crdSource) UpdateStatus(ctx context.Context, obj Object) error {
	ha, ok := obj.(haObject)
	if !ok {
		return fmt.Errorf("crd mode cannot write a %T", obj.Runtime())
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ha.HorizontalAutoscaler)
	if err != nil {
		return fmt.Errorf("encoding %s %s/%s: %w", v1alpha1.Kind, ha.Namespace, ha.Name, err)
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(v1alpha1.SchemeGroupVersion.WithKind(v1alpha1.Kind))
	_, err = s.client.Namespace(ha.Namespace).UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: fieldManager})
	return err
}
