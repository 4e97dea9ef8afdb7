package app

import (
	"context"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// TestRefreshDiscovery: the REST mapper is reset once per period, as
// kube-controller-manager resets its own, never before a period has
// passed, and no more once the context ends.
func TestRefreshDiscovery(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithCancel(context.Background())
	resets := make(chan struct{}, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		refreshDiscovery(ctx, clk, discoveryRefresh, func() { resets <- struct{}{} })
	}()
	// Each step of a whole period resets once; a step short of it does not.
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	clk.Step(discoveryRefresh - time.Second)
	for i := range 3 {
		clk.Step(time.Second)
		<-resets
		if i < 2 {
			clk.Step(discoveryRefresh - time.Second)
		}
	}
	select {
	case <-resets:
		t.Error("reset more than once per period")
	default:
	}
	cancel()
	<-done
	clk.Step(discoveryRefresh)
	if len(resets) != 0 {
		t.Errorf("%d resets after the context ended", len(resets))
	}
}
