// Package resourcemetrics serves metrics.k8s.io v1beta1 (PodMetrics and
// NodeMetrics: what `kubectl top` and the HPA's Resource and
// ContainerResource metrics read) from the rule file's resourceRules.
//
// The API storage (get, list, namespaced list, label and field selectors,
// tables for `kubectl get podmetrics`) behaves as metrics-server's
// sigs.k8s.io/metrics-server/pkg/api, whose types and API group it uses;
// it is this package's own only so that errors keep their status (see
// storage.go). This package is its MetricsGetter, backed by Prometheus,
// and the listers it reads pods and nodes from (the adapter's metadata
// watch caches: no LIST per request).
//
// What a request gets:
//   - at most two PromQL queries, cpu and memory, rendered from the
//     containerQuery (pods) or nodeQuery (nodes) with the rules/promql
//     escaping: the namespace (when every pod is in one) and the pod or
//     node names as label matchers, grouped by the pod label, the
//     container label and the namespace label (pods) or the node label;
//   - per-container usage; samples whose container label is empty (the
//     pod's own cgroup) or "POD" (the pause container) are ignored, and
//     several samples for one container are summed;
//   - cpu in nanocores and memory in bytes, as metrics-server reports
//     them, rounded to the nearest unit (half away from zero), not
//     truncated;
//   - a pod (node) with samples for only one of cpu and memory is served
//     with that resource only: the other is absent from its usage, never 0.
//     The HPA then treats the pod as missing for the absent resource only
//     (its metrics client skips pods whose containers lack the resource),
//     and `kubectl top` shows 0 for it. A container with samples for only
//     one resource is served the same way. A pod or node with no sample at
//     all is left out (a get answers 404), as in metrics-server;
//   - NaN, infinite and negative samples count as missing;
//   - the timestamp is the earliest sample's (Prometheus' evaluation time),
//     never the adapter's clock; the window is resourceRules.window, else
//     the range of the cpu query (rate(x[3m]) -> 3m), else 1m;
//   - Prometheus unreachable, 5xx, 401/403 or too slow fails the request
//     with 503 ServiceUnavailable naming the backend; a query Prometheus
//     rejects, or the rule file losing its resourceRules after a reload,
//     with 500 and the reason.
package resourcemetrics

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	msapi "sigs.k8s.io/metrics-server/pkg/api"

	"github.com/tidal-autoscaler/tidal/adapter/internal/memo"
	"github.com/tidal-autoscaler/tidal/adapter/internal/quantity"
	"github.com/tidal-autoscaler/tidal/adapter/monitor"
	"github.com/tidal-autoscaler/tidal/adapter/prom"
	"github.com/tidal-autoscaler/tidal/adapter/ruleset"
	"github.com/tidal-autoscaler/tidal/rules/promql"
)

// PauseContainer is the container name cAdvisor (dockershim era) gives the
// pod sandbox; it is never reported as a container.
const PauseContainer = "POD"

// DefaultWindow is the window reported when neither resourceRules.window
// nor the cpu query's range says one.
const DefaultWindow = time.Minute

var (
	podsGR       = schema.GroupResource{Resource: "pods"}
	nodesGR      = schema.GroupResource{Resource: "nodes"}
	namespacesGR = schema.GroupResource{Resource: "namespaces"}
)

// Options are what a Provider needs.
type Options struct {
	// Rules returns the rules in force (the reloader's current Set).
	Rules func() *ruleset.Set
	// Timeout bounds one request's queries: metrics-server's storage
	// passes no request context to the getter. 0 means 30s.
	Timeout time.Duration
	Metrics *monitor.Metrics
	// Now stamps the objects' creationTimestamp, as metrics-server does;
	// nil means time.Now.
	Now func() time.Time
}

// Provider is metrics-server's MetricsGetter, answered from Prometheus.
type Provider struct {
	o       Options
	windows sync.Map // *ruleset.ResourceRule -> time.Duration
	// podQueries and podUsage remember pods requests (see GetPodMetrics).
	podQueries *memo.Table[podQueryKey, string, podQueryRendered]
	podUsage   *memo.Table[podsKey, podsVersion, map[podKey]*podUsage]
	podLists   *memo.Table[podsKey, podListVersion, builtPodList]
}

// memoSize bounds the remembered queries and usages (see memo.Table): an
// entry per distinct request.
const memoSize = 1024

var _ msapi.MetricsGetter = (*Provider)(nil)

// New returns a Provider.
func New(o Options) *Provider {
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Metrics == nil {
		o.Metrics = monitor.New()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Provider{
		o:          o,
		podQueries: memo.New[podQueryKey, string, podQueryRendered](memoSize),
		podUsage:   memo.New[podsKey, podsVersion, map[podKey]*podUsage](memoSize),
		podLists:   memo.New[podsKey, podListVersion, builtPodList](memoSize),
	}
}

// ErrNoResourceRules is returned when the rules in force have no
// resourceRules (a reload removed them).
var ErrNoResourceRules = errors.New("the rule file in force has no resourceRules, so metrics.k8s.io has nothing to serve")

func (p *Provider) rules() (*ruleset.ResourceRules, error) {
	if p.o.Rules == nil {
		return nil, ErrNoResourceRules
	}
	set := p.o.Rules()
	if set == nil || set.Resource == nil {
		return nil, ErrNoResourceRules
	}
	return set.Resource, nil
}

// sample is one resource's usage of a container or node.
type sample struct {
	value float64
	ts    model.Time
}

// usage is what the queries found for one pod (by container) or node
// (container "").
type usage map[string]map[corev1.ResourceName]sample

// both runs the cpu and memory queries concurrently and returns the
// window to report.
func (p *Provider) both(rr *ruleset.ResourceRules, run func(corev1.ResourceName, *ruleset.ResourceRule) (string, error)) (time.Duration, error) {
	var wg sync.WaitGroup
	var cpuQuery string
	var errs [2]error
	wg.Add(2)
	go func() {
		defer wg.Done()
		cpuQuery, errs[0] = run(corev1.ResourceCPU, rr.CPU)
	}()
	go func() {
		defer wg.Done()
		_, errs[1] = run(corev1.ResourceMemory, rr.Memory)
	}()
	wg.Wait()
	if err := errors.Join(errs[0], errs[1]); err != nil {
		return 0, err
	}
	return p.window(rr, cpuQuery), nil
}

func (p *Provider) window(rr *ruleset.ResourceRules, cpuQuery string) time.Duration {
	if rr.Window > 0 {
		return rr.Window
	}
	if w, ok := p.windows.Load(rr.CPU); ok {
		return w.(time.Duration)
	}
	w := promql.Window(cpuQuery)
	if w <= 0 {
		w = DefaultWindow
	}
	p.windows.Store(rr.CPU, w)
	return w
}

func (p *Provider) query(ctx context.Context, rule *ruleset.ResourceRule, which, query string) (model.Vector, error) {
	id := rule.ID + "." + which
	backend := rule.Client.Name()
	began := time.Now()
	vec, err := rule.Client.Query(ctx, query, time.Time{})
	p.o.Metrics.QueryDuration.WithLabelValues(backend, id).Observe(time.Since(began).Seconds())
	if err != nil {
		p.o.Metrics.QueryErrors.WithLabelValues(backend, id, prom.Reason(err)).Inc()
		klog.FromContext(ctx).Error(err, "Prometheus query failed", "rule", id, "query", query)
		return nil, &queryError{id: id, err: err}
	}
	return vec, nil
}

// queryError is a failed query as a client may see it: the rule and
// prom.Public's account, not the query or Prometheus's message, which may
// quote it (both are logged). errors.Is sees the prom error's kind.
type queryError struct {
	id  string
	err error
}

func (e *queryError) Error() string { return e.id + ": " + prom.Public(e.err) }
func (e *queryError) Unwrap() error { return e.err }

// usable says whether v can be a usage.
func usable(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 }

// add sums samples of one container (or node), keeping the earliest time.
func add(acc sample, s *model.Sample) sample {
	if acc.ts == 0 || s.Timestamp < acc.ts {
		acc.ts = s.Timestamp
	}
	acc.value += float64(s.Value)
	return acc
}

// earliest returns the earliest sample time and which resources have a
// sample.
func (u usage) earliest() (model.Time, map[corev1.ResourceName]bool) {
	var ts model.Time
	has := map[corev1.ResourceName]bool{}
	for _, byRes := range u {
		for res, s := range byRes {
			has[res] = true
			if ts == 0 || s.ts < ts {
				ts = s.ts
			}
		}
	}
	return ts, has
}

func resourceList(byRes map[corev1.ResourceName]sample) corev1.ResourceList {
	out := corev1.ResourceList{}
	if s, ok := byRes[corev1.ResourceCPU]; ok {
		if q, ok := CPU(s.value); ok {
			_ = q.String() // kept in q: every response serializes it
			out[corev1.ResourceCPU] = q
		}
	}
	if s, ok := byRes[corev1.ResourceMemory]; ok {
		if q, ok := Memory(s.value); ok {
			_ = q.String()
			out[corev1.ResourceMemory] = q
		}
	}
	return out
}

// maxInt is the largest magnitude a quantity is built from (below 2^63).
const maxInt = 1 << 62

// CPU converts cores to a quantity with nanocore precision, as
// metrics-server reports it, by the conversion every API of the adapter
// uses (quantity.FromFloat): rounded half away from zero (0.0000000015 ->
// 2n; 1.0005 -> 1000500u, which the HPA reads as 1001m). It is false for
// values no usage can have (NaN, infinite, negative).
func CPU(cores float64) (resource.Quantity, bool) {
	if !usable(cores) {
		return resource.Quantity{}, false
	}
	q, err := quantity.FromFloat(cores)
	return q, err == nil
}

// Memory converts bytes to a quantity in whole bytes (BinarySI, as
// metrics-server reports it), rounded half away from zero: a fraction of
// a byte is no usage (working-set bytes are integers), so memory keeps the
// unit and format `kubectl top` and metrics-server clients expect.
func Memory(bytes float64) (resource.Quantity, bool) {
	b := math.Round(bytes)
	if !usable(bytes) || b >= maxInt {
		return resource.Quantity{}, false
	}
	return *resource.NewQuantity(int64(b), resource.BinarySI), true
}
