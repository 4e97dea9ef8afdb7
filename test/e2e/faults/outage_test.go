package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/test/harness"
)

// outage is how long kube-apiserver stays away: longer than the
// autoscaler's lease (15 s), so its leader loses the lease.
const outage = 60 * time.Second

// TestAPIServerOutage stops kube-apiserver for a minute under a steady
// autoscaler, doubles the load meanwhile, and starts kube-apiserver again:
// the adapter and the autoscaler recover without restarting (the
// autoscaler lost its lease and campaigned again in-process), nothing is
// scaled wrongly, and the scale-up the new load asks for follows the
// return within about a sync period (the figure is logged, and kept in
// docs/reliability.md).
func TestAPIServerOutage(t *testing.T) {
	h := need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	const name = "outage"
	// No scale-down window: a wrong low reading after the return would
	// scale down at once.
	podNames := steadyWorkload(ctx, t, name, 0)
	adapter, autoscaler := env.adapter.Process, env.autoscaler.Process
	adapterPID, autoscalerPID := adapter.PID(), autoscaler.PID()
	began := time.Now()

	start, err := h.StopAPIServer()
	if err != nil {
		t.Fatal(err)
	}
	// The load doubles while kube-apiserver is away: 6 replicas wanted.
	setRates(podNames, 2*targetPerPod)
	select {
	case <-time.After(outage):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	if err := start(ctx); err != nil {
		t.Fatalf("starting kube-apiserver again: %v", err)
	}
	returned := time.Now()
	t.Logf("kube-apiserver was away %s", returned.Sub(began).Round(100*time.Millisecond))

	// The controller writes /scale, then the status with lastScaleTime
	// (as upstream): the status may lag the new count by one write.
	var seen time.Duration
	var ha *v1alpha1.HorizontalAutoscaler
	if err := harness.WaitReady(ctx, autoscaler, "the scale-up to 6 after kube-apiserver's return, and its status", 2*time.Minute, func(ctx context.Context) error {
		got, r, err := autoscalerState(ctx, name)
		if err != nil {
			return err
		}
		if r != 2*replicas {
			return fmt.Errorf("%d replicas", r)
		}
		if seen == 0 {
			seen = time.Since(returned)
		}
		if got.Status.LastScaleTime == nil {
			return fmt.Errorf("scaled, but status.lastScaleTime is empty")
		}
		ha = got
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("scaled to %d %s after kube-apiserver's /readyz answered (status.lastScaleTime %s after; sync period %s)",
		2*replicas, seen.Round(100*time.Millisecond), ha.Status.LastScaleTime.Sub(returned.Truncate(time.Second)), syncPeriod)

	for _, p := range []*harness.Process{adapter, autoscaler} {
		if done, _ := p.Exited(); done {
			t.Errorf("%s exited during the outage; log %s", p.Name(), p.LogPath())
		}
	}
	if adapter.PID() != adapterPID || autoscaler.PID() != autoscalerPID {
		t.Errorf("a process was restarted: adapter %d→%d, autoscaler %d→%d", adapterPID, adapter.PID(), autoscalerPID, autoscaler.PID())
	}
	// The autoscaler did lose its lease, so the recovery went through
	// campaigning again, not through a lease that outlived the outage.
	log, err := os.ReadFile(autoscaler.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "Lost the leader election lease") {
		t.Errorf("the autoscaler's log does not say it lost its lease during a %s outage; log %s", outage, autoscaler.LogPath())
	}
	// Nothing scaled but to the new load's count. The event is posted in the
	// background after the scale and may come after the status: wait for it.
	var rescales []string
	if err := harness.WaitReady(ctx, nil, "the SuccessfulRescale event", 30*time.Second, func(ctx context.Context) error {
		var err error
		if rescales, err = events(ctx, name, "SuccessfulRescale", began); err == nil && len(rescales) == 0 {
			err = errors.New("none yet")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(rescales) != 1 || !strings.Contains(rescales[0], "New size: 6") {
		t.Errorf("rescales since the outage began: %q, want exactly one, to 6", rescales)
	}
}
