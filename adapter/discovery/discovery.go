// Package discovery finds which metrics the rules serve: every relist
// interval it runs each rule's seriesQuery against the rule's backend, in
// parallel, and maps the series found to custom and external metrics.
//
// Only the distinct (series name, label names) pairs are kept, never the
// label sets, so memory grows with the number of metric names, not with
// the number of series. A failing query keeps that query's last good
// result; it never blanks the other rules. After a query failed, its
// answers add to its last good result instead of replacing it until its
// window lies wholly after the backend came back (see recoveryHold).
package discovery

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	"github.com/tidal-autoscaler/tidal/adapter/monitor"
	"github.com/tidal-autoscaler/tidal/adapter/prom"
	"github.com/tidal-autoscaler/tidal/adapter/ruleset"
)

// Options configure a Discoverer.
type Options struct {
	// Interval between discovery passes (--metrics-relist-interval).
	Interval time.Duration
	// MaxAge is how far back series are looked for (--metrics-max-age).
	MaxAge time.Duration
	// Parallelism bounds concurrent series queries (default 4).
	Parallelism int
	Metrics     *monitor.Metrics
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Discoverer keeps the latest Snapshot of discovered metrics.
type Discoverer struct {
	o     Options
	rules atomic.Pointer[ruleset.Set]
	snap  atomic.Pointer[Snapshot]
	ready atomic.Bool
	// passed is set once a pass has ended, whatever its outcome.
	passed atomic.Bool
	// created is when New ran, for HealthChecker's grace.
	created time.Time
	// pending is what Pending reports, set at the end of each pass.
	pending atomic.Pointer[Pending]
	kick    chan struct{}

	mu sync.Mutex
	// results holds the last good shapes per (backend, seriesQuery).
	results map[queryKey][]prom.Shape
	// failing holds the queries whose last pass failed; back, when the
	// queries that failed answered again, while recoveryHold lasts.
	failing map[queryKey]bool
	back    map[queryKey]time.Time
}

type queryKey struct {
	backend prom.Client
	query   string
}

// groupQueries lists each distinct (backend, seriesQuery) once, in rule
// order, with the IDs of the rules that share it: one query serves them all.
func groupQueries(set *ruleset.Set) (keys []queryKey, owners map[queryKey][]string) {
	owners = map[queryKey][]string{}
	for _, r := range set.Rules() {
		k := queryKey{r.Client, r.SeriesQuery}
		if _, ok := owners[k]; !ok {
			keys = append(keys, k)
		}
		owners[k] = append(owners[k], r.ID)
	}
	return keys, owners
}

// New returns a Discoverer with no rules and an empty snapshot.
func New(o Options) *Discoverer {
	if o.Parallelism <= 0 {
		o.Parallelism = 4
	}
	if o.Metrics == nil {
		o.Metrics = monitor.New()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxAge <= 0 {
		o.MaxAge = o.Interval
	}
	d := &Discoverer{o: o, kick: make(chan struct{}, 1), results: map[queryKey][]prom.Shape{},
		failing: map[queryKey]bool{}, back: map[queryKey]time.Time{}, created: o.Now()}
	d.pending.Store(&Pending{})
	d.rules.Store(ruleset.Empty())
	d.snap.Store(emptySnapshot())
	return d
}

// SetRules replaces the rules. The next pass starts at once; until it ends
// the metrics of the previous rules are mapped with the new rules from the
// results already known.
func (d *Discoverer) SetRules(s *ruleset.Set) {
	d.rules.Store(s)
	d.mu.Lock()
	d.snap.Store(build(s, d.results))
	d.mu.Unlock()
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// Snapshot returns the metrics found by the latest pass.
func (d *Discoverer) Snapshot() *Snapshot { return d.snap.Load() }

// Run discovers at once, then every Interval and after each SetRules,
// until ctx ends.
func (d *Discoverer) Run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-d.kick:
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
		}
		d.RunOnce(ctx)
		t.Reset(d.o.Interval)
	}
}

// RunOnce runs one discovery pass over the current rules and installs the
// new snapshot. It returns the errors of the queries that failed.
func (d *Discoverer) RunOnce(ctx context.Context) error {
	set := d.rules.Load()
	end := d.o.Now()
	start := end.Add(-d.o.MaxAge)

	keys, owners := groupQueries(set)

	type outcome struct {
		key    queryKey
		shapes []prom.Shape
		err    error
	}
	out := make(chan outcome, len(keys))
	sem := make(chan struct{}, d.o.Parallelism)
	var wg sync.WaitGroup
	for _, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			began := time.Now()
			shapes, err := k.backend.Series(ctx, []string{k.query}, start, end)
			result := "success"
			if err != nil {
				result = "error"
			}
			for _, id := range owners[k] {
				d.o.Metrics.DiscoveryDuration.WithLabelValues(id, result).Observe(time.Since(began).Seconds())
				if err != nil {
					d.o.Metrics.DiscoveryErrors.WithLabelValues(id).Inc()
				}
			}
			out <- outcome{k, shapes, err}
		}()
	}
	wg.Wait()
	close(out)

	var errs []error
	succeeded := 0
	d.mu.Lock()
	defer d.mu.Unlock()
	fresh := make(map[queryKey][]prom.Shape, len(keys))
	for o := range out {
		if o.err != nil {
			errs = append(errs, fmt.Errorf("discovery for %v (seriesQuery %q): %w", owners[o.key], o.key.query, o.err))
			klog.ErrorS(o.err, "Discovery query failed; keeping its last good result", "rules", owners[o.key], "seriesQuery", o.key.query, "backend", o.key.backend.Name())
			if last, ok := d.results[o.key]; ok {
				fresh[o.key] = last
			}
			d.failing[o.key] = true
			delete(d.back, o.key)
			continue
		}
		succeeded++
		fresh[o.key] = d.recovered(o.key, o.shapes, end)
	}
	// Results of queries no rule runs any more are dropped here.
	d.results = fresh
	for k := range d.failing {
		if _, ok := fresh[k]; !ok {
			delete(d.failing, k)
		}
	}
	for k := range d.back {
		if _, ok := fresh[k]; !ok {
			delete(d.back, k)
		}
	}
	// A reload may have happened while querying: map with the newest rules.
	snap := build(d.rules.Load(), d.results)
	d.snap.Store(snap)
	d.o.Metrics.DiscoveredMetrics.WithLabelValues("custom").Set(float64(len(snap.customList)))
	d.o.Metrics.DiscoveredMetrics.WithLabelValues("external").Set(float64(len(snap.externalList)))
	d.o.Metrics.DiscoveryLastRun.SetToCurrentTime()
	if len(keys) == 0 || succeeded > 0 {
		d.ready.Store(true)
	}
	// Rules of the current set whose query has never answered: their
	// metrics are unknown, not absent.
	pending := &Pending{}
	backends := map[string]bool{}
	for _, k := range keys {
		if _, ok := d.results[k]; ok {
			continue
		}
		pending.Rules = append(pending.Rules, owners[k]...)
		if !backends[k.backend.Name()] {
			backends[k.backend.Name()] = true
			pending.Backends = append(pending.Backends, k.backend.Name())
		}
	}
	d.pending.Store(pending)
	d.passed.Store(true)
	return errors.Join(errs...)
}

// recoveryHold is how long after a failing query answered again its
// answers only add to its last good result: until its series window
// (MaxAge) lies wholly after that answer, plus one relist interval. A
// backend that was down has no samples for the time it was down, and a
// Prometheus that has just started is ready a few seconds before its first
// scrape (it applies its targets on a 5s tick), so meanwhile a window of
// a few seconds finds no series of the targets it scraped before. Without
// the hold one such answer drops every metric of the rule until the next
// relist, as if its series were gone.
func (d *Discoverer) recoveryHold() time.Duration { return d.o.MaxAge + d.o.Interval }

// recovered returns what a successful answer for k at end leaves as its
// result: the answer itself, or, while k is recovering from a failure, the
// answer plus the shapes of the last good result it lacks. d.mu is held.
func (d *Discoverer) recovered(k queryKey, shapes []prom.Shape, end time.Time) []prom.Shape {
	if d.failing[k] {
		delete(d.failing, k)
		d.back[k] = end
	}
	at, ok := d.back[k]
	if !ok {
		return shapes
	}
	if end.Sub(at) >= d.recoveryHold() {
		delete(d.back, k)
		return shapes
	}
	seen := make(map[string]bool, len(shapes))
	for _, sh := range shapes {
		seen[shapeKey(sh)] = true
	}
	merged := shapes
	for _, sh := range d.results[k] {
		if !seen[shapeKey(sh)] {
			merged = append(merged[:len(merged):len(merged)], sh)
		}
	}
	if kept := len(merged) - len(shapes); kept > 0 {
		klog.InfoS("Discovery query answered again after failing; keeping the series its answer lacks until its window lies after the recovery",
			"seriesQuery", k.query, "backend", k.backend.Name(), "answered", len(shapes), "kept", kept, "until", at.Add(d.recoveryHold()))
	}
	return merged
}

// shapeKey identifies a shape: its series name and label names.
func shapeKey(sh prom.Shape) string {
	return sh.Name + "\x00" + strings.Join(sh.Labels, "\x00")
}

// Pending is the discovery state the provider reports when asked for a
// metric it does not know: the rules whose discovery query has not
// answered since the adapter started (or since they were loaded), and the
// Prometheus backends they query. Empty once every query answered once.
type Pending struct {
	// Rules are rule IDs, in rule order.
	Rules []string
	// Backends are the backends' names (prom.Client.Name), each once.
	Backends []string
}

// Pending returns the rules whose metrics are not known yet because their
// discovery query has never answered. Before the first pass it is empty:
// Passed tells the two apart.
func (d *Discoverer) Pending() Pending { return *d.pending.Load() }

// Passed reports whether a discovery pass has ended, successful or not.
func (d *Discoverer) Passed() bool { return d.passed.Load() }

// Ready reports whether a discovery pass has succeeded for at least one
// query (or there was nothing to discover). It never becomes false again:
// later failures keep the last good results.
func (d *Discoverer) Ready() bool { return d.ready.Load() }

// HealthChecker is a readyz check (k8s.io/apiserver healthz.HealthChecker)
// that fails until the first discovery pass has ended, successful or not,
// or Grace has passed since the Discoverer was made, whichever is first.
//
// It does not wait for Prometheus: an adapter whose Prometheus is down at
// start becomes ready and serves what it knows (metrics.k8s.io, the
// delegate's metrics, the metrics of backends that answer); the metrics it
// cannot know yet answer 503 naming the backend (Pending), instead of the
// APIServices of every metrics API going Unavailable cluster-wide. The wait
// for the first pass keeps a normal start from serving an empty discovery
// for the moment the first series queries take; Grace (the chart passes
// --prometheus-timeout) bounds it when Prometheus accepts but never answers.
type HealthChecker struct {
	D     *Discoverer
	Grace time.Duration
}

// Name implements healthz.HealthChecker.
func (HealthChecker) Name() string { return "metric-discovery" }

// Check implements healthz.HealthChecker.
func (c HealthChecker) Check(*http.Request) error {
	if c.D.Ready() || c.D.Passed() || c.D.o.Now().Sub(c.D.created) >= c.Grace {
		return nil
	}
	return fmt.Errorf("the first metric discovery has not ended (waiting at most %s)", c.Grace)
}
