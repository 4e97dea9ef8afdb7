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
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/metrics/pkg/apis/metrics"
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

type podKey struct{ namespace, name string }

// usage is what the queries found for one pod (by container) or node
// (container "").
type usage map[string]map[corev1.ResourceName]sample

// GetPodMetrics answers for pods, all from one query per resource.
func (p *Provider) GetPodMetrics(pods ...*metav1.PartialObjectMetadata) ([]metrics.PodMetrics, error) {
	l, err := p.PodMetricsListFor("", pods...)
	if err != nil || l == nil {
		return nil, err
	}
	return l.Items, nil
}

// PodMetricsListFor is GetPodMetrics, as a list, for the pods a request
// selected: request names the selection (the selectors of a list, or the
// one pod of a get). The rendered queries and the usage found in their
// results are remembered per request while the pod names and the
// Prometheus results are the same (see memo); the entries are per request,
// not per pod set, so pods coming and going replace them instead of adding
// more. Within a second (the precision of the creationTimestamp it
// stamps), requests with the same pods (by resourceVersion: their labels
// are served), rules and Prometheus results get the same list, which
// nobody may modify: the server keeps its encoding (see encodecache).
func (p *Provider) PodMetricsListFor(request string, pods ...*metav1.PartialObjectMetadata) (*metrics.PodMetricsList, error) {
	if len(pods) == 0 {
		return nil, nil
	}
	rr, err := p.rules()
	if err != nil {
		return nil, err
	}
	namespace := pods[0].Namespace
	names := make([]string, len(pods))
	for i, pod := range pods {
		if pod.Namespace != namespace {
			namespace = ""
		}
		names[i] = pod.Name
	}
	if !slices.IsSorted(names) { // the storage sorts the pods
		slices.Sort(names)
	}
	names = slices.Compact(names)
	joined := strings.Join(names, "\x00")

	ctx, cancel := context.WithTimeout(context.Background(), p.o.Timeout)
	defer cancel()
	var results [2]podResult // cpu, memory
	window, err := p.both(rr, func(res corev1.ResourceName, rule *ruleset.ResourceRule) (string, error) {
		r, err := p.podQuery(ctx, rule, namespace, request, names, joined)
		results[resourceIndex(res)] = r
		return r.query, err
	})
	if err != nil {
		return nil, err
	}
	key := podsKey{rules: rr, namespace: namespace, request: request}
	ver := podsVersion{names: joined, cpu: memo.VectorOf(results[0].vec), memory: memo.VectorOf(results[1].vec)}
	found, _ := p.podUsage.Get(key, ver, func() map[podKey]*podUsage {
		return podUsages(namespace, results)
	})

	now := p.o.Now()
	build := func() builtPodList { return buildPodList(pods, found, window, metav1.NewTime(now)) }
	var built builtPodList
	if objs, ok := podObjects(pods); ok {
		built, _ = p.podLists.Get(key, podListVersion{usage: ver, pods: objs, now: now.Unix()}, build)
	} else {
		built = build()
	}
	// Counted per request, as when every request built its list.
	for i, n := range built.missing {
		if n > 0 {
			p.o.Metrics.ResourceMissing.WithLabelValues("pod", missingLabels[i]).Add(float64(n))
		}
	}
	return built.list, nil
}

// podObjects names pods in order as namespace/name@resourceVersion, so
// that a change of their labels (served) makes another name; ok is false
// when a pod has no resourceVersion to tell.
func podObjects(pods []*metav1.PartialObjectMetadata) (string, bool) {
	var b strings.Builder
	for _, pod := range pods {
		if pod.ResourceVersion == "" {
			return "", false
		}
		b.WriteString(pod.Namespace)
		b.WriteByte('/')
		b.WriteString(pod.Name)
		b.WriteByte('@')
		b.WriteString(pod.ResourceVersion)
		b.WriteByte(',')
	}
	return b.String(), true
}

// podListVersion is what a pods request's list depends on beyond its key.
type podListVersion struct {
	usage podsVersion
	// pods are the pods (see podObjects).
	pods string
	now  int64
}

// builtPodList is a list and how many of its pods lacked a usage (see
// missingLabels).
type builtPodList struct {
	list    *metrics.PodMetricsList
	missing [3]int
}

// missingLabels are the resource label values of ResourceMissing, in
// builtPodList.missing's order.
var missingLabels = [3]string{"all", string(corev1.ResourceCPU), string(corev1.ResourceMemory)}

// buildPodList makes the PodMetrics of pods from the usage found, in the
// pods' order, skipping pods without any.
func buildPodList(pods []*metav1.PartialObjectMetadata, found map[podKey]*podUsage, window time.Duration, now metav1.Time) builtPodList {
	var b builtPodList
	out := make([]metrics.PodMetrics, 0, len(pods))
	for _, pod := range pods {
		u := found[podKey{pod.Namespace, pod.Name}]
		if u == nil {
			b.missing[0]++
			continue
		}
		if !u.has[corev1.ResourceCPU] {
			b.missing[1]++
		}
		if !u.has[corev1.ResourceMemory] {
			b.missing[2]++
		}
		out = append(out, metrics.PodMetrics{
			ObjectMeta: metav1.ObjectMeta{
				Name:              pod.Name,
				Namespace:         pod.Namespace,
				Labels:            pod.Labels,
				CreationTimestamp: now,
			},
			Timestamp:  u.timestamp,
			Window:     metav1.Duration{Duration: window},
			Containers: u.containers,
		})
	}
	b.list = &metrics.PodMetricsList{Items: out}
	return b
}

// podsKey and podsVersion are what the usage of a pods request depends
// on.
type podsKey struct {
	rules     *ruleset.ResourceRules
	namespace string
	request   string
}

type podsVersion struct {
	names       string
	cpu, memory memo.Vector
}

// podUsage is a pod's served usage; its containers are shared by every
// response built from the same results: read-only.
type podUsage struct {
	timestamp  metav1.Time
	has        map[corev1.ResourceName]bool
	containers []metrics.ContainerMetrics
}

// podResult is a containerQuery as rendered and its result.
type podResult struct {
	podQueryRendered
	vec model.Vector
}

func resourceIndex(res corev1.ResourceName) int {
	if res == corev1.ResourceMemory {
		return 1
	}
	return 0
}

// podUsages turns the cpu and memory results into each pod's usage.
func podUsages(namespace string, results [2]podResult) map[podKey]*podUsage {
	found := map[podKey]usage{}
	for i, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		for k, byContainer := range results[i].samples(namespace) {
			u := found[k]
			if u == nil {
				u = usage{}
				found[k] = u
			}
			for c, s := range byContainer {
				if u[c] == nil {
					u[c] = map[corev1.ResourceName]sample{}
				}
				u[c][res] = s
			}
		}
	}
	out := make(map[podKey]*podUsage, len(found))
	for k, u := range found {
		if len(u) == 0 {
			continue
		}
		ts, has := u.earliest()
		pu := &podUsage{timestamp: metav1.NewTime(ts.Time()), has: has}
		containers := make([]string, 0, len(u))
		for c := range u {
			containers = append(containers, c)
		}
		sort.Strings(containers)
		for _, c := range containers {
			pu.containers = append(pu.containers, metrics.ContainerMetrics{Name: c, Usage: resourceList(u[c])})
		}
		out[k] = pu
	}
	return out
}

// GetNodeMetrics answers for nodes, all from one query per resource.
func (p *Provider) GetNodeMetrics(nodes ...*corev1.Node) ([]metrics.NodeMetrics, error) {
	if len(nodes) == 0 {
		return nil, nil
	}
	rr, err := p.rules()
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(nodes))
	seen := map[string]bool{}
	for _, n := range nodes {
		if !seen[n.Name] {
			seen[n.Name] = true
			names = append(names, n.Name)
		}
	}
	sort.Strings(names)

	ctx, cancel := context.WithTimeout(context.Background(), p.o.Timeout)
	defer cancel()
	found := map[string]map[corev1.ResourceName]sample{}
	var mu sync.Mutex
	window, err := p.both(rr, func(res corev1.ResourceName, rule *ruleset.ResourceRule) (string, error) {
		got, query, err := p.nodeQuery(ctx, rule, names)
		if err != nil {
			return query, err
		}
		mu.Lock()
		defer mu.Unlock()
		for n, s := range got {
			if found[n] == nil {
				found[n] = map[corev1.ResourceName]sample{}
			}
			found[n][res] = s
		}
		return query, nil
	})
	if err != nil {
		return nil, err
	}

	now := metav1.NewTime(p.o.Now())
	out := make([]metrics.NodeMetrics, 0, len(nodes))
	for _, n := range nodes {
		u := found[n.Name]
		if len(u) == 0 {
			p.o.Metrics.ResourceMissing.WithLabelValues("node", "all").Inc()
			continue
		}
		ts, has := usage{"": u}.earliest()
		for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if !has[res] {
				p.o.Metrics.ResourceMissing.WithLabelValues("node", string(res)).Inc()
			}
		}
		out = append(out, metrics.NodeMetrics{
			ObjectMeta: metav1.ObjectMeta{
				Name:              n.Name,
				Labels:            n.Labels,
				CreationTimestamp: now,
			},
			Timestamp: metav1.NewTime(ts.Time()),
			Window:    metav1.Duration{Duration: window},
			Usage:     resourceList(u),
		})
	}
	return out, nil
}

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

// podQueryRendered is a containerQuery as rendered for some pods, with
// the labels its result is read by, or the rendering error.
type podQueryRendered struct {
	query, podLabel, nsLabel, containerLabel string
	err                                      error
}

// podQueryKey is what a rendered containerQuery depends on besides the
// pod names (its version).
type podQueryKey struct {
	rule      *ruleset.ResourceRule
	namespace string
	request   string
}

// podQuery renders (or recalls) and runs rule's containerQuery for the
// named pods (in namespace, or in any namespace when it is ""); joined is
// names joined by NUL.
func (p *Provider) podQuery(ctx context.Context, rule *ruleset.ResourceRule, namespace, request string, names []string, joined string) (podResult, error) {
	r, _ := p.podQueries.Get(podQueryKey{rule: rule, namespace: namespace, request: request}, joined, func() podQueryRendered {
		return renderPodQuery(rule, namespace, names)
	})
	if r.err != nil {
		return podResult{podQueryRendered: r}, r.err
	}
	vec, err := p.query(ctx, rule, "containerQuery", r.query)
	if err != nil {
		return podResult{podQueryRendered: r}, err
	}
	return podResult{podQueryRendered: r, vec: vec}, nil
}

func renderPodQuery(rule *ruleset.ResourceRule, namespace string, names []string) podQueryRendered {
	podLabel, err := rule.Resources.LabelFor(podsGR)
	if err != nil {
		return podQueryRendered{err: fmt.Errorf("%s: %w", rule.ID, err)}
	}
	nsLabel, err := rule.Resources.LabelFor(namespacesGR)
	if err != nil {
		return podQueryRendered{err: fmt.Errorf("%s: %w", rule.ID, err)}
	}
	groupBy := []string{rule.ContainerLabel}
	if nsLabel != rule.ContainerLabel && nsLabel != podLabel {
		groupBy = append(groupBy, nsLabel)
	}
	query, err := rule.Container.Objects(promql.ObjectRequest{
		Resource:     podsGR,
		Namespace:    namespace,
		Names:        names,
		ExtraGroupBy: groupBy,
	})
	if err != nil {
		return podQueryRendered{err: fmt.Errorf("%s.containerQuery: %w", rule.ID, err)}
	}
	return podQueryRendered{query: query, podLabel: podLabel, nsLabel: nsLabel, containerLabel: rule.ContainerLabel}
}

// samples reads a containerQuery result: per pod, per container.
func (r podResult) samples(namespace string) map[podKey]map[string]sample {
	out := map[podKey]map[string]sample{}
	for _, s := range r.vec {
		c := string(s.Metric[model.LabelName(r.containerLabel)])
		if c == "" || c == PauseContainer || !usable(float64(s.Value)) {
			continue
		}
		k := podKey{namespace: string(s.Metric[model.LabelName(r.nsLabel)]), name: string(s.Metric[model.LabelName(r.podLabel)])}
		if k.namespace == "" {
			k.namespace = namespace
		}
		if k.name == "" || k.namespace == "" {
			continue
		}
		if out[k] == nil {
			out[k] = map[string]sample{}
		}
		out[k][c] = add(out[k][c], s)
	}
	return out
}

// nodeQuery renders and runs rule's nodeQuery for the named nodes.
func (p *Provider) nodeQuery(ctx context.Context, rule *ruleset.ResourceRule, names []string) (map[string]sample, string, error) {
	nodeLabel, err := rule.Resources.LabelFor(nodesGR)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", rule.ID, err)
	}
	query, err := rule.Node.Objects(promql.ObjectRequest{Resource: nodesGR, Names: names})
	if err != nil {
		return nil, "", fmt.Errorf("%s.nodeQuery: %w", rule.ID, err)
	}
	vec, err := p.query(ctx, rule, "nodeQuery", query)
	if err != nil {
		return nil, query, err
	}
	out := map[string]sample{}
	for _, s := range vec {
		n := string(s.Metric[model.LabelName(nodeLabel)])
		if n == "" || !usable(float64(s.Value)) {
			continue
		}
		out[n] = add(out[n], s)
	}
	return out, query, nil
}

func (p *Provider) query(ctx context.Context, rule *ruleset.ResourceRule, which, query string) (model.Vector, error) {
	id := rule.ID + "." + which
	backend := rule.Client.Name()
	began := time.Now()
	vec, err := rule.Client.Query(ctx, query, time.Time{})
	p.o.Metrics.QueryDuration.WithLabelValues(backend, id).Observe(time.Since(began).Seconds())
	if err != nil {
		p.o.Metrics.QueryErrors.WithLabelValues(backend, id, prom.Reason(err)).Inc()
		return nil, fmt.Errorf("%s: %w (query: %s)", id, err, query)
	}
	return vec, nil
}

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
