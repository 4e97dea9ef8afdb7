package controller

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/client-go/util/workqueue"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/tidal-autoscaler/tidal/autoscaler/behavior"
	"github.com/tidal-autoscaler/tidal/autoscaler/source"
)

func TestNextDue(t *testing.T) {
	// t0 is on the beat 3s: 12:00:00 is a multiple of 15s since the epoch.
	t0 := time.Date(2026, 11, 21, 12, 0, 3, 0, time.UTC)
	const (
		period = 15 * time.Second
		beat   = 3 * time.Second
	)
	tests := []struct {
		name            string
		due, start, now time.Time
		aligned         bool
		want            time.Time
	}{
		{name: "reconciled when due", due: t0, start: t0, now: t0, want: t0.Add(period)},
		{name: "a short wait in the queue does not stretch the period", due: t0, start: t0.Add(1500 * time.Millisecond), now: t0.Add(2 * time.Second), want: t0.Add(period)},
		{name: "a slow reconcile does not stretch it either", due: t0, start: t0, now: t0.Add(14 * time.Second), want: t0.Add(period)},
		{name: "a wait under half a period keeps its time", due: t0, start: t0.Add(7 * time.Second), now: t0.Add(7100 * time.Millisecond), want: t0.Add(period)},
		{name: "half a period behind still keeps it", due: t0, start: t0.Add(7500 * time.Millisecond), now: t0.Add(7500 * time.Millisecond), want: t0.Add(period)},
		{name: "just past half a period: 0.9 periods after the start", due: t0, start: t0.Add(7501 * time.Millisecond), now: t0.Add(7501 * time.Millisecond), want: t0.Add(21001 * time.Millisecond)},
		{name: "a long wait: not back moments after it ran", due: t0, start: t0.Add(12 * time.Second), now: t0.Add(12100 * time.Millisecond), want: t0.Add(25500 * time.Millisecond)},
		{name: "a period behind: 0.9 periods after the start", due: t0, start: t0.Add(40 * time.Second), now: t0.Add(40100 * time.Millisecond), want: t0.Add(53500 * time.Millisecond)},
		{name: "a reconcile longer than a period: at once, not a catch-up", due: t0, start: t0, now: t0.Add(40 * time.Second), want: t0.Add(40 * time.Second)},
		{name: "aligned, on the beat: one period", due: t0, start: t0, now: t0, aligned: true, want: t0.Add(period)},
		{name: "aligned, the beat within reach: joins it", due: t0.Add(-time.Second), start: t0, now: t0, aligned: true, want: t0.Add(period)},
		{name: "aligned, just before the beat: a period and a moment", due: t0.Add(-time.Millisecond), start: t0, now: t0, aligned: true, want: t0.Add(period)},
		{name: "aligned, off the beat: a tenth of a period towards it", due: t0.Add(5 * time.Second), start: t0.Add(5 * time.Second), now: t0.Add(5 * time.Second), aligned: true, want: t0.Add(period + 6500*time.Millisecond)},
		{name: "aligned, just after the beat: a tenth of a period, not almost two", due: t0.Add(time.Millisecond), start: t0.Add(time.Millisecond), now: t0.Add(time.Millisecond), aligned: true, want: t0.Add(period + 1501*time.Millisecond)},
		{name: "aligned, the tail of a namespace's burst keeps the beat", due: t0, start: t0.Add(2400 * time.Millisecond), now: t0.Add(2450 * time.Millisecond), aligned: true, want: t0.Add(period)},
		{name: "aligned, a period behind: after the floor, a tenth towards the beat", due: t0, start: t0.Add(20 * time.Second), now: t0.Add(20 * time.Second), aligned: true, want: t0.Add(35 * time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := nextDue(tt.due, tt.start, tt.now, period, beat, tt.aligned)
			if !got.Equal(tt.want) {
				t.Errorf("nextDue(t0+%s, started t0+%s, now t0+%s) = t0+%s, want t0+%s", tt.due.Sub(t0), tt.start.Sub(t0), tt.now.Sub(t0), got.Sub(t0), tt.want.Sub(t0))
			}
			if !got.After(tt.now) {
				return
			}
			// Never sooner than a period after due, nor than half a
			// period after the start; the beat adds at most a tenth to
			// due+period, or to 0.9 periods after a start more than half
			// a period late.
			if d := got.Sub(tt.due); d < period {
				t.Errorf("%s after due, want at least %s", d, period)
			}
			if d := got.Sub(tt.start); d < period/2 {
				t.Errorf("%s after the start, want at least %s", d, period/2)
			}
			base := tt.due.Add(period)
			if tt.start.Sub(tt.due) > period/2 {
				base = tt.start.Add(period - period/10)
			}
			if d := got.Sub(base); d < 0 || d > period/10 {
				t.Errorf("%s past its base (due+period, or start+0.9 periods when late), want in [0, %s]", d, period/10)
			}
		})
	}
}

// TestNextDueJoinsTheBeat: from any point of the period an aligned
// autoscaler is on its namespace's beat within ten intervals, each of them
// between one and 1.1 periods, and stays there.
func TestNextDueJoinsTheBeat(t *testing.T) {
	const (
		period = 15 * time.Second
		beat   = 3 * time.Second
	)
	t0 := time.Date(2026, 11, 21, 12, 0, 3, 0, time.UTC) // on the beat
	for _, start := range []time.Duration{0, time.Millisecond, time.Second, 7 * time.Second, 14999 * time.Millisecond} {
		t.Run(start.String(), func(t *testing.T) {
			due := t0.Add(start)
			joined := -1
			for i := range 15 {
				next := nextDue(due, due, due, period, beat, true)
				if d := next.Sub(due); d < period || d > period+period/10 {
					t.Fatalf("interval %d: %s, want in [%s, %s]", i+1, d, period, period+period/10)
				}
				due = next
				onBeat := untilBeat(due, period, beat) == 0
				if onBeat && joined < 0 {
					joined = i + 1
				}
				if !onBeat && joined >= 0 {
					t.Fatalf("left the beat at interval %d after joining it at %d", i+1, joined)
				}
			}
			if joined < 0 || joined > 10 {
				t.Errorf("joined the beat after %d intervals, want 1 to 10", joined)
			}
		})
	}
}

// TestNextDueThroughWaits follows one aligned autoscaler through 200
// reconciles, each started a random wait after it was due: waits up to
// half a period (the tail of a namespace's burst) leave it on the beat
// with every due time exactly a period apart; longer ones may move it,
// but reconciles stay at least half a period apart and no window of k
// periods holds more than k+1 of them, as upstream's.
func TestNextDueThroughWaits(t *testing.T) {
	const (
		period = 15 * time.Second
		beat   = 3 * time.Second
	)
	t0 := time.Date(2026, 11, 21, 12, 0, 3, 0, time.UTC) // on the beat
	tests := []struct {
		name      string
		maxWait   time.Duration
		keepsBeat bool
	}{
		{name: "waits up to half a period keep the beat", maxWait: period / 2, keepsBeat: true},
		{name: "waits up to a period", maxWait: period},
		{name: "waits up to two periods", maxWait: 2 * period},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			due := t0
			var starts []time.Time
			for i := range 200 {
				start := due.Add(time.Duration(rng.Int64N(int64(tt.maxWait) + 1)))
				starts = append(starts, start)
				next := nextDue(due, start, start.Add(50*time.Millisecond), period, beat, true)
				if next.Sub(due) < period {
					t.Fatalf("reconcile %d: next due %s after this one's, want at least %s", i, next.Sub(due), period)
				}
				if tt.keepsBeat && !next.Equal(due.Add(period)) {
					t.Fatalf("reconcile %d started %s late: next due at due+%s, want due+%s", i, start.Sub(due), next.Sub(due), period)
				}
				due = next
			}
			for i := 1; i < len(starts); i++ {
				if d := starts[i].Sub(starts[i-1]); d < period/2 {
					t.Errorf("reconciles %d and %d %s apart, want at least %s", i-1, i, d, period/2)
				}
			}
			for k := 1; k <= 5; k++ {
				for i := range starts {
					in := 0
					for _, s := range starts[i:] {
						if s.Sub(starts[i]) > time.Duration(k)*period {
							break
						}
						in++
					}
					if in > k+1 {
						t.Fatalf("%d reconciles within %d periods from reconcile %d, want at most %d", in, k, i, k+1)
					}
				}
			}
		})
	}
}

func TestNamespaceBeat(t *testing.T) {
	const period = 15 * time.Second
	seen := map[time.Duration]bool{}
	for _, ns := range []string{"default", "team-a", "team-b", "kube-system", "bench-7"} {
		b := namespaceBeat(ns, period)
		if b < 0 || b >= period {
			t.Errorf("namespaceBeat(%q) = %s, want in [0, %s)", ns, b, period)
		}
		if b != namespaceBeat(ns, period) {
			t.Errorf("namespaceBeat(%q) is not stable", ns)
		}
		seen[b] = true
	}
	if len(seen) < 4 {
		t.Errorf("5 namespaces share %d beats, want them spread", len(seen))
	}
}

func TestCadenceBookkeeping(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		// schedule is applied in order before started at now.
		schedule []time.Time
		forget   bool
		now      time.Time
		want     time.Time
	}{
		{name: "the time it was due", schedule: []time.Time{t0}, now: t0.Add(time.Second), want: t0},
		{name: "the earliest of two, as the queue keeps it", schedule: []time.Time{t0.Add(15 * time.Second), t0}, now: t0.Add(time.Second), want: t0},
		{name: "unknown: now", now: t0, want: t0},
		{name: "forgotten: now", schedule: []time.Time{t0}, forget: true, now: t0.Add(time.Second), want: t0.Add(time.Second)},
		{name: "recorded in the future (a later entry fired early): now", schedule: []time.Time{t0.Add(time.Minute)}, now: t0, want: t0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCadence()
			for _, s := range tt.schedule {
				c.scheduled("ns/a", s)
			}
			if tt.forget {
				c.forget("ns/a")
			}
			if got := c.started("ns/a", tt.now); !got.Equal(tt.want) {
				t.Errorf("started = t0+%s, want t0+%s", got.Sub(t0), tt.want.Sub(t0))
			}
			if got := c.started("ns/a", tt.now); !got.Equal(tt.now) {
				t.Errorf("a second started = t0+%s, want now (the record is consumed)", got.Sub(t0))
			}
		})
	}
}

// TestOffBeatCount: a key is counted off its beat from the reconcile that
// put its next one off it until one puts it back, or until it is
// forgotten (deleted).
func TestOffBeatCount(t *testing.T) {
	for _, tt := range []struct {
		name string
		// placed is applied in order: key and whether on the beat.
		placed []keyOnBeat
		forget string
		want   int
	}{
		{name: "none placed", want: 0},
		{name: "two joining", placed: []keyOnBeat{{"ns/a", false}, {"ns/b", false}}, want: 2},
		{name: "one joined", placed: []keyOnBeat{{"ns/a", false}, {"ns/b", false}, {"ns/a", true}}, want: 1},
		{name: "off twice counts once", placed: []keyOnBeat{{"ns/a", false}, {"ns/a", false}}, want: 1},
		{name: "put off the beat again (a long wait)", placed: []keyOnBeat{{"ns/a", true}, {"ns/a", false}}, want: 1},
		{name: "deleted while joining", placed: []keyOnBeat{{"ns/a", false}, {"ns/b", false}}, forget: "ns/b", want: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newCadence()
			for _, p := range tt.placed {
				c.placed(p.key, p.onBeat)
			}
			if tt.forget != "" {
				c.forget(tt.forget)
			}
			if got := c.offBeatCount(); got != tt.want {
				t.Errorf("offBeatCount = %d, want %d", got, tt.want)
			}
		})
	}
}

type keyOnBeat struct {
	key    string
	onBeat bool
}

// recordingQueue records the delays of AddAfter.
type recordingQueue struct {
	workqueue.TypedDelayingInterface[string]
	mu     sync.Mutex
	delays []time.Duration
}

func (q *recordingQueue) AddAfter(key string, d time.Duration) {
	q.mu.Lock()
	q.delays = append(q.delays, d)
	q.mu.Unlock()
	q.TypedDelayingInterface.AddAfter(key, d)
}

// TestWaitInQueue: a key added at t0 and reconciled at t0+1s (it waited in
// the queue) comes back at t0+15s, not t0+16s; one that waited 12s comes
// back 0.9 periods after it ran, not 3s after. A status write's event
// while it waits neither pushes that later nor queues it again.
func TestWaitInQueue(t *testing.T) {
	tests := []struct {
		name string
		wait time.Duration
		want time.Duration // the delay the reconcile asks for
	}{
		{name: "a short wait does not stretch the period", wait: time.Second, want: 14 * time.Second},
		{name: "a long wait: not back moments after it ran", wait: 12 * time.Second, want: 13500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, source.ModeNative, world{scale: newScale(3, 3, "app=web"), pods: pods(1000), podMetrics: milliByPod(500)},
				newHPA("web", nil, 10, cpuUtilization(50)))
			q := &recordingQueue{TypedDelayingInterface: f.ctrl.queue}
			f.ctrl.queue = q
			defer q.ShutDown()
			clk := f.ctrl.r.clock.(*testingclock.FakePassiveClock)
			clk.SetTime(clk.Now().Add(tt.wait))

			// The informer delivers the status write's event during the reconcile.
			f.ctrl.update(newHPA("web", nil, 10), newHPA("web", nil, 10))
			if !f.ctrl.processNextWorkItem(context.Background()) {
				t.Fatal("queue shut down")
			}
			q.mu.Lock()
			defer q.mu.Unlock()
			// The event finds the key waiting for an earlier time and does
			// not queue it again.
			if len(q.delays) != 1 || q.delays[0] != tt.want {
				t.Fatalf("AddAfter delays = %v, want [%s]", q.delays, tt.want)
			}
		})
	}
}

// stepQueue queues a key at once whatever its delay and records when it
// was due, so that a test can run reconciles one after the other at the
// times the controller asked for.
type stepQueue struct {
	workqueue.TypedDelayingInterface[string]
	now     func() time.Time
	pending []keyAt
}

type keyAt struct {
	key string
	at  time.Time
}

func (q *stepQueue) AddAfter(key string, d time.Duration) {
	q.pending = append(q.pending, keyAt{key, q.now().Add(d)})
	q.TypedDelayingInterface.Add(key)
}

// TestNamespaceAutoscalersComeDueTogether: two autoscalers of a namespace,
// due 4s apart, come due at the same instant, the namespace's beat, within
// ten intervals, none shorter than a period nor longer than 1.1 periods,
// and stay together.
func TestNamespaceAutoscalersComeDueTogether(t *testing.T) {
	const period = 15 * time.Second
	f := newFixture(t, source.ModeNative, world{scale: newScale(3, 3, "app=web"), pods: pods(1000), podMetrics: milliByPod(500)},
		newHPA("web", nil, 10, cpuUtilization(50)), newHPA("api", nil, 10, cpuUtilization(50)))
	clk := f.ctrl.r.clock.(*testingclock.FakePassiveClock)
	q := &stepQueue{TypedDelayingInterface: f.ctrl.queue, now: clk.Now}
	f.ctrl.queue = q
	defer q.ShutDown()
	// onBeat is the namespace's beat just before the fixture's clock.
	onBeat := clk.Now().Truncate(period).Add(namespaceBeat(ns, period))
	for onBeat.After(clk.Now()) {
		onBeat = onBeat.Add(-period)
	}
	dues := map[string][]time.Time{ns + "/web": {onBeat.Add(time.Second)}, ns + "/api": {onBeat.Add(5 * time.Second)}}
	for key, due := range dues {
		f.ctrl.cadence.forget(key)
		f.ctrl.cadence.scheduled(key, due[0])
	}
	// Both are in the queue (the fixture added them, web first): reconcile
	// each when it is due (a longer wait would move it later, see
	// nextDue), then each at the time it asked for.
	for i := 0; i < 2+2*12; i++ {
		switch i {
		case 0:
			clk.SetTime(dues[ns+"/web"][0])
		case 1:
			clk.SetTime(dues[ns+"/api"][0])
		default:
			next := q.pending[0]
			q.pending = q.pending[1:]
			dues[next.key] = append(dues[next.key], next.at)
			clk.SetTime(next.at)
		}
		if !f.ctrl.processNextWorkItem(context.Background()) {
			t.Fatal("queue shut down")
		}
		// Both start 1 s and 5 s after the beat: their next reconciles
		// are off it until they join (autoscalers_off_beat).
		if i == 1 {
			if got := f.ctrl.cadence.offBeatCount(); got != 2 {
				t.Errorf("after the first reconciles %d autoscalers off the beat, want 2", got)
			}
		}
	}
	if got := f.ctrl.cadence.offBeatCount(); got != 0 {
		t.Errorf("after joining %d autoscalers off the beat, want 0", got)
	}
	web, api := dues[ns+"/web"], dues[ns+"/api"]
	for key, ds := range dues {
		for i := 1; i < len(ds); i++ {
			if d := ds[i].Sub(ds[i-1]); d < period || d > period+period/10 {
				t.Errorf("%s: interval %d is %s, want in [%s, %s]", key, i, d, period, period+period/10)
			}
		}
	}
	together := -1
	for i := range min(len(web), len(api)) {
		same := web[i].Equal(api[i]) && untilBeat(web[i], period, namespaceBeat(ns, period)) == 0
		if same && together < 0 {
			together = i
		}
		if !same && together >= 0 {
			t.Errorf("apart again at interval %d (web beat+%s, api beat+%s)", i, web[i].Sub(onBeat), api[i].Sub(onBeat))
		}
	}
	if together < 0 || together > 10 {
		t.Errorf("together on the beat from interval %d, want 1 to 10; web %v, api %v", together, web, api)
	}
}

// TestEchoKeepsTheCadence: the event of a reconcile's own status write,
// which arrives while the key is being reconciled (no time recorded for
// it), does not win over the time the reconcile then schedules: an echo's
// time, a moment after the reconcile was due plus a period, would pull a
// key that is joining its namespace's beat back off it every interval.
func TestEchoKeepsTheCadence(t *testing.T) {
	const period = 15 * time.Second
	f := newFixture(t, source.ModeNative, world{scale: newScale(3, 3, "app=web"), pods: pods(1000), podMetrics: milliByPod(500)},
		newHPA("web", nil, 10, cpuUtilization(50)), newHPA("api", nil, 10, cpuUtilization(50)))
	clk := f.ctrl.r.clock.(*testingclock.FakePassiveClock)
	key := ns + "/web"
	beat := namespaceBeat(ns, period)
	// Due 5 s after the beat; reconciled and written 100 ms later.
	due := clk.Now().Truncate(period).Add(beat).Add(5 * time.Second)
	clk.SetTime(due.Add(100 * time.Millisecond))
	f.ctrl.cadence.forget(key)
	f.ctrl.cadence.scheduled(key, due)

	// processNextWorkItem's steps, with the echo between them.
	got := f.ctrl.cadence.started(key, clk.Now())
	f.ctrl.update(newHPA("web", nil, 10), newHPA("web", nil, 10))
	want := nextDue(got, clk.Now(), clk.Now(), period, beat, f.ctrl.sharesNamespace(ns))
	f.ctrl.scheduleAt(key, want)

	if want.Sub(due) <= period {
		t.Fatalf("nextDue = due+%s, want more than a period (on its way to the beat)", want.Sub(due))
	}
	if next := f.ctrl.cadence.started(key, want.Add(time.Hour)); !next.Equal(want) {
		t.Errorf("next reconcile due at due+%s, want due+%s (the cadence's, not the echo's)", next.Sub(due), want.Sub(due))
	}
}

// TestRecordsDatedWhenDue: a reconcile due at due that starts a second
// late (a queue wait) dates its recommendation and scale event at due, so
// that the next ones on the beat are whole periods apart (TestRecordStamp
// has the clamp; decision's TestStampOnTheBeat why it matters).
func TestRecordsDatedWhenDue(t *testing.T) {
	hpa := newHPA("web", nil, 10, cpuUtilization(50))
	// An empty behavior takes the API's default rules (behavior.FromV2),
	// whose scale-up policies keep scale events; nil is the legacy path.
	hpa.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{}
	f := newFixture(t, source.ModeNative, world{scale: newScale(3, 3, "app=web"), pods: pods(1000, 1000, 1000), podMetrics: milliByPod(900, 900, 900)}, hpa)
	clk := f.ctrl.r.clock.(*testingclock.FakePassiveClock)
	key := ns + "/web"
	due := clk.Now()
	f.ctrl.cadence.forget(key)
	f.ctrl.cadence.scheduled(key, due)
	clk.SetTime(due.Add(time.Second))
	if !f.ctrl.processNextWorkItem(context.Background()) {
		t.Fatal("queue shut down")
	}
	if len(f.scaleUpdates) != 1 {
		t.Fatalf("scale updates %v, want one scale-up", f.scaleUpdates)
	}
	h, err := behavior.Decode(f.stored("web").PersistedHistory())
	must(t, err)
	if len(h.ScaleUpEvents) != 1 || !h.ScaleUpEvents[0].Time.Equal(due) {
		t.Errorf("scale-up events %+v, want one dated at due (%s), not at the start a second later", h.ScaleUpEvents, due)
	}
	for _, r := range h.Recommendations {
		if !r.Time.Equal(due) {
			t.Errorf("recommendation %+v dated due+%s, want at due", r, r.Time.Sub(due))
		}
	}
}

func TestRecordStamp(t *testing.T) {
	const period = 15 * time.Second
	due := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		start time.Time
		want  time.Time
	}{
		{"started when due", due, due},
		{"a short wait in the queue: the due instant", due.Add(40 * time.Millisecond), due},
		{"a tenth of a period late: still the due instant", due.Add(period / 10), due},
		{"far behind: a tenth of a period before the start", due.Add(20 * time.Second), due.Add(20*time.Second - period/10)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := recordStamp(due, tc.start, period); !got.Equal(tc.want) {
				t.Errorf("recordStamp = %s, want %s", got, tc.want)
			}
		})
	}
}
