package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// median is the middle value of xs (the mean of the two middle ones for
// an even count); NaN for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// spread is the smallest and largest of xs; NaN for none.
func spread(xs []float64) (lo, hi float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	return slices.Min(xs), slices.Max(xs)
}

// ratio is a/b; NaN when either is unknown or b is 0.
func ratio(a, b float64) float64 {
	if math.IsNaN(a) || math.IsNaN(b) || b == 0 {
		return math.NaN()
	}
	return a / b
}

// withinBound counts the rounds whose figure is at most its round's
// bound: values and bounds in round order, paired by index (a round with
// either missing is not counted).
func withinBound(values, bounds []float64) (within, rounds int) {
	for i := range min(len(values), len(bounds)) {
		if math.IsNaN(values[i]) || math.IsNaN(bounds[i]) {
			continue
		}
		rounds++
		if values[i] <= bounds[i] {
			within++
		}
	}
	return within, rounds
}

// op is how a ratio is compared with its goal.
type op string

const (
	atLeast op = ">="
	atMost  op = "<="
)

// verdict says whether a ratio meets its goal.
type verdict string

const (
	met     verdict = "met"
	notMet  verdict = "NOT met"
	unknown verdict = "no figure"
	// zeroReference: the reference's figure is 0, e.g. a controller's CPU
	// below the clock tick (10 ms) in the smoke run's tiny windows; no
	// ratio can be formed, and that is not a missing figure.
	zeroReference verdict = "no figure (the reference measured 0)"
)

// judge forms the ratio a/b and compares it with the goal (op, bound).
func judge(a, b float64, o op, bound float64) (float64, verdict) {
	r := ratio(a, b)
	switch {
	case b == 0 && !math.IsNaN(a):
		return r, zeroReference
	case math.IsNaN(r):
		return r, unknown
	case o == atLeast && r >= bound, o == atMost && r <= bound:
		return r, met
	default:
		return r, notMet
	}
}

// figure formats a value with 3 significant digits, or "-" for none.
func figure(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case v == 0:
		return "0"
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	case math.Abs(v) >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

// sideFigures are one controller's per-period medians in a fleet row, and
// the machine it ran on: what bound reads.
type sideFigures struct {
	reconciles, autoscalers float64
	// cpu is the controller's CPU-s; apiserverCPU and etcdCPU theirs in
	// the same window; machine every process's busy CPU-s (0 or NaN: not
	// measured, then the controller, kube-apiserver and etcd together
	// stand for it).
	cpu, apiserverCPU, etcdCPU, machine float64
	requests                            float64
	cores, periodSeconds                float64
	// gap is the longest time in seconds between two reconciles of one
	// object; 0 or NaN: not measured.
	gap float64
	// qps is the controller's client limit (the replicas' together for a
	// sharded side); 0: none known.
	qps float64
	// queue is the largest work queue depth seen in the window (the
	// deepest replica's); 0 or NaN: not measured (kcm before 2026-12-07).
	queue float64
	// workerBusy is the share of the window its workers spent on keys,
	// every replica's together; 0 or NaN: not measured (tidal before
	// 2026-12-06 20:00 UTC, kcm before 2026-12-07).
	workerBusy float64
	// rest are the other processes' CPU-s in the same window (kwok, the
	// workload controllers, the benchmark's process); none or NaN: not
	// measured (runs before they were).
	rest []processCPU
}

// processCPU is one process's CPU-s per period, named for a reader.
type processCPU struct {
	name string
	cpu  float64
}

// restOfMachine says where the machine's busy time other than the
// controller's, kube-apiserver's and etcd's went: each measured process,
// and what none of them accounts for (the kernel, other processes).
func restOfMachine(f sideFigures, machine float64) string {
	parts := []string{}
	left := machine - f.cpu - f.apiserverCPU - f.etcdCPU
	for _, p := range f.rest {
		if math.IsNaN(p.cpu) {
			continue
		}
		parts = append(parts, p.name+" "+figure(p.cpu))
		left -= p.cpu
	}
	if len(parts) == 0 {
		return "the rest kwok, the metrics server and the harness"
	}
	return "the rest: " + strings.Join(parts, ", ") + ", unaccounted " + figure(max(left, 0))
}

// bound names what most likely limited a controller's reconciles per
// period, from its figures: none when it reconciled every object each
// period (by its count and its longest gap: a count that covers the
// objects while the gap is over 1.5 periods counts some twice in a period
// and leaves others out, and then the rest of the figures say why); its own
// CPU when it alone used nearly all the cores; its client's QPS limit when
// its requests reached it (and not far past it: a total well over one
// client's limit comes from several clients, each with a limit of its own,
// as kube-controller-manager's scale, metrics and HPA clients, so it says
// nothing of any one); the machine's CPU when all its cores were nearly
// always busy; its workers when none of those and they were nearly
// always busy, or, where their busy time was not measured, when its queue
// held over queuedShare of the objects at once.
func bound(f sideFigures) string {
	if everyObjectEachPeriod(f) {
		return "not bound: every object reconciled each period"
	}
	prefix := ""
	if reconciledAll(f.reconciles, f.autoscalers) {
		prefix = fmt.Sprintf("not every object each period (the count covers them, but the longest gap between two reconciles of one was %s s, over 1.5 periods): ", figure(f.gap))
	}
	return prefix + limit(f)
}

// queuedShare is the share of the objects waiting in a controller's queue
// at once above which, with neither its client's limit nor the CPU
// reached, its workers are what holds it back.
const queuedShare = 0.05

// limit is bound's reading of a controller that did not reconcile every
// object each period.
func limit(f sideFigures) string {
	capacity := f.cores * f.periodSeconds
	control := f.cpu + f.apiserverCPU + f.etcdCPU
	machine := f.machine
	if math.IsNaN(machine) {
		machine = 0
	}
	switch {
	case f.cpu >= 0.9*capacity:
		return fmt.Sprintf("its own CPU (%s of %s CPU-s per period)", figure(f.cpu), figure(capacity))
	case f.qps > 0 && f.requests >= 0.9*f.qps*f.periodSeconds && f.requests <= 1.1*f.qps*f.periodSeconds:
		return fmt.Sprintf("its client's QPS limit (%s requests per period, limit %s)", figure(f.requests), figure(f.qps*f.periodSeconds))
	case machine >= 0.9*capacity:
		return fmt.Sprintf("the machine's CPU (%s of %s CPU-s per period busy; it %s, kube-apiserver %s, etcd %s; %s)",
			figure(machine), figure(capacity), figure(f.cpu), figure(f.apiserverCPU), figure(f.etcdCPU), restOfMachine(f, machine))
	case machine == 0 && control >= 0.9*capacity:
		return fmt.Sprintf("the machine's CPU (with kube-apiserver and etcd: %s of %s CPU-s per period)", figure(control), figure(capacity))
	case workersMeasured(f) && f.workerBusy >= 0.9:
		// Neither a limit nor the CPU: every worker always had a key,
		// its reconciles waiting on the API server's answers.
		return fmt.Sprintf("its workers (busy %s of the window, its queue up to %s keys deep, with %s of its client's %s requests per period and %s)",
			figure(f.workerBusy), figure(f.queue), figure(f.requests), figure(f.qps*f.periodSeconds), machineBusy(machine, control, capacity))
	case workersMeasured(f) && f.queue >= queuedShare*f.autoscalers:
		// A deep queue with idle workers: keys that came due together
		// (a namespace's autoscalers share its beat), not keys waiting
		// for a worker.
		return fmt.Sprintf("not determined from these figures: not its client's limit, the CPU or its workers (busy %s of the window; its queue up to %s keys deep held keys due together)",
			figure(f.workerBusy), figure(f.queue))
	case !workersMeasured(f) && f.queue >= queuedShare*f.autoscalers:
		// Older runs, without the workers' busy time: read from the queue
		// alone, the keys waited for a worker.
		return fmt.Sprintf("its workers (its queue up to %s keys deep, with %s of its client's %s requests per period and %s)",
			figure(f.queue), figure(f.requests), figure(f.qps*f.periodSeconds), machineBusy(machine, control, capacity))
	default:
		return "not determined from these figures (see its log: queue depth, errors)"
	}
}

// workersMeasured is whether f carries its workers' busy time.
func workersMeasured(f sideFigures) bool { return f.workerBusy > 0 }

// machineBusy says how busy the machine was, or where it was not measured
// (older runs) the controller, kube-apiserver and etcd together.
func machineBusy(machine, control, capacity float64) string {
	if machine == 0 {
		return fmt.Sprintf("it, kube-apiserver and etcd busy %s of %s CPU-s", figure(control), figure(capacity))
	}
	return fmt.Sprintf("the machine busy %s of %s CPU-s", figure(machine), figure(capacity))
}

// ceilingNote says when the 2x goal cannot be met by side: twice kcm's
// reconciles is more than there are objects (f.autoscalers), and side (one
// of tidal's, its figures f) reconciled every one each period.
func ceilingNote(side string, f sideFigures, kcm float64) string {
	if math.IsNaN(kcm) || 2*kcm <= f.autoscalers || !everyObjectEachPeriod(f) {
		return ""
	}
	return fmt.Sprintf("twice kcm's figure is %s objects, more than the %s there are: %s reconciled every object, the most any controller can (%s of the 2x goal)",
		figure(2*kcm), figure(f.autoscalers), side, figure(f.reconciles/(2*kcm)))
}

// everyObjectEachPeriod is whether a side reconciled every object each
// period: by its count, and by its longest gap where that was measured.
func everyObjectEachPeriod(f sideFigures) bool {
	return reconciledAll(f.reconciles, f.autoscalers) && !gapOver(f.gap, f.periodSeconds)
}

// reconciledAll is whether reconciles per period cover every object (1%
// short for the window's edges).
func reconciledAll(reconciles, objects float64) bool { return reconciles >= 0.99*objects }

// gapOver is whether the longest gap between two reconciles of one object
// shows that some were not reconciled every period: over 1.5 periods (a
// queue that keeps up leaves up to about 1.3: the gap is sampled once a
// period, and a reconcile may wait in the queue). Unmeasured (0 or NaN):
// no.
func gapOver(gapSeconds, periodSeconds float64) bool {
	return !math.IsNaN(gapSeconds) && gapSeconds > 1.5*periodSeconds
}
