package main

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"time"

	"github.com/tidal-autoscaler/tidal/test/bench/samples"
)

// ref names one figure: a metric of one side in one benchmark row of one
// job's samples, multiplied by scale (1 when 0: e.g. 1/autoscalers for a
// figure per autoscaler), and divided, when per is set, by the same
// round's figure of the metric per (e.g. CPU per object reconciled).
type ref struct {
	job, row, side, metric string
	scale                  float64
	per                    string
	label                  string // shown instead of metric when set
}

// perObject is r per object its side reconciled in the same round (a
// per-period figure over that round's reconciles per period), named so in
// the table: cpu-per-period becomes cpu-per-object.
func (r ref) perObject() ref {
	r.per = "reconciles-per-period"
	r.label = strings.TrimSuffix(r.metric, "-period") + "-object"
	return r
}

func (r ref) name() string {
	if r.label != "" {
		return r.label
	}
	return r.metric
}

// goal is one of a row's goals: the ratio of two figures' medians against
// a bound.
type goal struct {
	text     string
	num, den ref
	op       op
	bound    float64
}

// row is one line of the table.
type row struct {
	id, title string
	// cells are the figures shown; goals the ratios judged.
	cells []ref
	goals []goal
	// notes adds sentences computed from the figures; todo says what the
	// row does not measure yet.
	notes func(d data) []string
	todo  []string
}

// jobs are the jobs the row reads.
func (r row) jobs() []string {
	seen := map[string]bool{}
	var out []string
	add := func(x ref) {
		if x.job != "" && !seen[x.job] {
			seen[x.job] = true
			out = append(out, x.job)
		}
	}
	for _, c := range r.cells {
		add(c)
	}
	for _, g := range r.goals {
		add(g.num)
		add(g.den)
	}
	return out
}

// data is what the jobs left: samples and failures by job id.
type data struct {
	samples map[string][]samples.Sample
	failed  map[string]string
}

// values are x's figures, one per round, in round order; with per set,
// one for each round that has both figures.
func (d data) values(x ref) []float64 {
	scale := x.scale
	if scale == 0 {
		scale = 1
	}
	var divisor map[int]float64
	if x.per != "" {
		divisor = map[int]float64{}
		for _, s := range d.samples[x.job] {
			if s.Row == x.row && s.Side == x.side && s.Metric == x.per {
				divisor[s.Round] = s.Value
			}
		}
	}
	var out []float64
	for _, s := range d.samples[x.job] {
		if s.Row != x.row || s.Side != x.side || s.Metric != x.metric {
			continue
		}
		v := s.Value * scale
		if divisor != nil {
			den, ok := divisor[s.Round]
			if !ok {
				continue
			}
			v = ratio(v, den)
		}
		out = append(out, v)
	}
	return out
}

// unit is x's unit, a quotient (e.g. "CPU-s / objects") when per is set.
func (d data) unit(x ref) string {
	of := func(metric string) string {
		for _, s := range d.samples[x.job] {
			if s.Row == x.row && s.Side == x.side && s.Metric == metric {
				return s.Unit
			}
		}
		return ""
	}
	u := of(x.metric)
	if x.per == "" || u == "" {
		return u
	}
	return u + " / " + of(x.per)
}

// cell is one figure's rounds.
type cell struct {
	Side, Metric, Unit string
	Values             []float64
}

func (c cell) Median() float64 { return median(c.Values) }

// checked is one judged goal.
type checked struct {
	Goal    string
	Ratio   float64
	Verdict verdict
}

// result is one row as the table shows it.
type result struct {
	ID, Title string
	Cells     []cell
	Goals     []checked
	Notes     []string
	// Failure says why a job of the row did not finish, when one did not.
	Failure string
}

func (r row) eval(d data) result {
	res := result{ID: r.id, Title: r.title}
	for _, j := range r.jobs() {
		if msg, ok := d.failed[j]; ok {
			res.Failure += fmt.Sprintf("%s: %s. ", j, msg)
		}
	}
	for _, c := range r.cells {
		res.Cells = append(res.Cells, cell{Side: c.side, Metric: c.name(), Unit: d.unit(c), Values: d.values(c)})
	}
	for _, g := range r.goals {
		rt, v := judge(median(d.values(g.num)), median(d.values(g.den)), g.op, g.bound)
		res.Goals = append(res.Goals, checked{Goal: g.text, Ratio: rt, Verdict: v})
	}
	if r.notes != nil {
		res.Notes = append(res.Notes, r.notes(d)...)
	}
	res.Notes = append(res.Notes, r.todo...)
	return res
}

const (
	tidal = "tidal"
	peer  = "prometheus-adapter"
	noop  = "noop"
	kcm   = "kcm"
	// sharded is the fleet benchmark's side of several `tidal autoscaler
	// --sharding` replicas.
	sharded = "tidal-sharded"
	// bounded is the fleet benchmark's side of one replica with
	// --status-metrics-min-interval=60s.
	bounded = "tidal-bounded"
	// boundedSharded is sharded with bounded's status bound.
	boundedSharded = "tidal-bounded-sharded"
	// native is the fleet benchmark's side of one replica in native mode,
	// on autoscaling/v2 HPAs (kcm's HPA controller stopped meanwhile).
	native = "tidal-native"
	// upstream is the closed loop's reference: prometheus-adapter and
	// kube-controller-manager's HPA controller.
	upstream = "upstream"
)

// movingSides are the sides of every moving-usage row, in the order a
// round runs them and the tables show them: tidal, its reference, then
// tidal with the status bound on (the issue's "measure the moving-usage
// rows with it on and off") and in native mode, on kcm's own objects.
var movingSides = []string{tidal, kcm, bounded, native}

// rows are the comparisons, at the plan's sizes.
func rows(p plan) []row {
	sz := p.sz
	requests := func(id, title, bench string, peerFactor float64) []row {
		agg, direct := bench+"/aggregator", bench+"/direct"
		at := func(row, side, metric string) ref {
			return ref{job: "adapter-requests", row: row, side: side, metric: metric}
		}
		return []row{{
			id: id, title: fmt.Sprintf("%s, %d pods, %d clients, through the aggregator", title, sz.pods, sz.clients),
			cells: []ref{at(agg, tidal, "rps"), at(agg, peer, "rps"), at(agg, noop, "rps"), at(agg, tidal, "p99"), at(agg, peer, "p99"), at(agg, noop, "p99")},
			goals: []goal{
				{text: fmt.Sprintf("requests/s >= %gx prometheus-adapter's", peerFactor), num: at(agg, tidal, "rps"), den: at(agg, peer, "rps"), op: atLeast, bound: peerFactor},
				{text: "requests/s >= 0.8 of the no-op server's (the ceiling)", num: at(agg, tidal, "rps"), den: at(agg, noop, "rps"), op: atLeast, bound: 0.8},
			},
		}, {
			id: id + "-port", title: fmt.Sprintf("%s at the adapter's port, %d pods, %d clients", title, sz.pods, sz.clients),
			cells: []ref{at(direct, tidal, "cpu-per-request"), at(direct, noop, "cpu-per-request"), at(direct, peer, "cpu-per-request"), at(direct, tidal, "rps"), at(direct, noop, "rps")},
			goals: []goal{
				{text: "CPU per request <= 2x the no-op server's", num: at(direct, tidal, "cpu-per-request"), den: at(direct, noop, "cpu-per-request"), op: atMost, bound: 2},
			},
		}}
	}
	out := requests("pods", "pods/* custom metric", "pods", 40)
	out = append(out, requests("podmetrics", "PodMetrics list", "podmetrics", 15)...)
	// requests() gives pods, pods-port, podmetrics, podmetrics-port; the
	// issue lists both aggregator rows first.
	out[1], out[2] = out[2], out[1]

	discovery := func(id string, size [2]int) row {
		key := fmt.Sprintf("discovery/%d", size[0]*size[1])
		at := func(side, metric string) ref { return ref{job: "discovery", row: key, side: side, metric: metric} }
		return row{
			id: id, title: fmt.Sprintf("discovery, %s series (%s names)", count(size[0]*size[1]), count(size[0])),
			cells: []ref{at(tidal, "rss-growth"), at(peer, "rss-growth"), at(tidal, "relist"), at("raw-series", "relist")},
			goals: []goal{
				{text: "RSS growth <= 1/10 of prometheus-adapter's", num: at(tidal, "rss-growth"), den: at(peer, "rss-growth"), op: atMost, bound: 0.1},
				{text: "relist <= 1.5x the raw /api/v1/series call", num: at(tidal, "relist"), den: at("raw-series", "relist"), op: atMost, bound: 1.5},
			},
		}
	}
	small, large := discovery("discovery-small", sz.discSmall), discovery("discovery-large", sz.discLarge)
	large.notes = func(d data) []string {
		var notes []string
		for _, side := range []string{tidal, peer} {
			a := median(d.values(ref{job: "discovery", row: fmt.Sprintf("discovery/%d", sz.discSmall[0]*sz.discSmall[1]), side: side, metric: "rss-growth"}))
			b := median(d.values(ref{job: "discovery", row: fmt.Sprintf("discovery/%d", sz.discLarge[0]*sz.discLarge[1]), side: side, metric: "rss-growth"}))
			notes = append(notes, fmt.Sprintf("%s's RSS growth from %s to %s series: %s MiB -> %s MiB (x%s)",
				side, count(sz.discSmall[0]*sz.discSmall[1]), count(sz.discLarge[0]*sz.discLarge[1]), figure(a), figure(b), figure(ratio(b, a))))
		}
		return notes
	}
	out = append(out, small, large)

	fleetAt := func(j, side, metric string) ref { return ref{job: j, row: "fleet", side: side, metric: metric} }
	// The 1k row's goals are judged per object reconciled, each round's
	// own: at 1k both controllers should visit every object every period,
	// but kcm falls behind in some rounds (914 to 1,000 objects a
	// period), and per period its missing objects would count as savings.
	// When both reconcile every object the two readings are the same.
	moving := "fleet-1k-moving"
	perObject := func(side, metric string) ref { return fleetAt(moving, side, metric).perObject() }
	var moving1k []ref
	for _, m := range []string{"cpu-per-period", "requests-per-period", "reconciles-per-period", "longest-visit-gap", "machine-cpu-per-period"} {
		for _, side := range movingSides {
			moving1k = append(moving1k, fleetAt(moving, side, m))
		}
	}
	for _, m := range []string{"cpu-per-period", "requests-per-period"} {
		for _, side := range movingSides {
			moving1k = append(moving1k, perObject(side, m))
		}
	}
	out = append(out, row{
		id: "fleet-1k", title: fmt.Sprintf("%s autoscalers x %d pods, %s sync, usage moving", count(sz.fleet1k), sz.fleetPods, sz.syncPeriod),
		cells: moving1k,
		goals: []goal{
			{text: "CPU per object reconciled <= 0.2 of kcm's", num: perObject(tidal, "cpu-per-period"), den: perObject(kcm, "cpu-per-period"), op: atMost, bound: 0.2},
			{text: "API requests per object reconciled <= 0.33 of kcm's", num: perObject(tidal, "requests-per-period"), den: perObject(kcm, "requests-per-period"), op: atMost, bound: 0.33},
			{text: "with --status-metrics-min-interval=60s: CPU per object reconciled <= 0.2 of kcm's", num: perObject(bounded, "cpu-per-period"), den: perObject(kcm, "cpu-per-period"), op: atMost, bound: 0.2},
			{text: "in native mode (kcm's own objects, autoscaling/v2 HPAs): CPU per object reconciled <= 0.2 of kcm's", num: perObject(native, "cpu-per-period"), den: perObject(kcm, "cpu-per-period"), op: atMost, bound: 0.2},
		},
		notes: func(d data) []string {
			m := func(side, metric string) float64 { return median(d.values(fleetAt(moving, side, metric))) }
			per := func(side, metric string) string { return figure(ratio(m(side, metric), m(kcm, metric))) }
			return []string{fmt.Sprintf("per period (the same as per object when both sides reconcile every object; here tidal %s, kcm %s objects a period): CPU %s of kcm's (bounded %s, native %s), API requests %s",
				figure(m(tidal, "reconciles-per-period")), figure(m(kcm, "reconciles-per-period")),
				per(tidal, "cpu-per-period"), per(bounded, "cpu-per-period"), per(native, "cpu-per-period"), per(tidal, "requests-per-period"))}
		},
	})

	steady := "fleet-10k-steady"
	perAutoscaler := func(j string, n int) ref {
		return ref{job: j, row: "fleet", side: tidal, metric: "cpu-per-period", scale: 1 / float64(n), label: "cpu-per-period per autoscaler, " + count(n) + " steady"}
	}
	out = append(out, row{
		id: "fleet-10k-steady", title: fmt.Sprintf("%s autoscalers x %d pods, usage steady", count(sz.fleet10k), sz.fleetPods),
		cells: []ref{fleetAt(steady, tidal, "reconciles-per-period"), fleetAt(steady, kcm, "reconciles-per-period"),
			fleetAt(steady, tidal, "longest-visit-gap"), fleetAt(steady, kcm, "longest-visit-gap"), fleetAt(steady, tidal, "cpu-per-period"), fleetAt(steady, kcm, "cpu-per-period"),
			perAutoscaler(steady, sz.fleet10k), perAutoscaler("fleet-1k-steady", sz.fleet1k)},
		goals: []goal{
			{text: "tidal reconciles every object every period (reconciles per period / autoscalers >= 1)", num: fleetAt(steady, tidal, "reconciles-per-period"), den: fleetAt(steady, tidal, "autoscalers"), op: atLeast, bound: 1},
			{text: "kcm reconciles every object every period (reconciles per period / autoscalers >= 1)", num: fleetAt(steady, kcm, "reconciles-per-period"), den: fleetAt(steady, kcm, "autoscalers"), op: atLeast, bound: 1},
			{text: fmt.Sprintf("tidal's CPU per autoscaler at %s <= 1.15x its figure at %s (usage steady)", count(sz.fleet10k), count(sz.fleet1k)),
				num: perAutoscaler(steady, sz.fleet10k), den: perAutoscaler("fleet-1k-steady", sz.fleet1k), op: atMost, bound: 1.15},
		},
		notes: func(d data) []string {
			return []string{"longest time between two visits of one object: tidal's from its own tidal_autoscaler_reconcile_gap_max_seconds, sampled once a period; kcm's from its per-HPA /scale reads in the audit log"}
		},
	})

	for _, n := range []struct {
		job   string
		count int
	}{{"fleet-3k-moving", sz.fleet3k}, {"fleet-10k-moving", sz.fleet10k}} {
		at := func(side, metric string) ref { return fleetAt(n.job, side, metric) }
		var cells []ref
		for _, m := range []string{"reconciles-per-period", "cpu-per-period", "requests-per-period", "kube-apiserver-cpu-per-period", "etcd-cpu-per-period", "machine-cpu-per-period"} {
			for _, side := range movingSides {
				cells = append(cells, at(side, m))
			}
		}
		out = append(out, row{
			id: n.job[:len(n.job)-len("-moving")], title: fmt.Sprintf("%s autoscalers x %d pods, usage moving", count(n.count), sz.fleetPods),
			cells: cells,
			goals: []goal{
				{text: "objects reconciled per period >= 2x kcm's", num: at(tidal, "reconciles-per-period"), den: at(kcm, "reconciles-per-period"), op: atLeast, bound: 2},
				{text: "with --status-metrics-min-interval=60s: objects reconciled per period >= 2x kcm's", num: at(bounded, "reconciles-per-period"), den: at(kcm, "reconciles-per-period"), op: atLeast, bound: 2},
				{text: "in native mode (kcm's own objects, autoscaling/v2 HPAs): objects reconciled per period >= 2x kcm's", num: at(native, "reconciles-per-period"), den: at(kcm, "reconciles-per-period"), op: atLeast, bound: 2},
			},
			notes: func(d data) []string {
				var notes []string
				figs := map[string]sideFigures{}
				for _, side := range movingSides {
					figs[side] = fleetFigures(d, at, side, n.count, sz.qps, sz) // both sides' limit
					notes = append(notes, fmt.Sprintf("%s bound by: %s", side, bound(figs[side])))
				}
				for _, side := range []string{tidal, bounded, native} {
					if c := ceilingNote(side, figs[side], figs[kcm].reconciles); c != "" {
						notes = append(notes, c)
					}
				}
				return notes
			},
		})
	}

	out = append(out, shardedRow(sz, false), shardedRow(sz, true))

	loopAt := func(side, metric string) ref {
		return ref{job: "closed-loop", row: "closed-loop", side: side, metric: metric}
	}
	stepped := func(side string) ref { return loopAt(side, "step-to-replicas") }
	out = append(out, row{
		id: "closed-loop",
		title: fmt.Sprintf("closed loop: load step to new replicas (%d -> %d), %s rate window, %s sync (tidal vs kcm + prometheus-adapter)",
			sz.loopFrom, sz.loopTo, short(sz.rateWindow), short(sz.syncPeriod)),
		cells: []ref{stepped(tidal), stepped(upstream), loopAt(tidal, "first-rescale"), loopAt(upstream, "first-rescale"),
			loopAt(tidal, "step-to-ready"), loopAt(upstream, "step-to-ready"), loopAt(tidal, "bound")},
		goals: []goal{
			{text: "step to the new count <= scrape + rate window + one sync", num: stepped(tidal), den: loopAt(tidal, "bound"), op: atMost, bound: 1},
			{text: "step to the new count <= upstream's (kcm + prometheus-adapter)", num: stepped(tidal), den: stepped(upstream), op: atMost, bound: 1},
		},
		notes: func(d data) []string {
			var notes []string
			for _, side := range []string{tidal, upstream} {
				in, n := withinBound(d.values(stepped(side)), d.values(loopAt(side, "bound")))
				notes = append(notes, fmt.Sprintf("%s: %d of %d rounds within the bound; median step / bound %s", side, in, n,
					figure(ratio(median(d.values(stepped(side))), median(d.values(loopAt(side, "bound")))))))
			}
			return notes
		},
	})
	return out
}

// fleetFigures are side's medians in a fleet job's samples (at reads
// them), for bound: autoscalers objects, a client limit of qps.
func fleetFigures(d data, at func(side, metric string) ref, side string, autoscalers, qps int, sz sizes) sideFigures {
	m := func(metric string) float64 { return median(d.values(at(side, metric))) }
	return sideFigures{
		reconciles: m("reconciles-per-period"), autoscalers: float64(autoscalers),
		cpu: m("cpu-per-period"), apiserverCPU: m("kube-apiserver-cpu-per-period"), etcdCPU: m("etcd-cpu-per-period"), machine: m("machine-cpu-per-period"),
		requests: m("requests-per-period"), cores: float64(runtime.NumCPU()), periodSeconds: sz.syncPeriod.Seconds(), qps: float64(qps),
		gap: m("longest-visit-gap"), queue: m("max-queue-depth"), workerBusy: m("worker-busy-share"),
		rest: []processCPU{
			{"kwok", m(samples.KwokCPU)},
			{"kube-controller-manager's workload controllers and garbage collector", m(samples.WorkloadControllersCPU)},
			{"the benchmark's process (test metrics server, harness)", m(samples.BenchmarkProcessCPU)},
		},
	}
}

// short writes a duration without zero units: 1m, not 1m0s.
func short(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// count writes 1000 as 1k, 1000000 as 1M.
func count(n int) string {
	switch {
	case n >= 1e6 && n%1e5 == 0:
		return trimZero(float64(n)/1e6) + "M"
	case n >= 1e3 && n%100 == 0:
		return trimZero(float64(n)/1e3) + "k"
	default:
		return fmt.Sprint(n)
	}
}

func trimZero(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// shardOverhead is the sharded row's allowance for what every replica
// repeats whatever its share: its informers receive every
// HorizontalAutoscaler's watch events (the echo of every status write,
// not only its own), it lists the PodMetrics of every namespace it owns
// an object in, and it renews and reads the Leases. The goal: the
// replicas together spend at most shardOverhead times one replica's CPU
// for the same work, i.e. with 3 shards each replica at most half of one
// replica's.
const shardOverhead = 1.5

// shardedRow is `3 shards at 10,000 autoscalers, CPU per replica`: sz.shards
// replicas of `tidal autoscaler --sharding` beside one replica, usage
// moving, in one job, the sides taking turns. With statusBound, both sides run
// with the status bound (--status-metrics-min-interval): kube-apiserver
// can then take the status writes of every reconcile, so both sides can
// reconcile every object and the goals compare the same work.
func shardedRow(sz sizes, statusBound bool) row {
	id, replicasSide, oneSide, with := "fleet-10k-sharded", sharded, tidal, ""
	if statusBound {
		id, replicasSide, oneSide, with = "fleet-10k-sharded-bounded", boundedSharded, bounded, ", status bound on both sides"
	}
	at := func(side, metric string) ref { return ref{job: id, row: "fleet", side: side, metric: metric} }
	cells := []ref{at(replicasSide, "cpu-per-period-per-replica"), at(oneSide, "cpu-per-period"), at(replicasSide, "max-replica-cpu-per-period"),
		at(replicasSide, "cpu-per-period"), at(replicasSide, "reconciles-per-period"), at(oneSide, "reconciles-per-period")}
	for i := range sz.shards {
		cells = append(cells, at(replicasSide, fmt.Sprintf("replica-%d-reconciles-per-period", i+1)))
	}
	cells = append(cells, at(replicasSide, "requests-per-period"), at(oneSide, "requests-per-period"),
		at(replicasSide, "podmetrics-lists-per-period"), at(oneSide, "podmetrics-lists-per-period"),
		at(replicasSide, "machine-cpu-per-period"), at(oneSide, "machine-cpu-per-period"),
		at(replicasSide, "rss-per-replica"), at(oneSide, "rss"),
		at(replicasSide, "kube-apiserver-cpu-per-period"), at(oneSide, "kube-apiserver-cpu-per-period"))
	limit := shardOverhead / float64(sz.shards)
	perObject := func(side string) ref { return at(side, "cpu-per-period").perObject() }
	return row{
		id: id, title: fmt.Sprintf("%d shards at %s autoscalers x %d pods, usage moving%s, CPU per replica", sz.shards, count(sz.fleet10k), sz.fleetPods, with),
		cells: cells,
		goals: []goal{
			// Per object reconciled: each side reconciles what its limits
			// let it (one replica its client's QPS, the replicas the
			// machine's CPU), so CPU per replica alone compares unequal
			// work; CPU per replica at the same work is this ratio divided
			// by the shards.
			{text: fmt.Sprintf("CPU per object reconciled: the %d replicas together <= %g x one replica's (at the same work, CPU per replica <= %.3g of one replica's: 1/%d x %g for what every replica repeats)", sz.shards, shardOverhead, limit, sz.shards, shardOverhead),
				num: perObject(replicasSide), den: perObject(oneSide), op: atMost, bound: shardOverhead},
			{text: "the shards together reconcile every object every period (reconciles per period / autoscalers >= 0.99)",
				num: at(replicasSide, "reconciles-per-period"), den: at(replicasSide, "autoscalers"), op: atLeast, bound: 0.99},
		},
		notes: func(d data) []string {
			m := func(x ref) float64 { return median(d.values(x)) }
			one := m(at(oneSide, "cpu-per-period"))
			notes := []string{
				fmt.Sprintf("CPU per replica per period: %s x one replica's, whatever each side reconciled (below)",
					figure(ratio(m(at(replicasSide, "cpu-per-period-per-replica")), one))),
				fmt.Sprintf("CPU per period: the %d replicas together %s x one replica's, the busiest replica %s x (an even split with nothing repeated: 1 and %s)",
					sz.shards, figure(ratio(m(at(replicasSide, "cpu-per-period")), one)), figure(ratio(m(at(replicasSide, "max-replica-cpu-per-period")), one)), figure(1/float64(sz.shards)))}
			var split []string
			total := m(at(replicasSide, "reconciles-per-period"))
			for i := range sz.shards {
				n := m(at(replicasSide, fmt.Sprintf("replica-%d-reconciles-per-period", i+1)))
				split = append(split, fmt.Sprintf("%s (%s%%)", figure(n), figure(100*ratio(n, total))))
			}
			notes = append(notes, fmt.Sprintf("objects reconciled per period by each replica (start order; the split follows the replicas' random identities, so it differs from round to round): %s",
				strings.Join(split, ", ")))
			// The goal's figures (the medians of each round's CPU per
			// object), and the whole machine's.
			oneObjects := m(at(oneSide, "reconciles-per-period"))
			machine := func(side string) ref { return at(side, "machine-cpu-per-period").perObject() }
			notes = append(notes, fmt.Sprintf("CPU per object reconciled: the %d replicas %s ms, one replica %s ms (%s x); the whole machine's %s ms and %s ms (objects per period %s and %s)",
				sz.shards, figure(1000*m(perObject(replicasSide))), figure(1000*m(perObject(oneSide))), figure(ratio(m(perObject(replicasSide)), m(perObject(oneSide)))),
				figure(1000*m(machine(replicasSide))), figure(1000*m(machine(oneSide))), figure(total), figure(oneObjects)))
			// What held each side back; the replicas' client limits add up.
			notes = append(notes,
				fmt.Sprintf("%s bound by: %s", replicasSide, bound(fleetFigures(d, at, replicasSide, sz.fleet10k, sz.qps*sz.shards, sz))),
				fmt.Sprintf("%s bound by: %s", oneSide, bound(fleetFigures(d, at, oneSide, sz.fleet10k, sz.qps, sz))))
			// kcm at the same size: this job's own phase when it has one
			// (the smoke run's), else the fleet-10k row's when it ran.
			k := at(kcm, "cpu-per-period")
			if len(d.values(k)) == 0 {
				k = ref{job: "fleet-10k-moving", row: "fleet", side: kcm, metric: "cpu-per-period"}
			}
			if len(d.values(k)) == 0 {
				notes = append(notes, "kcm's CPU at this size is the fleet-10k row's; it did not run here")
			} else {
				notes = append(notes, fmt.Sprintf("kcm at this size (%s job, usage moving): %s CPU-s per period; CPU per replica at %d shards / kcm's: %s",
					k.job, figure(m(k)), sz.shards, figure(ratio(m(at(replicasSide, "cpu-per-period-per-replica")), m(k)))))
			}
			return notes
		},
	}
}
