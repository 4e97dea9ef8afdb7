package controller

import (
	"context"
	"fmt"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/autoscaler/status"
)

// The other-writer guard (package guard): tidal stops acting on an
// autoscaler that another writer also acts on, instead of undoing its
// decisions every sync.
//
//   - crd mode: a HorizontalAutoscaler whose workload an autoscaling/v2
//     HPA also scales decides as usual but does not write /scale
//     (condition Conflict, reason OtherAutoscaler, and a Warning event
//     naming both). In dry run it writes nothing anyway, and compares its
//     decisions with the HPA's instead (the shadow comparison).
//   - native mode: an HPA whose status another controller writes (for
//     kube-controller-manager's HPA controller left on) is not reconciled
//     at all: only the Conflict condition, reason OtherStatusWriter, is
//     written, once per episode of the other writer's activity (a failed
//     write is not retried), and a Warning event names the other writer.
//
// The condition exists only while the conflict lasts, so an autoscaler
// without one has exactly upstream's conditions.

// guardWriters applies the native mode's guard; stop is true when the
// reconcile must end here.
func (r *reconciler) guardWriters(ctx context.Context, s *step) (stop bool) {
	if r.writers == nil {
		return false
	}
	st := s.obj.HPAStatus()
	w, active := r.writers.Active(s.key)
	if !active {
		status.RemoveCondition(st, status.ConflictCondition)
		return false
	}
	if !r.writers.Announce(s.key) {
		// Said once for this episode (its event and condition write):
		// nothing more is written while the other writer stays active,
		// even if that write failed or the other writer dropped the
		// condition. Retrying every sync would act on an object another
		// controller owns, and a refused write would repeat its Warning
		// events as often as the object changes.
		return true
	}
	msg := fmt.Sprintf("%s also writes this %s's status (last at %s); tidal does not act on it while another controller does: turn that one off "+
		"(for kube-controller-manager, --controllers=*,-horizontal-pod-autoscaler-controller) or remove the autoscaler from tidal's namespaces",
		w.Manager, r.source.Kind(), w.Time.UTC().Format("2006-01-02T15:04:05Z"))
	r.setConflict(ctx, s, "OtherStatusWriter", msg, "Another controller writes the autoscaler's status: not acting on it", "writer", w.Manager)
	// Only the condition changes (and the decision annotation goes, as
	// tidal decided nothing): everything else is as the other writer left
	// it, and a status equal to the one read is not written.
	if err := r.writeStatus(ctx, s, nil); err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Writing the status failed", "autoscaler", klog.KObj(s.obj))
	}
	return true
}

// guardTargets applies the crd mode's guard: it finds the HPAs scaling
// the same workload, sets or removes the Conflict condition, and keeps the
// HPA a dry run compares with.
func (r *reconciler) guardTargets(ctx context.Context, s *step) {
	st := s.obj.HPAStatus()
	spec := s.obj.HPASpec()
	hpas, known := r.otherHPAs.Scaling(s.obj.GetNamespace(), spec.ScaleTargetRef)
	if !known || len(hpas) == 0 {
		status.RemoveCondition(st, status.ConflictCondition)
		return
	}
	if s.ext.DryRun {
		status.RemoveCondition(st, status.ConflictCondition)
		s.shadow = hpas[0]
		return
	}
	names := make([]string, len(hpas))
	for i, h := range hpas {
		names[i] = h.Namespace + "/" + h.Name
	}
	msg := fmt.Sprintf("HorizontalPodAutoscaler %s also scales %s; tidal does not write /scale while both do: delete one of them, "+
		"or set spec.dryRun to compare this autoscaler's decisions with the HPA's", strings.Join(names, ", "), s.ref)
	r.setConflict(ctx, s, "OtherAutoscaler", msg, "Another autoscaler scales the same workload: not writing /scale", "scaleTarget", s.ref, "others", names)
	s.conflict = true
}

// setConflict sets the Conflict condition with reason and msg, and on
// the transition into it (not on every sync) records a Warning event and
// logs logMsg with kv.
func (r *reconciler) setConflict(ctx context.Context, s *step, reason, msg, logMsg string, kv ...any) {
	if !hasCondition(s.original.HPAStatus(), status.ConflictCondition, corev1.ConditionTrue) {
		r.recorder.Event(s.obj.Runtime(), corev1.EventTypeWarning, reason, msg)
		klog.FromContext(ctx).Info(logMsg, append([]any{"kind", r.source.Kind(), "autoscaler", klog.KObj(s.obj)}, kv...)...)
	}
	status.SetCondition(s.obj.HPAStatus(), status.Conflict(reason, msg), s.now)
}

// recordShadow compares a dry run's decision with the HPA's (see
// guardTargets): status.tidal.shadow, a count per sync, and a
// ShadowDiffers event when they differ.
func (r *reconciler) recordShadow(s *step, desired int32) {
	h := s.shadow
	if h == nil {
		return
	}
	agree := desired == h.Status.DesiredReplicas
	s.shadowStatus = &v1alpha1.ShadowComparison{
		HorizontalPodAutoscaler: h.Name, DesiredReplicas: desired, HPADesiredReplicas: h.Status.DesiredReplicas, Agree: agree,
	}
	r.monitor.ObserveShadow(s.obj.GetNamespace(), s.obj.GetName(), agree)
	if !agree {
		r.recorder.Event(s.obj.Runtime(), corev1.EventTypeNormal, "ShadowDiffers",
			fmt.Sprintf("would have %d replicas; HorizontalPodAutoscaler %s decided %d", desired, h.Name, h.Status.DesiredReplicas))
	}
}

// hasCondition reports whether st has condition t with status want.
func hasCondition(st *autoscalingv2.HorizontalPodAutoscalerStatus, t autoscalingv2.HorizontalPodAutoscalerConditionType, want corev1.ConditionStatus) bool {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c.Status == want
		}
	}
	return false
}
