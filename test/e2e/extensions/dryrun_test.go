package extensions

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/autoscaler/source"
	"github.com/tidal-autoscaler/tidal/autoscaler/status"
)

// dryRunGauge is the autoscaler's gauge of what a dry run would write.
const dryRunGauge = "tidal_autoscaler_dry_run_desired_replicas"

// TestDryRun: an autoscaler in dry run whose metric says 2→5 records the
// decision (status.desiredReplicas 5, the DryRun condition, a DryRun event
// every sync, the gauge at 5) and never writes the Deployment: after three
// syncs that decided 5, its replicas are 2 and its managedFields hold no
// write of the autoscaler's field manager. Dry run off, the same decision
// is written, and the field manager appears (which shows the check above
// looks where a write would be).
func TestDryRun(t *testing.T) {
	start(t)
	ctx := testContext(t)
	const ns = "dryrun"
	deploy(ctx, t, ns, 2, nil)
	setQueue(ns, 5*perPod)
	createAutoscaler(ctx, t, newAutoscaler(ns, func(ha *v1alpha1.HorizontalAutoscaler) { ha.Spec.DryRun = true }))

	const wouldScale = "would scale 2→5: "
	ev := waitEvents(ctx, t, ns, "DryRun", wouldScale, 3)
	if ev.Type != corev1.EventTypeNormal || !strings.Contains(ev.Message, "external metric "+queue) {
		t.Errorf("DryRun event %s %q, want Normal naming the external metric %s", ev.Type, ev.Message, queue)
	}
	s, err := observe(ctx, ns)
	must(t, err)
	if s.replicas != 2 {
		t.Errorf("after 3 dry-run syncs the Deployment has spec.replicas %d, want 2 (untouched)", s.replicas)
	}
	if s.ha.Status.DesiredReplicas != 5 || s.ha.Status.CurrentReplicas != 2 {
		t.Errorf("status current %d desired %d, want 2 and 5", s.ha.Status.CurrentReplicas, s.ha.Status.DesiredReplicas)
	}
	c := condition(s.ha, status.DryRunCondition)
	if c == nil || c.Status != corev1.ConditionTrue || c.Reason != "WouldScale" ||
		!strings.HasPrefix(c.Message, "dry run, /scale is not written: "+wouldScale) {
		t.Errorf("condition DryRun %+v, want True/WouldScale %q...", c, "dry run, /scale is not written: "+wouldScale)
	}
	if m := scaleWriters(ctx, t, ns); len(m) != 0 {
		t.Errorf("Deployment managedFields show writes by %s: %v", source.FieldManager, m)
	}
	waitUntil(ctx, t, dryRunGauge+" at 5", func() (bool, string) {
		v, ok, err := gauge(ctx, ns)
		return err == nil && ok && v == 5, describeGauge(v, ok, err)
	})

	// Dry run off: the decision is written, the condition and the gauge go.
	patchAutoscaler(ctx, t, ns, `{"dryRun":null}`)
	waitState(ctx, t, ns, "Deployment scaled to 5 with dry run off", func(s state) bool {
		return s.replicas == 5 && condition(s.ha, status.DryRunCondition) == nil
	})
	if m := scaleWriters(ctx, t, ns); len(m) == 0 {
		t.Errorf("after the scale, no managedFields entry of %s on the Deployment", source.FieldManager)
	}
	waitUntil(ctx, t, dryRunGauge+" gone", func() (bool, string) {
		v, ok, err := gauge(ctx, ns)
		return err == nil && !ok, describeGauge(v, ok, err)
	})
	// The event is posted in the background after the scale, and may come
	// after the status.
	waitEvents(ctx, t, ns, "SuccessfulRescale", "New size: 5", 1)
}

// scaleWriters returns the managedFields entries of the autoscaler's field
// manager on ns/app's Deployment, as "operation subresource".
func scaleWriters(ctx context.Context, t *testing.T, ns string) []string {
	t.Helper()
	d, err := env.h.Client.AppsV1().Deployments(ns).Get(ctx, app, metav1.GetOptions{})
	must(t, err)
	var out []string
	for _, f := range d.ManagedFields {
		if f.Manager == source.FieldManager {
			out = append(out, string(f.Operation)+" "+f.Subresource)
		}
	}
	return out
}

// gauge reads dryRunGauge of ns/app on the autoscaler's /metrics.
func gauge(ctx context.Context, ns string) (float64, bool, error) {
	text, err := env.h.ScrapeAutoscaler(ctx, env.autoscaler, "/metrics")
	if err != nil {
		return 0, false, err
	}
	return sample(text, dryRunGauge, map[string]string{"namespace": ns, "hpa_name": app})
}

func describeGauge(v float64, ok bool, err error) string {
	switch {
	case err != nil:
		return err.Error()
	case !ok:
		return "no series"
	}
	return fmt.Sprint(v)
}
