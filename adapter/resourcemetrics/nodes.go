package resourcemetrics

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/metrics/pkg/apis/metrics"
	msapi "sigs.k8s.io/metrics-server/pkg/api"

	"github.com/tidal-autoscaler/tidal/adapter/ruleset"
	"github.com/tidal-autoscaler/tidal/rules/promql"
)

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

// nodeStorage serves NodeMetrics (see storage.go).
type nodeStorage struct {
	tableConvertor
	metrics msapi.NodeMetricsGetter
	nodes   corelisters.NodeLister
}

func (*nodeStorage) New() runtime.Object     { return &metrics.NodeMetrics{} }
func (*nodeStorage) NewList() runtime.Object { return &metrics.NodeMetricsList{} }
func (*nodeStorage) Destroy()                {}
func (*nodeStorage) Kind() string            { return "NodeMetrics" }
func (*nodeStorage) NamespaceScoped() bool   { return false }
func (*nodeStorage) GetSingularName() string { return "" }

// List implements rest.Lister.
func (s *nodeStorage) List(_ context.Context, options *metainternalversion.ListOptions) (runtime.Object, error) {
	sel, fieldSel := selectors(options)
	nodes, err := s.nodes.List(sel)
	if err != nil {
		return &metrics.NodeMetricsList{}, fmt.Errorf("failed listing nodes: %w", err)
	}
	if fieldSel != nil {
		kept := nodes[:0:0]
		for _, n := range nodes {
			if fieldSel.Matches(generic.AddObjectMetaFieldsSet(fields.Set{}, &n.ObjectMeta, false)) {
				kept = append(kept, n)
			}
		}
		nodes = kept
	}
	ms, err := s.get(nodes...)
	if err != nil {
		return &metrics.NodeMetricsList{}, getterError("failed reading nodes metrics", err)
	}
	return &metrics.NodeMetricsList{Items: ms}, nil
}

// Get implements rest.Getter.
func (s *nodeStorage) Get(_ context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	node, err := s.nodes.Get(name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, err
		}
		return nil, fmt.Errorf("failed getting node: %w", err)
	}
	if node == nil {
		return nil, apierrors.NewNotFound(metrics.Resource("nodemetrics"), name)
	}
	ms, err := s.get(node)
	if err != nil {
		return nil, getterError("failed reading node metrics", err)
	}
	if len(ms) == 0 {
		return nil, apierrors.NewNotFound(metrics.Resource("nodemetrics"), name)
	}
	return &ms[0], nil
}

func (s *nodeStorage) get(nodes ...*corev1.Node) ([]metrics.NodeMetrics, error) {
	ms, err := s.metrics.GetNodeMetrics(nodes...)
	if err != nil {
		return nil, err
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Name < ms[j].Name })
	return ms, nil
}
