package controller

import (
	"fmt"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/autoscaler/clustercache"
	"github.com/tidal-autoscaler/tidal/autoscaler/history"
	"github.com/tidal-autoscaler/tidal/autoscaler/monitor"
	"github.com/tidal-autoscaler/tidal/autoscaler/source"
	"github.com/tidal-autoscaler/tidal/autoscaler/status"
)

func TestWithinInterval(t *testing.T) {
	last := now
	tests := []struct {
		name     string
		at       time.Duration
		interval time.Duration
		want     bool
	}{
		{name: "off", at: time.Second, interval: 0, want: false},
		{name: "within", at: 59 * time.Second, interval: time.Minute, want: true},
		{name: "interval passed", at: time.Minute, interval: time.Minute, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := withinInterval(last, now.Add(tt.at), tt.interval); got != tt.want {
				t.Errorf("withinInterval = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestStatusMetricsMinInterval follows one autoscaler whose pods metric
// moves: with an interval, a status that changed in metric values only
// waits for it; a new desired count or condition is written at once; with
// 0 every change is written, as upstream does.
func TestStatusMetricsMinInterval(t *testing.T) {
	type step struct {
		name string
		at   time.Duration
		// rps is every pod's value (milli); -1: the metric fails.
		rps        int64
		wantWrites int
	}
	// 3 pods, target 10 per pod: 9.5 to 10.5 are within the tolerance.
	moving := []int64{10000, 10200, 9900, 10100, 10300}
	tests := []struct {
		name         string
		interval     time.Duration
		steps        []step
		wantDeferred float64
		// wantReasons counts the writes by reason (status_writes_total).
		wantReasons map[string]float64
	}{{
		name: "off: every change written", interval: 0,
		steps: []step{
			{"first reconcile", 0, moving[0], 1},
			{"values move", 15 * time.Second, moving[1], 2},
			{"values move", 30 * time.Second, moving[2], 3},
			{"values move", 45 * time.Second, moving[3], 4},
		},
		wantReasons: map[string]float64{monitor.WriteChanged: 4},
	}, {
		name: "60s: values wait, the rest goes at once", interval: time.Minute,
		steps: []step{
			{"first reconcile", 0, moving[0], 1},
			{"values move within the interval: no write", 15 * time.Second, moving[1], 1},
			{"again: no write", 30 * time.Second, moving[2], 1},
			{"the interval has passed: written", 60 * time.Second, moving[3], 2},
			{"values move within the next interval: no write", 75 * time.Second, moving[4], 2},
			{"the metric fails (condition): written at once", 90 * time.Second, -1, 3},
			{"it is back (condition): written at once", 105 * time.Second, moving[0], 4},
			{"values move: no write", 120 * time.Second, moving[1], 4},
			{"usage doubles (desired and replicas): written at once", 135 * time.Second, 20000, 5},
		},
		wantDeferred: 4,
		// The first status, the failure, the return and the new count
		// are fields; the write once the interval passed, values.
		wantReasons: map[string]float64{monitor.WriteFields: 4, monitor.WriteValues: 1},
	}}
	for _, tt := range tests {
		for _, mode := range modes {
			t.Run(tt.name+"/"+string(mode), func(t *testing.T) {
				// With leader election, a repeated recommendation is never
				// written on its own: only the interval decides here.
				w := world{scale: newScale(3, 3, "app=web"), pods: pods(100, 100, 100), customPods: milliByPod(0, 0, 0),
					handover: staticHandover(now.Add(-time.Hour))}
				f := newFixture(t, mode, w, newHPA("web", ptr.To[int32](1), 10, podsMetric("rps", "10")))
				f.ctrl.r.statusInterval = tt.interval
				for _, st := range tt.steps {
					for _, name := range []string{"web-0", "web-1", "web-2"} {
						if st.rps < 0 {
							delete(w.customPods, name)
						} else {
							w.customPods[name] = st.rps
						}
					}
					f.ctrl.r.clock = testingclock.NewFakePassiveClock(now.Add(st.at))
					_ = f.reconcile("web")
					f.sync("web")
					if n := f.statusUpdates(); n != st.wantWrites {
						t.Fatalf("+%s %s: status writes = %d, want %d", st.at, st.name, n, st.wantWrites)
					}
				}
				if got := metricValue(t, f.reg, "tidal_autoscaler_status_writes_deferred_total", nil); got != tt.wantDeferred {
					t.Errorf("status_writes_deferred_total = %v, want %v", got, tt.wantDeferred)
				}
				for _, reason := range []string{monitor.WriteChanged, monitor.WriteFields, monitor.WriteHistory, monitor.WriteValues} {
					got := metricValue(t, f.reg, "tidal_autoscaler_status_writes_total", map[string]string{"reason": reason})
					if got != tt.wantReasons[reason] {
						t.Errorf("status_writes_total{reason=%q} = %v, want %v", reason, got, tt.wantReasons[reason])
					}
				}
			})
		}
	}
}

// TestStatusMetricsMinIntervalForgets: a deleted autoscaler's last write
// is forgotten, and its namespace's beat and dealt slots with the
// namespace's last one.
func TestStatusMetricsMinIntervalForgets(t *testing.T) {
	w := world{scale: newScale(3, 3, "app=web"), pods: pods(100, 100, 100), customPods: milliByPod(10000, 10000, 10000)}
	hpa := newHPA("web", ptr.To[int32](1), 10, podsMetric("rps", "10"))
	f := newFixture(t, source.ModeNative, w, hpa)
	f.ctrl.r.statusInterval = time.Minute
	must(t, f.reconcile("web"))
	if _, ok := f.ctrl.r.statusWrites.at[ns+"/web"]; !ok {
		t.Fatal("the write was not recorded")
	}
	f.ctrl.r.statusWrites.take(ns, now, false, 0)
	f.ctrl.r.statusWrites.dealt[ns] = 3
	f.ctrl.delete(hpa)
	if _, ok := f.ctrl.r.statusWrites.at[ns+"/web"]; ok {
		t.Error("the write of a deleted autoscaler is still kept")
	}
	if n := len(f.ctrl.r.statusWrites.beats); n != 0 {
		t.Errorf("%d namespace beats kept after the namespace's last autoscaler was deleted, want 0", n)
	}
	if n := len(f.ctrl.r.statusWrites.dealt); n != 0 {
		t.Errorf("%d namespaces' dealt slots kept after the namespace's last autoscaler was deleted, want 0", n)
	}
}

func TestMayWait(t *testing.T) {
	tests := []struct {
		name string
		at   time.Duration
		want bool
	}{
		{name: "exactly the interval after the last write", at: time.Minute, want: true},
		{name: "a period later: must be written", at: 75 * time.Second, want: false},
		{name: "off the beat, past the interval", at: 61 * time.Second, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mayWait(now, now.Add(tt.at), time.Minute); got != tt.want {
				t.Errorf("mayWait = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestWriteQuota(t *testing.T) {
	tests := []struct {
		name     string
		n        int
		interval time.Duration
		want     int
	}{
		{name: "four periods", n: 1000, interval: time.Minute, want: 250},
		{name: "rounded up", n: 10, interval: time.Minute, want: 3},
		{name: "one autoscaler", n: 1, interval: time.Minute, want: 1},
		{name: "not a whole number of periods", n: 1000, interval: 70 * time.Second, want: 250},
		{name: "under a period", n: 1000, interval: 10 * time.Second, want: 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := writeQuota(tt.n, 15*time.Second, tt.interval); got != tt.want {
				t.Errorf("writeQuota = %d, want %d", got, tt.want)
			}
		})
	}
}

// valuesFleet is n autoscalers of one namespace whose metric values move
// every period, taken through deferStatus beat by beat as a controller
// with a 60 s interval and a 15 s period would.
type valuesFleet struct {
	r     *reconciler
	objs  []source.Object
	first time.Time // the namespace's first beat after now
}

const (
	fleetPeriod   = 15 * time.Second
	fleetInterval = time.Minute
)

func newValuesFleet(n int) *valuesFleet {
	f := &valuesFleet{
		r:     &reconciler{statusInterval: fleetInterval, statusWrites: newStatusWrites(fleetPeriod), selectors: clustercache.NewSelectorTracker()},
		objs:  make([]source.Object, n),
		first: now.Add(untilBeat(now, fleetPeriod, namespaceBeat(ns, fleetPeriod))),
	}
	for i := range f.objs {
		h := newHPA(fmt.Sprintf("web-%d", i), ptr.To[int32](1), 10, podsMetric("rps", "10"))
		h.Status.CurrentMetrics = []autoscalingv2.MetricStatus{podsStatus("rps", 0)}
		f.objs[i] = source.ObjectOfHPA(h)
		f.r.selectors.PutIfAbsent(ns, ns+"/"+h.Name, labels.Nothing())
	}
	return f
}

// beat reconciles every autoscaler once at beat (counted from first), in
// the order order gives, and returns the keys whose status was written.
func (f *valuesFleet) beat(beat int, order func(i int) int) []string {
	var written []string
	at := f.first.Add(time.Duration(beat) * fleetPeriod)
	for i := range f.objs {
		obj := f.objs[order(i)]
		moved := obj.DeepCopy()
		moved.HPAStatus().CurrentMetrics = []autoscalingv2.MetricStatus{podsStatus("rps", int64(beat+1))}
		s := &step{obj: moved, original: obj, key: ns + "/" + obj.GetName(), now: metav1.NewTime(at.Add(time.Duration(i) * time.Second)), stamp: at}
		if f.r.deferStatus(s, history.PersistNone, status.MetricValuesOnly(s.obj, s.original)) {
			continue
		}
		f.r.wroteStatus(s)
		written = append(written, s.key)
		f.objs[order(i)] = moved
	}
	return written
}

// TestStatusWritesSpread follows 8 autoscalers of one namespace whose
// statuses were last written at the same beat (all scaled at once, say)
// through valuesFleet: their writes of values, all on the same beats at
// first, spread to 8/4 = 2 a beat within a few intervals, whatever the
// order the queue hands them out in; none comes less than the interval
// after the autoscaler's last write, nor more than the interval and a
// period after it.
func TestStatusWritesSpread(t *testing.T) {
	const (
		n     = 8
		beats = 40
	)
	orders := map[string]func(beat, i int) int{
		"by name":           func(_, i int) int { return i },
		"reversed":          func(_, i int) int { return n - 1 - i },
		"rotating by beats": func(beat, i int) int { return (i + beat) % n },
	}
	for name, order := range orders {
		t.Run(name, func(t *testing.T) {
			f := newValuesFleet(n)
			last := map[string]int{}
			for _, o := range f.objs {
				f.r.statusWrites.at[ns+"/"+o.GetName()] = f.first.Add(-fleetPeriod)
				last[ns+"/"+o.GetName()] = -1
			}
			var perBeat [beats]int
			for beat := range beats {
				for _, key := range f.beat(beat, func(i int) int { return order(beat, i) }) {
					perBeat[beat]++
					if d := time.Duration(beat-last[key]) * fleetPeriod; d < fleetInterval || d > fleetInterval+fleetPeriod {
						t.Errorf("%s written %s after its last write, want between %s and %s", key, d, fleetInterval, fleetInterval+fleetPeriod)
					}
					last[key] = beat
				}
			}
			for beat := 4 * 5; beat < beats; beat++ {
				if perBeat[beat] != n/4 {
					t.Fatalf("writes per beat = %v; from beat %d on want %d a beat", perBeat, 4*5, n/4)
				}
			}
		})
	}
}

// podsStatus is a pods metric's current average value, milli.
func podsStatus(name string, milli int64) autoscalingv2.MetricStatus {
	return autoscalingv2.MetricStatus{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricStatus{
		Metric:  autoscalingv2.MetricIdentifier{Name: name},
		Current: autoscalingv2.MetricValueStatus{AverageValue: resource.NewMilliQuantity(milli, resource.DecimalSI)},
	}}
}

func TestWriteReason(t *testing.T) {
	tests := []struct {
		name                      string
		changed, told, valuesOnly bool
		persist                   history.Persistence
		want                      string
	}{
		{name: "unchanged status, history written now", persist: history.PersistNow, want: monitor.WriteHistory},
		{name: "interval off: a changed status", changed: true, persist: history.PersistWithStatus, want: monitor.WriteChanged},
		{name: "interval off: a changed status and the history", changed: true, persist: history.PersistNow, want: monitor.WriteChanged},
		{name: "fields changed", changed: true, told: true, persist: history.PersistNone, want: monitor.WriteFields},
		{name: "fields changed, history written now", changed: true, told: true, persist: history.PersistNow, want: monitor.WriteFields},
		{name: "values only", changed: true, told: true, valuesOnly: true, persist: history.PersistWithStatus, want: monitor.WriteValues},
		{name: "values only, history written now", changed: true, told: true, valuesOnly: true, persist: history.PersistNow, want: monitor.WriteHistory},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := writeReason(tt.changed, tt.told, tt.valuesOnly, tt.persist); got != tt.want {
				t.Errorf("writeReason = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestStatusWritesSpreadFromTheStart follows 8 autoscalers of one
// namespace whose metric values move every period, through valuesFleet,
// in the two cases where this controller knows no write of them: it
// starts beside them (a restart, a new leader), or it writes their first
// statuses together (created together). Their writes of values go out
// 8/4 = 2 a beat from the first that may carry any, each within one
// interval of it and then every interval: not all 8 at one beat.
func TestStatusWritesSpreadFromTheStart(t *testing.T) {
	const (
		n     = 8
		beats = 12
	)
	tests := []struct {
		name string
		// created writes their first statuses a period before beat 0.
		created bool
		// from is the first beat that may carry a write of values.
		from int
	}{
		{name: "a new leader finds them", from: 0},
		{name: "created together", created: true, from: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newValuesFleet(n)
			if tt.created {
				for _, o := range f.objs {
					f.r.statusWrites.wrote(ns+"/"+o.GetName(), ns, f.first.Add(-fleetPeriod), fleetInterval)
				}
			}
			var perBeat [beats]int
			written := map[string][]int{}
			for beat := range beats {
				for _, key := range f.beat(beat, func(i int) int { return i }) {
					perBeat[beat]++
					written[key] = append(written[key], beat)
				}
			}
			for beat, w := range perBeat {
				if want := map[bool]int{true: n / 4, false: 0}[beat >= tt.from]; w != want {
					t.Fatalf("writes per beat = %v, want %d a beat from beat %d on, none before", perBeat, n/4, tt.from)
				}
			}
			for key, bs := range written {
				if bs[0] >= tt.from+4 {
					t.Errorf("%s first written at beat %d, want within the first interval (beats %d to %d)", key, bs[0], tt.from, tt.from+3)
				}
				for j := 1; j < len(bs); j++ {
					if d := time.Duration(bs[j]-bs[j-1]) * fleetPeriod; d != fleetInterval {
						t.Errorf("%s written at beats %v: %s apart, want %s", key, bs, d, fleetInterval)
					}
				}
			}
		})
	}
}
