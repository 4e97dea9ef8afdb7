// Package source is the two kinds of object the autoscaler reconciles,
// behind one interface: tidal's HorizontalAutoscalers (ModeCRD, crd.go) and
// autoscaling/v2 HorizontalPodAutoscalers (ModeNative, native.go). A Source
// lists, gets and writes the objects of one kind; an Object is the spec and
// status of one. A new mode is a new file here with its Object and Source,
// and a case where the controller builds its Source; a new field of
// tidal's status is a change to crd.go and the API types.
//
// It also names the autoscaler to the cluster (ComponentName,
// FieldManager) and says where an object keeps its stabilization history
// (HistoryAnnotation).
package source

import (
	"context"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
)

// Mode selects the objects to reconcile.
type Mode string

const (
	// ModeCRD reconciles tidal's HorizontalAutoscalers
	// (autoscaling.tidal.dev).
	ModeCRD Mode = "crd"
	// ModeNative reconciles autoscaling/v2 HorizontalPodAutoscalers, in
	// place of kube-controller-manager's HPA controller (which must then be
	// disabled).
	ModeNative Mode = "native"
)

// Modes are the modes there are, for --mode's validation and the chart's
// schema (test/manifests checks the chart offers exactly these).
var Modes = []Mode{ModeCRD, ModeNative}

// ComponentName names the autoscaler to the cluster: its user agent, its
// leader election (and the Lease's default name), its work queue, and the
// component of its events in CRD mode.
const ComponentName = "tidal-autoscaler"

// nativeEventComponent is kube-controller-manager's HPA controller's event
// component, which native mode records as.
const nativeEventComponent = "horizontal-pod-autoscaler"

// EventComponent is the source.component of the events recorded in mode m.
func (m Mode) EventComponent() string {
	if m == ModeNative {
		return nativeEventComponent
	}
	return ComponentName
}

// FieldManager names the autoscaler in managedFields of what it writes.
const FieldManager = ComponentName

// HistoryAnnotation holds the compacted behavior.History of a native
// HorizontalPodAutoscaler (behavior.History.Encode); a HorizontalAutoscaler
// keeps it in status.tidal.history. With it a restarted controller or a new
// leader decides as the controller that never stopped would have.
//
// Why on the autoscaler itself (and not in a ConfigMap):
//   - it lives and dies with the object: no garbage to collect when the
//     autoscaler is deleted, no cross-object store that all autoscalers of a
//     namespace would contend for, and the informer the controller already
//     runs delivers it, so seeding costs no extra read;
//   - it is written by the status update the reconcile makes anyway (an
//     HPA's status update keeps metadata changes; a custom resource's keeps
//     only the status, hence the status field), so it costs no request of
//     its own when the status changes.
//
// Writes are kept few: the history is compacted first (entries that can no
// longer change a decision are dropped: see behavior.History.Compact, which
// also bounds the size), and compared with the last one persisted after
// compacting both at the same time (so entries merely expiring never cause
// a write). When the status is written anyway, a changed history goes with
// it. A change in more than the time of the newest recommendation (a new
// value, a scale event) is written at once, with a status write of its own
// if need be. A recommendation merely repeated is not written on its own:
//
//   - With leader election (controller.Handover), the stored history is exact as of
//     the last status write, and afterwards every reconcile kept the
//     status as written. So when that status says the autoscaler was
//     computing recommendations (AbleToScale and ScalingActive true), each
//     reconcile since repeated the newest stored recommendation (any other
//     value would have been written at once), until the previous leader
//     stopped. A new leader learns when that was from the Lease (its last
//     renewal, or its release) and continues the newest recommendation
//     until then (history.Store.Get does). In steady state nothing is
//     written, and the newest recommendation a new leader sees is at most
//     about a sync period older than the one the old leader last made.
//   - Without leader election nothing tells a restarted controller when
//     its predecessor stopped, so the history is also written on its own
//     once the newest recommendation's time has moved by a minute
//     (history.DefaultRefresh): the newest recommendation a restarted
//     controller sees is at most that much older than the one last made.
const HistoryAnnotation = "autoscaling.tidal.dev/history"

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
	// HistoryInAnnotation reports whether PersistedHistory is read from
	// HistoryAnnotation, which anyone who may edit the object can write,
	// rather than from a status field: one that reaches into the future
	// is then rejected, not only taken as made now.
	HistoryInAnnotation() bool
	// SetPersistedHistory stores value with the next status write (see
	// HistoryAnnotation).
	SetPersistedHistory(value string)
	// Extensions is what tidal adds to the spec (dry run, fallback):
	// spec fields of a HorizontalAutoscaler, annotations of an HPA.
	Extensions() Extensions
	// MetricFailures is the persisted count of consecutive syncs in which
	// every metric failed (status.tidal.metricFailures, or
	// MetricFailuresAnnotation); 0 when none.
	MetricFailures() int32
	// SetMetricFailures stores n with the next status write (0 removes
	// it); a change makes StatusEqual false, so that it is written.
	SetMetricFailures(n int32)
}

// Source is the kind of object the controller reconciles. Its two
// implementations are CRDSource and NativeSource.
type Source interface {
	// Kind names the objects, e.g. "HorizontalAutoscaler".
	Kind() string
	// Informer delivers the objects' events; the controller adds its
	// handlers and waits for it to sync. The caller starts it.
	Informer() cache.SharedIndexInformer
	// Get returns the object from the informer cache, or an error for
	// which apierrors.IsNotFound is true when it is gone. The object is
	// the cache's own: copy it (Object.DeepCopy) before changing it.
	Get(namespace, name string) (Object, error)
	// UpdateStatus writes the object's status subresource.
	UpdateStatus(ctx context.Context, obj Object) error
}
