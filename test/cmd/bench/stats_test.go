package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidal-autoscaler/tidal/test/bench/samples"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		name string
		xs   []float64
		want float64
	}{
		{"none", nil, math.NaN()},
		{"one", []float64{4}, 4},
		{"odd count, unsorted", []float64{9, 1, 5}, 5},
		{"even count: mean of the middle two", []float64{4, 1, 3, 2}, 2.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := median(tc.xs)
			if got != tc.want && !(math.IsNaN(got) && math.IsNaN(tc.want)) {
				t.Errorf("median(%v) = %v, want %v", tc.xs, got, tc.want)
			}
		})
	}
}

func TestSpread(t *testing.T) {
	for _, tc := range []struct {
		name   string
		xs     []float64
		lo, hi float64
	}{
		{"one", []float64{3}, 3, 3},
		{"several", []float64{5, 2, 8, 3}, 2, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if lo, hi := spread(tc.xs); lo != tc.lo || hi != tc.hi {
				t.Errorf("spread(%v) = %v..%v, want %v..%v", tc.xs, lo, hi, tc.lo, tc.hi)
			}
		})
	}
	if lo, hi := spread(nil); !math.IsNaN(lo) || !math.IsNaN(hi) {
		t.Errorf("spread(nil) = %v..%v, want NaN", lo, hi)
	}
}

func TestRatioAndJudge(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		name  string
		a, b  float64
		o     op
		bound float64
		want  verdict
	}{
		{"40x the peer met", 4000, 100, atLeast, 40, met},
		{"40x the peer not met", 3900, 100, atLeast, 40, notMet},
		{"exactly on the bound", 80, 100, atLeast, 0.8, met},
		{"at most met", 1, 10, atMost, 0.2, met},
		{"at most not met", 3, 10, atMost, 0.2, notMet},
		{"reference zero", 5, 0, atLeast, 1, zeroReference},
		{"both zero", 0, 0, atMost, 0.2, zeroReference},
		{"figure missing", nan, 5, atMost, 1, unknown},
		{"reference missing", 5, nan, atMost, 1, unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, got := judge(tc.a, tc.b, tc.o, tc.bound); got != tc.want {
				t.Errorf("judge(%v / %v %s %v) = %q, want %q", tc.a, tc.b, tc.o, tc.bound, got, tc.want)
			}
		})
	}
}

func TestFigure(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{math.NaN(), "-"}, {0, "0"}, {1234.5, "1234"}, {12.345, "12.3"}, {1.2345, "1.23"}, {0.012345, "0.0123"},
	} {
		if got := figure(tc.v); got != tc.want {
			t.Errorf("figure(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

func TestBound(t *testing.T) {
	for _, tc := range []struct {
		name                                                            string
		reconciles, autoscalers, cpu, api, etcd, machine, requests, qps float64
		want                                                            string
		gap                                                             float64
		queue                                                           float64
		busy                                                            float64
	}{
		{"all reconciled", 1000, 1000, 29, 0, 0, 30, 0, 0, "not bound", 0, 0, 0},
		{"all reconciled, gap within a period and a bit", 1000, 1000, 29, 0, 0, 30, 0, 0, "not bound", 19.7, 0, 0},
		// The bounded side at 10k (2026-11-30 17:35 UTC): 12,037 reconciles
		// a period of 10,000 objects, the longest gap 25 s.
		{"the count covers every object, the gap does not", 12037, 10000, 2.56, 12.7, 2, 29, 2241, 200, "not every object each period (the count covers them, but the longest gap between two reconciles of one was 25.2 s, over 1.5 periods): the machine's CPU", 25.2, 0, 0},
		{"own CPU", 500, 1000, 28, 0, 0, 29, 0, 0, "its own CPU", 0, 0, 0},
		{"client QPS", 500, 1000, 5, 5, 1, 20, 2900, 200, "QPS limit", 0, 0, 0},
		// kcm at 3k (2026-11-30 00:28 UTC): 7,073 requests a period from
		// its three clients, each under its own 3,000; the machine full.
		{"several clients past one's limit, machine busy", 2443, 3000, 8.38, 13.1, 2.34, 29.0, 7073, 200, "the machine's CPU (29.0 of 30.0", 0, 0, 0},
		{"several clients past one's limit, machine idle", 500, 1000, 5, 5, 1, 15, 7073, 200, "not determined", 0, 0, 0},
		{"machine busy, control plane alone under the line", 500, 1000, 4.7, 14.9, 1.8, 28, 2200, 200, "the machine's CPU (28.0 of 30.0", 0, 0, 0},
		{"machine busy, the rest not measured (older runs)", 500, 1000, 4.7, 14.9, 1.8, 28, 2200, 200, "etcd 1.80; the rest kwok, the metrics server and the harness)", 0, 0, 0},
		{"machine not measured, control plane over the line", 500, 1000, 10, 14, 4, 0, 100, 200, "the machine's CPU (with kube-apiserver", 0, 0, 0},
		{"machine not in the samples (older runs)", 500, 1000, 10, 14, 4, math.NaN(), 100, 200, "the machine's CPU (with kube-apiserver", 0, 0, 0},
		{"machine measured and idle enough", 500, 1000, 10, 14, 4, 20, 100, 200, "not determined", 0, 0, 0},
		{"undetermined", 500, 1000, 5, 5, 1, 15, 100, 200, "not determined", 0, 0, 0},
		// One replica with the status bound at 10k (2026-12-06 09:22 UTC,
		// first round): 8,171 reconciles, 1,877 requests of 3,000, the
		// machine busy 17.9 of 30, its queue 6,271 deep.
		{"workers: a deep queue, nothing else full", 8171, 10000, 1.88, 13.4, 1.1, 17.9, 1877, 200, "its workers (its queue up to 6271 keys deep, with 1877 of its client's 3000 requests per period and the machine busy 17.9 of 30.0 CPU-s)", 0, 6271, 0},
		{"workers, the machine not measured (older runs)", 8171, 10000, 1.88, 13.4, 1.1, math.NaN(), 1877, 200, "its workers (its queue up to 6271 keys deep, with 1877 of its client's 3000 requests per period and it, kube-apiserver and etcd busy 16.4 of 30.0 CPU-s)", 0, 6271, 0},
		{"a shallow queue says nothing", 8171, 10000, 1.88, 13.4, 1.1, 17.9, 1877, 200, "not determined", 0, 400, 0},
		{"the QPS limit before the queue", 3365, 10000, 1.6, 16.9, 1.5, 21.4, 3090, 200, "QPS limit", 0, 6000, 0},
		{"every object: the queue does not matter", 10000, 10000, 2, 14, 1, 20, 2000, 200, "not bound", 0, 4096, 0},
		// The same one replica with its workers' busy time (2026-12-06
		// 20:00 UTC on): nearly always busy, or idle with the queue deep.
		{"workers: nearly always busy, nothing else full", 8171, 10000, 1.88, 13.4, 1.1, 17.9, 1877, 200, "its workers (busy 0.97 of the window, its queue up to 6271 keys deep, with 1877 of its client's 3000 requests per period and the machine busy 17.9 of 30.0 CPU-s)", 0, 6271, 0.97},
		{"workers nearly always busy with a shallow queue", 8171, 10000, 1.88, 13.4, 1.1, 17.9, 1877, 200, "its workers (busy 0.95", 0, 400, 0.95},
		{"a deep queue with idle workers: keys due together", 9630, 10000, 2.14, 18.7, 1.4, 23.9, 2638, 200, "not determined from these figures: not its client's limit, the CPU or its workers (busy 0.41 of the window; its queue up to 2280 keys deep held keys due together)", 0, 2280, 0.41},
		{"idle workers, shallow queue", 8171, 10000, 1.88, 13.4, 1.1, 17.9, 1877, 200, "not determined from these figures (see its log", 0, 400, 0.41},
		{"the QPS limit before busy workers", 3365, 10000, 1.6, 16.9, 1.5, 21.4, 3090, 200, "QPS limit", 0, 6000, 0.99},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := bound(sideFigures{reconciles: tc.reconciles, autoscalers: tc.autoscalers, cpu: tc.cpu, apiserverCPU: tc.api, etcdCPU: tc.etcd,
				machine: tc.machine, requests: tc.requests, cores: 2, periodSeconds: 15, qps: tc.qps, gap: tc.gap, queue: tc.queue, workerBusy: tc.busy})
			if !strings.Contains(got, tc.want) {
				t.Errorf("bound = %q, want it to say %q", got, tc.want)
			}
		})
	}
}

func TestRestOfMachine(t *testing.T) {
	nan := math.NaN()
	f := sideFigures{cpu: 4.5, apiserverCPU: 15.7, etcdCPU: 1.8}
	for _, tc := range []struct {
		name    string
		rest    []processCPU
		machine float64
		want    string
	}{
		{"not measured", nil, 30, "the rest kwok, the metrics server and the harness"},
		{"every one unknown", []processCPU{{"kwok", nan}}, 30, "the rest kwok, the metrics server and the harness"},
		{"each named, the remainder unaccounted", []processCPU{{"kwok", 1.5}, {"bench", 3}}, 30, "the rest: kwok 1.50, bench 3.00, unaccounted 3.50"},
		{"an unknown one left out", []processCPU{{"kwok", nan}, {"bench", 3}}, 30, "the rest: bench 3.00, unaccounted 5.00"},
		{"measured over the machine's figure", []processCPU{{"kwok", 9}}, 30, "the rest: kwok 9.00, unaccounted 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := f
			g.rest = tc.rest
			if got := restOfMachine(g, tc.machine); got != tc.want {
				t.Errorf("restOfMachine = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestWithinBound(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		name           string
		values, bounds []float64
		within, rounds int
	}{
		{"none", nil, nil, 0, 0},
		{"all within", []float64{40, 76, 12}, []float64{76, 76, 76}, 3, 3},
		{"one above", []float64{40, 77}, []float64{76, 76}, 1, 2},
		{"a bound missing", []float64{40, 50}, []float64{76}, 1, 1},
		{"a figure unknown", []float64{nan, 50}, []float64{76, 76}, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if in, n := withinBound(tc.values, tc.bounds); in != tc.within || n != tc.rounds {
				t.Errorf("withinBound(%v, %v) = %d of %d, want %d of %d", tc.values, tc.bounds, in, n, tc.within, tc.rounds)
			}
		})
	}
}

func TestShort(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Minute: "1m", 15 * time.Second: "15s", 90 * time.Second: "1m30s", time.Hour: "1h", 5 * time.Second: "5s",
	} {
		if got := short(d); got != want {
			t.Errorf("short(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestCeilingNote(t *testing.T) {
	for _, c := range []struct {
		name            string
		side            string
		reconciles, kcm float64
		objects         int
		gap             float64
		wantCeiling     bool
	}{
		{"kcm above half, tidal every object: the goal is out of reach", tidal, 3055, 1553, 3000, 18.2, true},
		{"the bounded side every object: its note names it", bounded, 3000, 2441, 3000, 17.9, true},
		{"no gap measured: the count alone", tidal, 3055, 1553, 3000, math.NaN(), true},
		{"kcm at or below half: the 2x goal can be met", tidal, 3000, 1500, 3000, 18.2, false},
		{"tidal short of every object: no excuse", tidal, 2900, 1553, 3000, 18.2, false},
		{"the count covers every object but the gap does not: no excuse", bounded, 12037, 5100, 10000, 25.2, false},
		{"no figures", tidal, math.NaN(), 1553, 3000, 18.2, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := ceilingNote(c.side, sideFigures{reconciles: c.reconciles, autoscalers: float64(c.objects), gap: c.gap, periodSeconds: 15}, c.kcm)
			if (got != "") != c.wantCeiling {
				t.Fatalf("ceilingNote(%s, %v, %v, %d, gap %v) = %q, want a note: %v", c.side, c.reconciles, c.kcm, c.objects, c.gap, got, c.wantCeiling)
			}
			if c.wantCeiling && !strings.Contains(got, ": "+c.side+" reconciled every object") {
				t.Errorf("ceilingNote names another side: %q", got)
			}
		})
	}
}

// TestShardedPerObjectNote: the sharded row divides each side's CPU by the
// objects it reconciled, since CPU per replica alone reads well when the
// replicas simply reconcile less (the 10k run of 2026-11-27's figures).
func TestShardedPerObjectNote(t *testing.T) {
	sz := sizes{shards: 3, fleet10k: 10000, fleetPods: 5}
	r := shardedRow(sz, false)
	s := func(side, metric string, v float64) samples.Sample {
		return samples.Sample{Row: "fleet", Side: side, Round: 1, Metric: metric, Value: v}
	}
	d := data{samples: map[string][]samples.Sample{r.id: {
		s(sharded, "cpu-per-period", 5.08), s(sharded, "reconciles-per-period", 1667), s(sharded, "machine-cpu-per-period", 30.2),
		s(tidal, "cpu-per-period", 4.74), s(tidal, "reconciles-per-period", 3070), s(tidal, "machine-cpu-per-period", 29.4),
	}}}
	want := "CPU per object reconciled: the 3 replicas 3.05 ms, one replica 1.54 ms (1.97 x); the whole machine's 18.1 ms and 9.58 ms (objects per period 1667 and 3070)"
	if notes := r.notes(d); !slices.Contains(notes, want) {
		t.Errorf("notes = %q, want one %q", notes, want)
	}
}

// TestShardedGoalIsPerObject: the sharded row judges CPU per object
// reconciled, each round's own, so that replicas reconciling more than one
// replica (the single replica held at its client's QPS limit) are not
// read as costing more, nor replicas reconciling less as costing less.
func TestShardedGoalIsPerObject(t *testing.T) {
	for _, bound := range []bool{false, true} {
		replicas, one := sharded, tidal
		if bound {
			replicas, one = boundedSharded, bounded
		}
		t.Run(fmt.Sprintf("status bound %v", bound), func(t *testing.T) {
			testShardedGoalIsPerObject(t, shardedRow(sizes{shards: 3, fleet10k: 10000, fleetPods: 5}, bound), replicas, one)
		})
	}
}

// testShardedGoalIsPerObject judges r, a sharded row whose sides are
// replicas and one.
func testShardedGoalIsPerObject(t *testing.T, r row, replicas, one string) {
	type fig struct {
		round                 int
		cpu, reconciles       float64
		oneCPU, oneReconciles float64
	}
	for _, tc := range []struct {
		name      string
		rounds    []fig
		wantRatio float64
		want      verdict
	}{
		// The run of 2026-11-29 20:38 UTC: CPU per replica 0.528 of one
		// replica's (ratio of medians), but the replicas reconciled 1.2
		// times as many objects: one replica was held at its client's
		// QPS limit, the replicas by the machine.
		{"the replicas reconcile more: met per object", []fig{{1, 3.46, 3635, 2.36, 3523}, {2, 3.79, 4410.333, 2.1833, 3017.333}, {3, 3.34, 3692.667, 2.14, 3030}}, 1.281, met},
		// 2026-11-27's run: CPU per replica 0.357 of one replica's, but
		// the replicas reconciled half as much.
		{"the replicas reconcile less: missed per object", []fig{{1, 5.08, 1667, 4.74, 3070}}, 1.974, notMet},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ss []samples.Sample
			add := func(round int, side, metric string, v float64) {
				ss = append(ss, samples.Sample{Row: "fleet", Side: side, Round: round, Metric: metric, Value: v})
			}
			for _, f := range tc.rounds {
				add(f.round, replicas, "cpu-per-period", f.cpu)
				add(f.round, replicas, "reconciles-per-period", f.reconciles)
				add(f.round, one, "cpu-per-period", f.oneCPU)
				add(f.round, one, "reconciles-per-period", f.oneReconciles)
			}
			got := r.eval(data{samples: map[string][]samples.Sample{r.id: ss}}).Goals[0]
			if math.Abs(got.Ratio-tc.wantRatio) > 0.001 || got.Verdict != tc.want {
				t.Errorf("goal %q: ratio %.4f, %s; want %.3f, %s", got.Goal, got.Ratio, got.Verdict, tc.wantRatio, tc.want)
			}
		})
	}
}

// TestValuesPer: a figure per another pairs them by round, and leaves out
// a round without the divisor.
func TestValuesPer(t *testing.T) {
	s := func(round int, metric string, v float64) samples.Sample {
		return samples.Sample{Row: "fleet", Side: tidal, Round: round, Metric: metric, Value: v}
	}
	d := data{samples: map[string][]samples.Sample{"j": {
		s(1, "cpu", 2), s(2, "cpu", 3), s(3, "cpu", 4),
		s(3, "objects", 8), s(1, "objects", 4),
	}}}
	got := d.values(ref{job: "j", row: "fleet", side: tidal, metric: "cpu", per: "objects", scale: 1000})
	if want := []float64{500, 500}; !slices.Equal(got, want) {
		t.Errorf("values = %v, want %v", got, want)
	}
}

// TestFleet1kGoalsArePerObject: the 1k row's goals divide each round's
// CPU and requests by the objects it reconciled, so a round where kcm
// falls behind does not count its missing objects as Tidal's overhead;
// when both sides reconcile every object, per object and per period agree.
func TestFleet1kGoalsArePerObject(t *testing.T) {
	var r row
	for _, x := range rows(newPlan(fullSizes(), 3, "", "")) {
		if x.id == "fleet-1k" {
			r = x
		}
	}
	type side struct{ cpu, requests, reconciles float64 }
	for _, tc := range []struct {
		name          string
		tidal, kcm    side
		cpu, requests float64
		want          [2]verdict
	}{
		// The round of 2026-11-29 22:24 UTC: per period 0.202 and 0.337,
		// both over their goals, because kcm reconciled 916 of 1,000.
		{"kcm behind: judged on the same work", side{0.48, 885, 1000}, side{2.3767, 2628.33, 916.33}, 0.185, 0.309, [2]verdict{met, met}},
		{"both reconcile every object: as per period", side{0.7, 918, 1000}, side{2.44, 2845, 1000}, 0.287, 0.323, [2]verdict{notMet, met}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ss []samples.Sample
			for name, f := range map[string]side{tidal: tc.tidal, kcm: tc.kcm} {
				for metric, v := range map[string]float64{"cpu-per-period": f.cpu, "requests-per-period": f.requests, "reconciles-per-period": f.reconciles} {
					ss = append(ss, samples.Sample{Row: "fleet", Side: name, Round: 1, Metric: metric, Value: v})
				}
			}
			got := r.eval(data{samples: map[string][]samples.Sample{"fleet-1k-moving": ss}}).Goals
			for i, want := range []float64{tc.cpu, tc.requests} {
				if math.Abs(got[i].Ratio-want) > 0.001 || got[i].Verdict != tc.want[i] {
					t.Errorf("goal %q: ratio %.4f, %s; want %.3f, %s", got[i].Goal, got[i].Ratio, got[i].Verdict, want, tc.want[i])
				}
			}
		})
	}
}

// TestUnitPer: a figure per another has the quotient of their units.
func TestUnitPer(t *testing.T) {
	d := data{samples: map[string][]samples.Sample{"j": {
		{Row: "fleet", Side: tidal, Round: 1, Metric: "cpu", Value: 1, Unit: "CPU-s"},
		{Row: "fleet", Side: tidal, Round: 1, Metric: "objects", Value: 2, Unit: "objects"},
	}}}
	if got := d.unit(ref{job: "j", row: "fleet", side: tidal, metric: "cpu", per: "objects"}); got != "CPU-s / objects" {
		t.Errorf("unit = %q, want %q", got, "CPU-s / objects")
	}
	if got := d.unit(ref{job: "j", row: "fleet", side: tidal, metric: "cpu"}); got != "CPU-s" {
		t.Errorf("unit = %q, want %q", got, "CPU-s")
	}
}

// TestShardedBoundNotes: the sharded rows say what held each side back,
// reading the replicas' requests against their limits added up (three
// clients of 200 QPS each), not one client's.
func TestShardedBoundNotes(t *testing.T) {
	sz := sizes{shards: 3, fleet10k: 10000, fleetPods: 5, qps: 200, syncPeriod: 15 * time.Second}
	type fig struct{ reconciles, cpu, machine, requests, queue, gap float64 }
	for _, tc := range []struct {
		name          string
		statusBound   bool
		replicas, one fig
		want          []string
	}{
		// 2026-12-06 09:22 UTC, the first round.
		{"status bound: the replicas reconcile every object, one replica waits on its workers", true,
			fig{10164, 2.24, 18.8, 2868, 209, 19.3}, fig{8171, 1.88, 17.9, 1877, 6271, 26.1},
			[]string{"tidal-bounded-sharded bound by: not bound", "tidal-bounded bound by: its workers (its queue up to 6271 keys deep"}},
		// Three replicas making one client's worth of requests, the
		// machine not full: not a QPS limit, since each has its own.
		{"the replicas' requests near one client's limit", false,
			fig{6000, 2.5, 20, 2950, 3000, 30}, fig{3400, 1.83, 25.4, 3070, 4000, 40},
			[]string{"tidal-sharded bound by: its workers (its queue up to 3000 keys deep, with 2950 of its client's 9000 requests", "tidal bound by: its client's QPS limit (3070 requests per period, limit 3000)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := shardedRow(sz, tc.statusBound)
			replicas, one := sharded, tidal
			if tc.statusBound {
				replicas, one = boundedSharded, bounded
			}
			var ss []samples.Sample
			for side, f := range map[string]fig{replicas: tc.replicas, one: tc.one} {
				for metric, v := range map[string]float64{"reconciles-per-period": f.reconciles, "cpu-per-period": f.cpu, "machine-cpu-per-period": f.machine,
					"requests-per-period": f.requests, "max-queue-depth": f.queue, "longest-visit-gap": f.gap, "kube-apiserver-cpu-per-period": 10, "etcd-cpu-per-period": 1} {
					ss = append(ss, samples.Sample{Row: "fleet", Side: side, Round: 1, Metric: metric, Value: v})
				}
			}
			notes := r.notes(data{samples: map[string][]samples.Sample{r.id: ss}})
			for _, w := range tc.want {
				if !slices.ContainsFunc(notes, func(n string) bool { return strings.HasPrefix(n, w) }) {
					t.Errorf("no note begins %q in %q", w, notes)
				}
			}
		})
	}
}
