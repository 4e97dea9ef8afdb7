// Package provider answers custom.metrics.k8s.io and external.metrics.k8s.io
// requests from Prometheus, through the rules and the metrics discovery
// found.
//
// What a request gets:
//   - an unknown metric, or a metric not served for that resource: 404
//     NotFound naming the metric;
//   - a request without a namespace for a namespaced resource
//     (`/apis/custom.metrics.k8s.io/v1beta2/pods/*/m`): 404 NotFound
//     saying the request needs a namespace, as prometheus-adapter answers;
//   - one named object that does not exist (per the adapter's watch
//     caches): 404 NotFound naming the object, even if Prometheus still has
//     series for it;
//   - one named object with no value: 404 NotFound naming the metric and
//     the object;
//   - a wildcard or label selector (`pods/*`, any resource) matching no
//     object, or objects without values: 200 with an empty list (`"items":
//     []`, never null), as Kubernetes lists are; the HPA controller turns
//     an empty list and a 404 into the same error ("no metrics returned
//     from custom metrics API"), and other clients get a well-formed list.
//     An external metric with no sample is an empty list too;
//   - values with the precision Prometheus returned, rounded to
//     nano-units (quantity.FromFloat: 0.3125 is 312500u, not 313m), with
//     the sample's timestamp and, when the query has one range,
//     windowSeconds;
//   - a NaN or infinite value is no sample, everywhere: in a list (custom
//     or external) its item is left out, so a list left with nothing is an
//     empty list, and a single object whose value is NaN answers 404
//     NotFound naming the metric and the object, never 500 (a data
//     condition, such as a rate of a counter with no requests divided by
//     another, is not a server error). The HPA treats such objects as
//     missing, as it does pods without metrics; each value left out is
//     counted in tidal_adapter_query_errors_total{reason="bad_value"} and
//     logged at -v=2;
//   - Prometheus unreachable or too slow: 503 ServiceUnavailable naming
//     the backend; a query Prometheus rejects: 500 naming the metric, the
//     rule and the backend. Neither carries the query or Prometheus's
//     message (which may quote it): any client that may read a metric
//     would see them. Both are logged with the request;
//   - a metric selector Prometheus cannot express: 400 BadRequest.
package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/model"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/klog/v2"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	"k8s.io/metrics/pkg/apis/external_metrics"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/tidal-autoscaler/tidal/adapter/discovery"
	"github.com/tidal-autoscaler/tidal/adapter/internal/memo"
	"github.com/tidal-autoscaler/tidal/adapter/internal/quantity"
	"github.com/tidal-autoscaler/tidal/adapter/monitor"
	"github.com/tidal-autoscaler/tidal/adapter/objects"
	"github.com/tidal-autoscaler/tidal/adapter/prom"
	"github.com/tidal-autoscaler/tidal/adapter/ruleset"
	"github.com/tidal-autoscaler/tidal/rules/promql"
)

// Snapshotter gives the current discovered metrics; *discovery.Discoverer
// is one.
type Snapshotter interface {
	Snapshot() *discovery.Snapshot
}

// pendingReporter is implemented by *discovery.Discoverer: the rules whose
// discovery query has not answered yet.
type pendingReporter interface {
	Pending() discovery.Pending
}

// unknown is the error for a metric the snapshot does not have: 503 naming
// the Prometheus backends while some rule's discovery has never answered
// (the metric may well exist; the adapter serves what it knows and says
// so), else notFound.
func (p *Provider) unknown(kind, metric string, notFound error) error {
	r, ok := p.o.Discovery.(pendingReporter)
	if !ok {
		return notFound
	}
	pending := r.Pending()
	if len(pending.Rules) == 0 {
		return notFound
	}
	return apierrors.NewServiceUnavailable(fmt.Sprintf(
		"the %s metric %q is not known yet: metric discovery has not had an answer from Prometheus (backend %s) for rules %s since they were loaded; the adapter keeps trying",
		kind, metric, strings.Join(pending.Backends, ", "), strings.Join(pending.Rules, ", ")))
}

// Options are what a Provider needs.
type Options struct {
	Discovery Snapshotter
	// Mapper normalises resources ("pod", "pods.") and gives kinds.
	Mapper meta.RESTMapper
	// Objects says which objects exist.
	Objects objects.Lister
	Metrics *monitor.Metrics
	// Now is the clock of the resolved-resource cache; nil means time.Now.
	Now func() time.Time
	// Shared, when set, is told of each list GetMetricBySelector returns:
	// the same list goes to every request with the same objects and
	// Prometheus result, and nobody may modify it (the server keeps its
	// encoding, see encodecache).
	Shared func(*custom_metrics.MetricValueList)
}

// Provider serves custom and external metrics.
type Provider struct {
	o       Options
	windows windows
	// queries and items remember objects requests (see objectMetrics).
	queries *memo.Table[objectsKey, string, rendered]
	items   *memo.Table[objectsKey, objectsResult, converted]
	targets targets
	scopes  scopes
}

var (
	_ cmprovider.CustomMetricsProvider   = (*Provider)(nil)
	_ cmprovider.ExternalMetricsProvider = (*Provider)(nil)
)

// New returns a Provider.
func New(o Options) *Provider {
	if o.Metrics == nil {
		o.Metrics = monitor.New()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Provider{
		o:       o,
		queries: memo.New[objectsKey, string, rendered](memoSize),
		items:   memo.New[objectsKey, objectsResult, converted](memoSize),
	}
}

// target is a resolved custom-metrics request.
type target struct {
	binding   discovery.Binding
	gvr       schema.GroupVersionResource
	kind      schema.GroupVersionKind
	clustered bool
}

// targets remembers what resolve found, per discovery snapshot, for
// targetTTL: the mapper's lookups scan every API resource the cluster
// serves, and were 9% of the CPU of a pods/* request. The TTL bounds how
// long a change of the cluster's APIs (a custom resource's new preferred
// version) takes to be seen, as the mapper's own discovery cache does.
type targets struct {
	mu   sync.Mutex
	snap *discovery.Snapshot
	m    map[targetKey]targetEntry
}

type targetKey struct {
	gr     schema.GroupResource
	metric string
}

type targetEntry struct {
	t     target
	until time.Time
}

const targetTTL = 10 * time.Second

// resolve finds the rule serving info and the resource's version, kind
// and scope.
func (p *Provider) resolve(info cmprovider.CustomMetricInfo) (target, error) {
	snap := p.o.Discovery.Snapshot()
	now := p.o.Now()
	key := targetKey{info.GroupResource, info.Metric}
	p.targets.mu.Lock()
	if p.targets.snap != snap {
		p.targets.snap, p.targets.m = snap, map[targetKey]targetEntry{}
	}
	e, ok := p.targets.m[key]
	p.targets.mu.Unlock()
	if ok && now.Before(e.until) {
		return e.t, nil
	}
	t, err := p.lookup(snap, info)
	if err != nil {
		return t, err
	}
	p.targets.mu.Lock()
	if p.targets.snap == snap {
		p.targets.m[key] = targetEntry{t: t, until: now.Add(targetTTL)}
	}
	p.targets.mu.Unlock()
	return t, nil
}

// lookup is resolve without the cache.
func (p *Provider) lookup(snap *discovery.Snapshot, info cmprovider.CustomMetricInfo) (target, error) {
	notFound := cmprovider.NewMetricNotFoundError(info.GroupResource, info.Metric)
	if !snap.HasCustomName(info.Metric) {
		return target{}, p.unknown("custom", info.Metric, notFound)
	}
	gvr, err := p.o.Mapper.ResourceFor(info.GroupResource.WithVersion(""))
	if err != nil {
		if meta.IsNoMatchError(err) {
			return target{}, notFound
		}
		return target{}, apierrors.NewServiceUnavailable(fmt.Sprintf("cannot look up resource %s in the cluster's API discovery: %v", info.GroupResource, err))
	}
	b, ok := snap.Custom(gvr.GroupResource(), info.Metric)
	if !ok {
		return target{}, cmprovider.NewMetricNotFoundError(gvr.GroupResource(), info.Metric)
	}
	kind, clustered, err := kindAndScope(p.o.Mapper, gvr)
	if err != nil {
		return target{}, apierrors.NewInternalError(err)
	}
	return target{binding: b, gvr: gvr, kind: kind, clustered: clustered}, nil
}

// kindAndScope is gvr's kind and whether it is cluster-scoped, as the
// cluster's API discovery says.
func kindAndScope(mapper meta.RESTMapper, gvr schema.GroupVersionResource) (schema.GroupVersionKind, bool, error) {
	kind, err := mapper.KindFor(gvr)
	if err != nil {
		return kind, false, fmt.Errorf("kind of %s: %w", gvr, err)
	}
	mapping, err := mapper.RESTMapping(kind.GroupKind(), kind.Version)
	if err != nil {
		return kind, false, fmt.Errorf("scope of %s: %w", gvr, err)
	}
	return kind, mapping.Scope.Name() == meta.RESTScopeNameRoot, nil
}

// namespaceFor is the namespace to ask about for t: none for a
// cluster-scoped resource (a namespace in the request is ignored); a
// namespaced resource needs one.
func (t target) namespaceFor(namespace, metric string) (string, error) {
	switch {
	case t.clustered:
		return "", nil
	case namespace == "":
		return "", needsNamespace(t, metric)
	}
	return namespace, nil
}

// needsNamespace is the answer to a request without a namespace for a
// namespaced resource (`/apis/custom.metrics.k8s.io/v1beta2/pods/*/m`):
// 404, as prometheus-adapter answers, saying where to ask instead.
func needsNamespace(t target, metric string) error {
	gr := t.gvr.GroupResource()
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure,
		Code:   http.StatusNotFound,
		Reason: metav1.StatusReasonNotFound,
		Details: &metav1.StatusDetails{
			Group: gr.Group,
			Kind:  gr.Resource,
		},
		Message: fmt.Sprintf("the server could not find the metric %s for %s without a namespace: %s is namespaced, so the request needs one (.../namespaces/NAMESPACE/%s/...)", metric, gr, gr, gr),
	}}
}

// GetMetricByName serves one object's metric.
func (p *Provider) GetMetricByName(ctx context.Context, name types.NamespacedName, info cmprovider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValue, error) {
	t, err := p.resolve(info)
	if err != nil {
		return nil, err
	}
	namespace, err := t.namespaceFor(name.Namespace, info.Metric)
	if err != nil {
		return nil, err
	}
	exists, err := p.o.Objects.Exists(ctx, t.gvr, namespace, name.Name)
	if oos, ok := objects.AsOutOfScope(err); ok {
		return nil, oos // a 403 status, unwrapped
	}
	if err != nil {
		return nil, apierrors.NewServiceUnavailable(err.Error())
	}
	if !exists {
		return nil, apierrors.NewNotFound(t.gvr.GroupResource(), name.Name)
	}
	list, err := p.objectMetrics(ctx, t, namespace, []string{name.Name}, info.Metric, metricSelector, "/"+name.Name)
	if err != nil {
		return nil, err
	}
	items := list.Items
	if len(items) == 0 {
		if metricSelector == nil || metricSelector.Empty() {
			return nil, cmprovider.NewMetricNotFoundForError(t.gvr.GroupResource(), info.Metric, name.Name)
		}
		return nil, cmprovider.NewMetricNotFoundForSelectorError(t.gvr.GroupResource(), info.Metric, name.Name, metricSelector)
	}
	item := items[0] // a copy: items are shared
	return &item, nil
}

// GetMetricBySelector serves the metric of the objects matching selector.
func (p *Provider) GetMetricBySelector(ctx context.Context, namespace string, selector labels.Selector, info cmprovider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValueList, error) {
	t, err := p.resolve(info)
	if err != nil {
		return nil, err
	}
	if namespace, err = t.namespaceFor(namespace, info.Metric); err != nil {
		return nil, err
	}
	selected := ""
	if selector != nil {
		selected = selector.String()
		selector = keyedSelector{selector, selected}
	}
	names, err := p.o.Objects.Names(ctx, t.gvr, namespace, selector)
	if oos, ok := objects.AsOutOfScope(err); ok {
		return nil, oos // a 403 status, unwrapped
	}
	if err != nil {
		return nil, apierrors.NewServiceUnavailable(err.Error())
	}
	if len(names) == 0 {
		// An empty list, not null: Kubernetes list semantics.
		return &custom_metrics.MetricValueList{Items: []custom_metrics.MetricValue{}}, nil
	}
	list, err := p.objectMetrics(ctx, t, namespace, names, info.Metric, metricSelector, selected)
	if err != nil {
		return nil, err
	}
	if p.o.Shared == nil {
		// Encoders write a list's TypeMeta while they encode it: without
		// the cache serializing them, each request gets its own.
		return &custom_metrics.MetricValueList{Items: list.Items}, nil
	}
	p.o.Shared(list)
	return list, nil
}

// keyedSelector is a selector with its String computed once: the object
// lister and the query memo both key on it, and an internal selector
// sorts and formats its requirements on every call.
type keyedSelector struct {
	labels.Selector
	key string
}

func (s keyedSelector) String() string { return s.key }

// objectsKey is what an objects request's query and items depend on,
// besides the object names and the Prometheus result (the versions).
type objectsKey struct {
	rule           *ruleset.Rule
	series         string
	gr             schema.GroupResource
	kind           schema.GroupVersionKind
	namespace      string
	metric         string
	metricSelector string
	// objects is the object selector, or "/" and the name of the one
	// object asked for, so that requests for different objects keep their
	// own entries.
	objects string
}

// rendered is a query as rendered, or the rendering error.
type rendered struct {
	query string
	err   error
}

// objectsResult is the version of converted items: the names asked for
// and the Prometheus result they were converted from.
type objectsResult struct {
	names string
	vec   memo.Vector
}

// converted is the items served for one version, and what was left out.
type converted struct {
	// list holds the items, shared by the requests with the same version.
	list *custom_metrics.MetricValueList
	// bad counts the values left out as not finite.
	bad int
}

// memoSize bounds the remembered queries and items (see memo.Table).
const memoSize = 1024

// objectMetrics queries the metric of the named objects and returns an
// item per object that has a finite value, in the order of names. The
// rendered query and the converted items are remembered per request
// (objects says which) while names and the Prometheus result are the same,
// so a repeated request costs a cache lookup; the items are shared:
// callers must not modify them.
func (p *Provider) objectMetrics(ctx context.Context, t target, namespace string, names []string, metric string, metricSelector labels.Selector, objects string) (*custom_metrics.MetricValueList, error) {
	rule := t.binding.Rule
	gr := t.gvr.GroupResource()
	key := objectsKey{rule: rule, series: t.binding.Series, gr: gr, kind: t.kind, namespace: namespace, metric: metric, objects: objects}
	if metricSelector != nil {
		key.metricSelector = metricSelector.String()
	}
	joined := strings.Join(names, "\x00")
	r, _ := p.queries.Get(key, joined, func() rendered {
		q, err := rule.Query.Objects(promql.ObjectRequest{
			Series:         t.binding.Series,
			Resource:       gr,
			Namespace:      namespace,
			Names:          names,
			MetricSelector: metricSelector,
		})
		return rendered{query: q, err: err}
	})
	if r.err != nil {
		return nil, renderError(rule.ID, r.err)
	}
	label, err := rule.Resources.LabelFor(gr)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("%s: %w", rule.ID, err))
	}
	vec, err := p.query(ctx, t.binding, metric, r.query)
	if err != nil {
		return nil, err
	}
	c, hit := p.items.Get(key, objectsResult{names: joined, vec: memo.VectorOf(vec)}, func() converted {
		return p.convert(t, namespace, names, metric, metricSelector, label, r.query, vec)
	})
	if hit && c.bad > 0 {
		p.o.Metrics.QueryErrors.WithLabelValues(rule.Client.Name(), rule.ID, "bad_value").Add(float64(c.bad))
	}
	return c.list, nil
}

// convert builds the items of the named objects from a query result.
func (p *Provider) convert(t target, namespace string, names []string, metric string, metricSelector labels.Selector, label, query string, vec model.Vector) converted {
	rule := t.binding.Rule
	gr := t.gvr.GroupResource()
	byName := make(map[string]*model.Sample, len(vec))
	for _, s := range vec {
		byName[string(s.Metric[model.LabelName(label)])] = s
	}
	var sel *metav1.LabelSelector
	if metricSelector != nil && !metricSelector.Empty() {
		sel = labelSelector(metricSelector)
	}
	window := p.windows.get(t.binding, query)
	apiVersion := t.kind.GroupVersion().String()
	c := converted{list: &custom_metrics.MetricValueList{Items: make([]custom_metrics.MetricValue, 0, len(names))}}
	for _, n := range names {
		s, ok := byName[n]
		if !ok {
			continue
		}
		q, err := quantity.FromFloat(float64(s.Value))
		if err != nil {
			c.bad++
			p.o.Metrics.QueryErrors.WithLabelValues(rule.Client.Name(), rule.ID, "bad_value").Inc()
			klog.V(2).InfoS("Left out a value that is not a finite number", "rule", rule.ID, "metric", metric, "resource", gr, "namespace", namespace, "name", n, "value", s.Value)
			continue
		}
		_ = q.String() // kept in q: every response serializes it
		c.list.Items = append(c.list.Items, custom_metrics.MetricValue{
			DescribedObject: custom_metrics.ObjectReference{
				APIVersion: apiVersion,
				Kind:       t.kind.Kind,
				Namespace:  namespace,
				Name:       n,
			},
			Metric:        custom_metrics.MetricIdentifier{Name: metric, Selector: sel},
			Timestamp:     metav1.NewTime(s.Timestamp.Time()),
			WindowSeconds: window,
			Value:         q,
		})
	}
	return c
}

// GetExternalMetric serves an external metric: one item per sample.
func (p *Provider) GetExternalMetric(ctx context.Context, namespace string, metricSelector labels.Selector, info cmprovider.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
	b, ok := p.o.Discovery.Snapshot().External(info.Metric)
	if !ok {
		return nil, p.unknown("external", info.Metric, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    http.StatusNotFound,
			Reason:  metav1.StatusReasonNotFound,
			Message: fmt.Sprintf("the server could not find the external metric %s: no rule serves it, or discovery found no series for it", info.Metric),
		}})
	}
	rule := b.Rule
	query, err := rule.Query.External(promql.ExternalRequest{Series: b.Series, Namespace: namespace, MetricSelector: metricSelector})
	if err != nil {
		return nil, renderError(rule.ID, err)
	}
	vec, err := p.query(ctx, b, info.Metric, query)
	if err != nil {
		return nil, err
	}
	window := p.windows.get(b, query)
	out := &external_metrics.ExternalMetricValueList{Items: make([]external_metrics.ExternalMetricValue, 0, len(vec))}
	for _, s := range vec {
		q, err := quantity.FromFloat(float64(s.Value))
		if err != nil {
			p.o.Metrics.QueryErrors.WithLabelValues(rule.Client.Name(), rule.ID, "bad_value").Inc()
			klog.V(2).InfoS("Left out a value that is not a finite number", "rule", rule.ID, "metric", info.Metric, "labels", s.Metric.String(), "value", s.Value)
			continue
		}
		lbls := make(map[string]string, len(s.Metric))
		for k, v := range s.Metric {
			if k != model.MetricNameLabel {
				lbls[string(k)] = string(v)
			}
		}
		out.Items = append(out.Items, external_metrics.ExternalMetricValue{
			MetricName:    info.Metric,
			MetricLabels:  lbls,
			Timestamp:     metav1.NewTime(s.Timestamp.Time()),
			WindowSeconds: window,
			Value:         q,
		})
	}
	return out, nil
}

// query runs a query for metric on the binding's backend, recording its
// latency and errors, and turns failures into API errors. The query and
// Prometheus's error are logged, not returned: any client allowed to read
// a metric would see them.
func (p *Provider) query(ctx context.Context, b discovery.Binding, metric, query string) (model.Vector, error) {
	backend := b.Rule.Client.Name()
	began := time.Now()
	vec, err := b.Rule.Client.Query(ctx, query, time.Time{})
	p.o.Metrics.QueryDuration.WithLabelValues(backend, b.Rule.ID).Observe(time.Since(began).Seconds())
	if err != nil {
		p.o.Metrics.QueryErrors.WithLabelValues(backend, b.Rule.ID, prom.Reason(err)).Inc()
		kv := []any{"rule", b.Rule.ID, "metric", metric, "query", query}
		if ri, ok := genericapirequest.RequestInfoFrom(ctx); ok {
			kv = append(kv, "request", ri.Path)
		}
		klog.FromContext(ctx).Error(err, "Prometheus query failed", kv...)
		return nil, queryError(b.Rule.ID, metric, err)
	}
	return vec, nil
}

// queryError maps a prom error to the API error the client sees: 503
// when the backend is unavailable or timed out, else 500; the message
// names the metric, the rule and the backend, not the query (see
// prom.Public).
func queryError(ruleID, metric string, err error) error {
	msg := fmt.Sprintf("query for metric %q (%s) failed: %s; see the adapter's log", metric, ruleID, prom.Public(err))
	switch {
	case errors.Is(err, prom.ErrUnavailable), errors.Is(err, prom.ErrTimeout):
		return apierrors.NewServiceUnavailable(msg)
	default:
		return &apierrors.StatusError{ErrStatus: metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    http.StatusInternalServerError,
			Reason:  metav1.StatusReasonInternalError,
			Message: msg,
		}}
	}
}

// renderError maps a query rendering error: a selector Prometheus cannot
// express is the client's mistake (400), anything else the rule's (500).
func renderError(ruleID string, err error) error {
	var se *promql.SelectorError
	if errors.As(err, &se) {
		return apierrors.NewBadRequest(se.Error())
	}
	return apierrors.NewInternalError(fmt.Errorf("%s: rendering the query: %w", ruleID, err))
}

// labelSelector echoes a metric selector in the response. Unlike
// metav1.ParseToLabelSelector it keeps `!=` (as NotIn), which
// prometheus-adapter answers with a 500. Operators a LabelSelector cannot
// hold (gt, lt) were already refused when rendering the query.
func labelSelector(sel labels.Selector) *metav1.LabelSelector {
	reqs, _ := sel.Requirements()
	out := &metav1.LabelSelector{}
	for _, r := range reqs {
		values := r.Values().List()
		var op metav1.LabelSelectorOperator
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals:
			if out.MatchLabels == nil {
				out.MatchLabels = map[string]string{}
			}
			out.MatchLabels[r.Key()] = values[0]
			continue
		case selection.NotEquals, selection.NotIn:
			op = metav1.LabelSelectorOpNotIn
		case selection.In:
			op = metav1.LabelSelectorOpIn
		case selection.Exists:
			op = metav1.LabelSelectorOpExists
		case selection.DoesNotExist:
			op = metav1.LabelSelectorOpDoesNotExist
		default:
			continue
		}
		out.MatchExpressions = append(out.MatchExpressions, metav1.LabelSelectorRequirement{Key: r.Key(), Operator: op, Values: values})
	}
	return out
}
