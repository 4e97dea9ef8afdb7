package monitor

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestRoundSignals: the deferred status writes count, the reconcile gap
// reports the controller's longest gap and autoscalers_off_beat its count,
// each 0 while none runs.
func TestRoundSignals(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	gauge := func(name, help, want string) {
		t.Helper()
		head := "# HELP " + name + " " + help + "\n# TYPE " + name + " gauge\n"
		if err := testutil.GatherAndCompare(reg, strings.NewReader(head+name+" "+want+"\n"), name); err != nil {
			t.Error(err)
		}
	}
	const gapHelp = "Longest time between two consecutive reconciles of any one autoscaler, among those that ended in the last sync period, and since the last reconcile of every autoscaler known (0 on a replica that does not reconcile)."
	gap := func(want string) { t.Helper(); gauge("tidal_autoscaler_reconcile_gap_max_seconds", gapHelp, want) }
	gap("0")
	m.SetReconcileGap(func() time.Duration { return 15500 * time.Millisecond })
	gap("15.5")
	m.SetReconcileGap(nil)
	gap("0")

	const offBeatHelp = "Autoscalers whose namespace's autoscalers share a PodMetrics list but whose next reconcile is not on the namespace's beat (just created, or back from a wait in the queue of more than half a sync period): each lists PodMetrics on its own until it joins the beat, within ten sync periods (0 on a replica that does not reconcile)."
	offBeat := func(want string) { t.Helper(); gauge("tidal_autoscaler_autoscalers_off_beat", offBeatHelp, want) }
	offBeat("0")
	m.SetOffBeat(func() int { return 7 })
	offBeat("7")
	m.SetOffBeat(nil)
	offBeat("0")

	m.StatusWriteDeferred()
	m.StatusWriteDeferred()
	if got := testutil.ToFloat64(m.statusWritesDeferred); got != 2 {
		t.Errorf("status_writes_deferred_total = %v, want 2", got)
	}
	m.StatusWritten(WriteValues)
	m.StatusWritten(WriteValues)
	m.StatusWritten(WriteHistory)
	for reason, want := range map[string]float64{WriteValues: 2, WriteHistory: 1, WriteFields: 0} {
		if got := testutil.ToFloat64(m.statusWrites.WithLabelValues(reason)); got != want {
			t.Errorf("status_writes_total{reason=%q} = %v, want %v", reason, got, want)
		}
	}
}
