package controller

import (
	"errors"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/autoscaler/source"
	"github.com/tidal-autoscaler/tidal/autoscaler/status"
)

// hpaScaling is an autoscaling/v2 HPA of upstream's on Deployment target
// that last decided desired.
func hpaScaling(name, target string, desired int32) *autoscalingv2.HorizontalPodAutoscaler {
	h := newHPA(name, ptr.To[int32](1), 10, cpuUtilization(30))
	h.Spec.ScaleTargetRef.Name = target
	h.Status.DesiredReplicas = desired
	return h
}

// TestGuardOtherAutoscaler (crd mode): a HorizontalAutoscaler whose
// Deployment an HPA also scales decides but never writes /scale, with the
// Conflict condition and one Warning event naming the HPA; an HPA on
// another workload changes nothing; in dry run the decisions are
// compared with the HPA's instead (status.tidal.shadow, the counter, the
// ShadowDiffers event).
func TestGuardOtherAutoscaler(t *testing.T) {
	tests := []struct {
		name         string
		others       []*autoscalingv2.HorizontalPodAutoscaler
		dryRun       bool
		wantScale    []int32
		wantConflict string // the condition's reason; "" for none
		wantShadow   *v1alpha1.ShadowComparison
		wantEvent    string
	}{
		{name: "an HPA on the same Deployment: no /scale writes",
			others:    []*autoscalingv2.HorizontalPodAutoscaler{hpaScaling("web-hpa", "web", 3)},
			wantScale: nil, wantConflict: "OtherAutoscaler",
			wantEvent: "Warning OtherAutoscaler HorizontalPodAutoscaler default/web-hpa also scales Deployment/default/web"},
		{name: "an HPA on another Deployment: scales as usual",
			others:    []*autoscalingv2.HorizontalPodAutoscaler{hpaScaling("api", "api", 3)},
			wantScale: []int32{5}},
		{name: "no HPA: scales as usual", wantScale: []int32{5}},
		{name: "dry run beside an HPA that decided otherwise: shadow",
			others: []*autoscalingv2.HorizontalPodAutoscaler{hpaScaling("web-hpa", "web", 4)}, dryRun: true,
			wantShadow: &v1alpha1.ShadowComparison{HorizontalPodAutoscaler: "web-hpa", DesiredReplicas: 5, HPADesiredReplicas: 4},
			wantEvent:  "Normal ShadowDiffers would have 5 replicas; HorizontalPodAutoscaler web-hpa decided 4"},
		{name: "dry run beside an HPA that agrees",
			others: []*autoscalingv2.HorizontalPodAutoscaler{hpaScaling("web-hpa", "web", 5)}, dryRun: true,
			wantShadow: &v1alpha1.ShadowComparison{HorizontalPodAutoscaler: "web-hpa", DesiredReplicas: 5, HPADesiredReplicas: 5, Agree: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hpa, w := cpuScaleUp()
			w.guard, w.otherHPAs = true, tt.others
			w.tidal = v1alpha1.TidalSpec{DryRun: tt.dryRun}
			f := newFixture(t, source.ModeCRD, w, hpa)
			const syncs = 3
			for range syncs {
				must(t, f.reconcile("web"))
				f.sync("web")
			}
			// The fixture's /scale does not follow the writes: each sync
			// writes again.
			if len(tt.wantScale) == 0 && len(f.scaleUpdates) != 0 || len(tt.wantScale) != 0 && (len(f.scaleUpdates) == 0 || f.scaleUpdates[0] != tt.wantScale[0]) {
				t.Errorf("scale updates %v, want %v first", f.scaleUpdates, tt.wantScale)
			}
			stored := f.stored("web")
			st := stored.HPAStatus()
			c := condition(st, status.ConflictCondition)
			switch {
			case tt.wantConflict == "" && c != nil:
				t.Errorf("condition %+v, want none", c)
			case tt.wantConflict != "" && (c == nil || c.Status != corev1.ConditionTrue || c.Reason != tt.wantConflict):
				t.Errorf("condition %+v, want Conflict=True %s", c, tt.wantConflict)
			}
			if st.DesiredReplicas != 5 {
				t.Errorf("status.desiredReplicas %d, want the decision 5 recorded", st.DesiredReplicas)
			}
			ha := stored.Runtime().(*v1alpha1.HorizontalAutoscaler)
			var shadow *v1alpha1.ShadowComparison
			if ha.Status.Tidal != nil {
				shadow = ha.Status.Tidal.Shadow
			}
			if (shadow == nil) != (tt.wantShadow == nil) || shadow != nil && *shadow != *tt.wantShadow {
				t.Errorf("status.tidal.shadow %+v, want %+v", shadow, tt.wantShadow)
			}
			events := f.events()
			n := 0
			for _, e := range events {
				if tt.wantEvent != "" && strings.HasPrefix(e, tt.wantEvent) {
					n++
				}
				if strings.Contains(e, "OtherAutoscaler") && tt.wantConflict == "" || strings.Contains(e, "ShadowDiffers") && (tt.wantShadow == nil || tt.wantShadow.Agree) {
					t.Errorf("unexpected event %q", e)
				}
			}
			wantN := 0
			switch {
			case tt.wantConflict != "":
				wantN = 1 // on the transition only
			case tt.wantEvent != "":
				wantN = syncs // one per differing sync (the recorder folds them)
			}
			if n != wantN {
				t.Errorf("%d events %q, want %d; events %q", n, tt.wantEvent, wantN, events)
			}
			if tt.wantShadow != nil {
				agree := "false"
				if tt.wantShadow.Agree {
					agree = "true"
				}
				if got := testutil.ToFloat64(f.ctrl.r.monitor.ShadowSyncs(ns, "web", agree)); got != syncs {
					t.Errorf("shadow_syncs_total{agree=%s} = %v, want %d", agree, got, syncs)
				}
			}
		})
	}
}

// TestGuardOtherAutoscalerGone: once the HPA is deleted, the condition
// goes and the next sync scales.
func TestGuardOtherAutoscalerGone(t *testing.T) {
	hpa, w := cpuScaleUp()
	w.guard, w.otherHPAs = true, []*autoscalingv2.HorizontalPodAutoscaler{hpaScaling("web-hpa", "web", 3)}
	f := newFixture(t, source.ModeCRD, w, hpa)
	must(t, f.reconcile("web"))
	f.sync("web")
	if len(f.scaleUpdates) != 0 {
		t.Fatalf("scaled beside the HPA: %v", f.scaleUpdates)
	}
	must(t, f.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Delete(t.Context(), "web-hpa", metav1.DeleteOptions{}))
	deadline := time.Now().Add(10 * time.Second)
	for len(f.scaleUpdates) == 0 && time.Now().Before(deadline) {
		must(t, f.reconcile("web"))
		f.sync("web")
		time.Sleep(10 * time.Millisecond)
	}
	if !slicesEqual(f.scaleUpdates, []int32{5}) {
		t.Fatalf("scale updates %v after the HPA was deleted, want [5]", f.scaleUpdates)
	}
	if c := condition(f.stored("web").HPAStatus(), status.ConflictCondition); c != nil {
		t.Errorf("Conflict kept: %+v", c)
	}
}

// TestGuardOtherStatusWriter (native mode): an HPA whose status another
// controller wrote while tidal watched is left alone: no metric read, no
// /scale write, only the Conflict condition (and one Warning event naming
// the writer); the rest of the status stays as the other writer left it.
// When the other writer is quiet for the hold, tidal acts again.
func TestGuardOtherStatusWriter(t *testing.T) {
	hpa, w := cpuScaleUp()
	w.guard = true
	hpa.Status.DesiredReplicas = 7 // what the other controller decided
	f := newFixture(t, source.ModeNative, w, hpa)
	seen := hpa.DeepCopy()
	f.writers.Observe(seen) // the baseline: nothing written yet
	at := metav1.NewTime(now.Add(-time.Second))
	seen.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", Time: &at}}
	f.writers.Observe(seen)

	for range 3 {
		must(t, f.reconcile("web"))
		f.sync("web")
	}
	if len(f.scaleUpdates) != 0 || f.scaleGets != 0 {
		t.Errorf("acted beside another writer: %d scale reads, updates %v", f.scaleGets, f.scaleUpdates)
	}
	st := f.stored("web").HPAStatus()
	c := condition(st, status.ConflictCondition)
	if c == nil || c.Status != corev1.ConditionTrue || c.Reason != "OtherStatusWriter" || !strings.HasPrefix(c.Message, "kube-controller-manager also writes this HorizontalPodAutoscaler's status") {
		t.Errorf("condition %+v", c)
	}
	if st.DesiredReplicas != 7 || len(st.Conditions) != 1 {
		t.Errorf("status changed beyond the condition: desired %d, conditions %+v", st.DesiredReplicas, st.Conditions)
	}
	n := 0
	for _, e := range f.events() {
		if strings.HasPrefix(e, "Warning OtherStatusWriter kube-controller-manager also writes") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d OtherStatusWriter events, want 1: %q", n, f.events())
	}
	if got := f.statusUpdates(); got != 1 {
		t.Errorf("%d status writes, want 1 (the condition)", got)
	}
	f.writers.Forget("default/web") // as after the hold: nothing active
	must(t, f.reconcile("web"))
	if !slicesEqual(f.scaleUpdates, []int32{5}) {
		t.Errorf("scale updates %v once the other writer is gone, want [5]", f.scaleUpdates)
	}
	if c := condition(f.stored("web").HPAStatus(), status.ConflictCondition); c != nil {
		t.Errorf("Conflict kept: %+v", c)
	}
}

// TestGuardOtherStatusWriterRefused (native mode): when the condition's
// write is refused (tidal may not write that HPA's status), tidal still
// says so once per episode: one attempt, one OtherStatusWriter and one
// FailedUpdateStatus event, however often the object is reconciled.
// Retrying every sync flooded the event queue with many such HPAs.
func TestGuardOtherStatusWriterRefused(t *testing.T) {
	hpa, w := cpuScaleUp()
	w.guard = true
	f := newFixture(t, source.ModeNative, w, hpa)
	f.kube.PrependReactor("update", "horizontalpodautoscalers", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "status" {
			return false, nil, nil
		}
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "autoscaling", Resource: "horizontalpodautoscalers/status"}, "web", errors.New("not allowed"))
	})
	seen := hpa.DeepCopy()
	f.writers.Observe(seen)
	at := metav1.NewTime(now.Add(-time.Second))
	seen.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", Time: &at}}
	f.writers.Observe(seen)

	for range 5 {
		must(t, f.reconcile("web"))
	}
	events := f.events()
	var writer, failed int
	for _, e := range events {
		switch {
		case strings.HasPrefix(e, "Warning OtherStatusWriter "):
			writer++
		case strings.HasPrefix(e, "Warning FailedUpdateStatus "):
			failed++
		}
	}
	if writer != 1 || failed != 1 || f.statusUpdates() != 1 {
		t.Errorf("5 reconciles: %d OtherStatusWriter and %d FailedUpdateStatus events, %d status writes; want 1 each: %q",
			writer, failed, f.statusUpdates(), events)
	}
	if len(f.scaleUpdates) != 0 || f.scaleGets != 0 {
		t.Errorf("acted beside another writer: %d scale reads, updates %v", f.scaleGets, f.scaleUpdates)
	}
}
