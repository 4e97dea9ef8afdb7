package resourcemetrics

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/metrics/pkg/apis/metrics"
	msapi "sigs.k8s.io/metrics-server/pkg/api"

	"github.com/tidal-autoscaler/tidal/adapter/internal/encodecache"
	"github.com/tidal-autoscaler/tidal/adapter/prom"
)

// podStorage and nodeStorage serve PodMetrics and NodeMetrics as
// metrics-server v0.9.0's pkg/api storage does (same listing, label and
// field selectors, order, not-found answers and tables), but keep the
// getter's errors answerable: metrics-server wraps them with fmt.Errorf,
// and the apiserver (responsewriters.ErrorToAPIStatus) does not unwrap, so
// a Prometheus outage would be a 500 like a bug. Here a backend that is
// down or too slow is a 503 ServiceUnavailable naming it (see getterError).
type podStorage struct {
	metrics podMetricsForRequest
	pods    podLister
	// encodings keeps the encodings of the lists the Provider shares
	// between requests.
	encodings *encodecache.Cache[metrics.PodMetricsList]
}

// podMetricsForRequest is implemented by Provider: GetPodMetrics told
// which request selected the pods, so that it can remember its work per
// request (see Provider.PodMetricsListFor).
type podMetricsForRequest interface {
	PodMetricsListFor(request string, pods ...*metav1.PartialObjectMetadata) (*metrics.PodMetricsList, error)
}

// podLister is the pods' watch cache (syncedLister): Get for one pod,
// Select for the remembered answers of objects.CacheLister.Select.
type podLister interface {
	cache.GenericLister
	Select(namespace string, selector labels.Selector) ([]*metav1.PartialObjectMetadata, error)
}

type nodeStorage struct {
	metrics msapi.NodeMetricsGetter
	nodes   corelisters.NodeLister
}

var (
	_ rest.Storage              = (*podStorage)(nil)
	_ rest.KindProvider         = (*podStorage)(nil)
	_ rest.Getter               = (*podStorage)(nil)
	_ rest.Lister               = (*podStorage)(nil)
	_ rest.TableConvertor       = (*podStorage)(nil)
	_ rest.Scoper               = (*podStorage)(nil)
	_ rest.SingularNameProvider = (*podStorage)(nil)
	_ rest.Storage              = (*nodeStorage)(nil)
	_ rest.KindProvider         = (*nodeStorage)(nil)
	_ rest.Getter               = (*nodeStorage)(nil)
	_ rest.Lister               = (*nodeStorage)(nil)
	_ rest.TableConvertor       = (*nodeStorage)(nil)
	_ rest.Scoper               = (*nodeStorage)(nil)
	_ rest.SingularNameProvider = (*nodeStorage)(nil)
)

// getterError is the API error for a failed MetricsGetter call: 503 when a
// backend is unavailable or timed out (its message names the backend),
// otherwise a 500 with the reason and the queries.
func getterError(what string, err error) error {
	msg := fmt.Sprintf("%s: %v", what, err)
	if errors.Is(err, prom.ErrUnavailable) || errors.Is(err, prom.ErrTimeout) {
		return apierrors.NewServiceUnavailable(msg)
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusInternalServerError,
		Reason:  metav1.StatusReasonInternalError,
		Message: msg,
	}}
}

func (*podStorage) New() runtime.Object      { return &metrics.PodMetrics{} }
func (*podStorage) NewList() runtime.Object  { return &metrics.PodMetricsList{} }
func (*podStorage) Destroy()                 {}
func (*podStorage) Kind() string             { return "PodMetrics" }
func (*podStorage) NamespaceScoped() bool    { return true }
func (*podStorage) GetSingularName() string  { return "" }
func (*nodeStorage) New() runtime.Object     { return &metrics.NodeMetrics{} }
func (*nodeStorage) NewList() runtime.Object { return &metrics.NodeMetricsList{} }
func (*nodeStorage) Destroy()                {}
func (*nodeStorage) Kind() string            { return "NodeMetrics" }
func (*nodeStorage) NamespaceScoped() bool   { return false }
func (*nodeStorage) GetSingularName() string { return "" }

// List implements rest.Lister.
func (s *podStorage) List(ctx context.Context, options *metainternalversion.ListOptions) (runtime.Object, error) {
	namespace := genericapirequest.NamespaceValue(ctx)
	sel, fieldSel := selectors(options)
	pods, err := s.pods.Select(namespace, sel)
	if err != nil {
		return &metrics.PodMetricsList{}, fmt.Errorf("failed listing pods: %w", err)
	}
	if fieldSel != nil {
		pods = slices.DeleteFunc(slices.Clone(pods), func(p *metav1.PartialObjectMetadata) bool {
			return !fieldSel.Matches(generic.AddObjectMetaFieldsSet(fields.Set{}, &p.ObjectMeta, true))
		})
	}
	request := namespace + "?" + sel.String()
	if fieldSel != nil {
		request += "&" + fieldSel.String()
	}
	l, err := s.list(request, pods)
	if err != nil {
		return &metrics.PodMetricsList{}, getterError("failed reading pods metrics", err)
	}
	s.encodings.Remember(l)
	return l, nil
}

// list answers in namespace and name order for the pods request selected
// (see Provider.PodMetricsListFor). The pods are sorted first: the getter
// keeps their order, and swapping pointers is cheaper than swapping
// PodMetrics. The Provider's list may be shared between requests: it is
// never modified here.
func (s *podStorage) list(request string, pods []*metav1.PartialObjectMetadata) (*metrics.PodMetricsList, error) {
	if !slices.IsSortedFunc(pods, podOrder) {
		pods = slices.Clone(pods) // may be shared: not sorted in place
		slices.SortFunc(pods, podOrder)
	}
	l, err := s.metrics.PodMetricsListFor(request, pods...)
	if err != nil {
		return nil, err
	}
	if l == nil {
		return &metrics.PodMetricsList{}, nil
	}
	if !slices.IsSortedFunc(l.Items, byName) {
		items := slices.Clone(l.Items) // may be shared: not sorted in place
		slices.SortFunc(items, byName)
		return &metrics.PodMetricsList{Items: items}, nil
	}
	return l, nil
}

func podOrder(a, b *metav1.PartialObjectMetadata) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

func byName(a, b metrics.PodMetrics) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// Get implements rest.Getter.
func (s *podStorage) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	namespace := genericapirequest.NamespaceValue(ctx)
	o, err := s.pods.ByNamespace(namespace).Get(name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return &metrics.PodMetrics{}, err
		}
		return &metrics.PodMetrics{}, fmt.Errorf("failed getting pod: %w", err)
	}
	p, ok := o.(*metav1.PartialObjectMetadata)
	if !ok || p == nil {
		return &metrics.PodMetrics{}, apierrors.NewNotFound(corev1.Resource("pods"), namespace+"/"+name)
	}
	l, err := s.list(namespace+"/"+name, []*metav1.PartialObjectMetadata{p})
	if err != nil {
		return nil, getterError("failed pod metrics", err)
	}
	ms := l.Items
	if len(ms) == 0 {
		return nil, apierrors.NewNotFound(metrics.Resource("podmetrics"), namespace+"/"+name)
	}
	return &ms[0], nil
}

// ConvertToTable implements rest.TableConvertor: a column per resource
// (the containers' sum), then the window.
func (*podStorage) ConvertToTable(_ context.Context, object runtime.Object, _ runtime.Object) (*metav1beta1.Table, error) {
	var table metav1beta1.Table
	var items []metrics.PodMetrics
	switch t := object.(type) {
	case *metrics.PodMetrics:
		table.ResourceVersion = t.ResourceVersion
		items = []metrics.PodMetrics{*t}
	case *metrics.PodMetricsList:
		table.ResourceVersion, table.Continue = t.ResourceVersion, t.Continue
		items = t.Items
	}
	for i := range items {
		usage := corev1.ResourceList{}
		for _, c := range items[i].Containers {
			for k, v := range c.Usage {
				u := usage[k]
				u.Add(v)
				usage[k] = u
			}
		}
		addRow(&table, items[i].Name, usage, items[i].Window.Duration, &items[i])
	}
	return &table, nil
}

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

// ConvertToTable implements rest.TableConvertor.
func (*nodeStorage) ConvertToTable(_ context.Context, object runtime.Object, _ runtime.Object) (*metav1beta1.Table, error) {
	var table metav1beta1.Table
	var items []metrics.NodeMetrics
	switch t := object.(type) {
	case *metrics.NodeMetrics:
		table.ResourceVersion = t.ResourceVersion
		items = []metrics.NodeMetrics{*t}
	case *metrics.NodeMetricsList:
		table.ResourceVersion, table.Continue = t.ResourceVersion, t.Continue
		items = t.Items
	}
	for i := range items {
		addRow(&table, items[i].Name, items[i].Usage, items[i].Window.Duration, &items[i])
	}
	return &table, nil
}

func selectors(options *metainternalversion.ListOptions) (labels.Selector, fields.Selector) {
	sel := labels.Everything()
	if options == nil {
		return sel, nil
	}
	if options.LabelSelector != nil {
		sel = options.LabelSelector
	}
	// The apiserver decodes a missing fieldSelector as an empty selector,
	// not nil: testing it on every pod would build a field set per pod for
	// nothing.
	if options.FieldSelector == nil || options.FieldSelector.Empty() {
		return sel, nil
	}
	return sel, options.FieldSelector
}

// addRow adds an object's row; the first row fixes the columns: Name, one
// per resource in its usage (sorted), Window.
func addRow(table *metav1beta1.Table, name string, usage corev1.ResourceList, window time.Duration, obj runtime.Object) {
	if table.ColumnDefinitions == nil {
		table.ColumnDefinitions = []metav1beta1.TableColumnDefinition{{Name: "Name", Type: "string", Format: "name", Description: "Name of the resource"}}
		var names []string
		for k := range usage {
			names = append(names, string(k))
		}
		sort.Strings(names)
		for _, n := range names {
			table.ColumnDefinitions = append(table.ColumnDefinitions, metav1beta1.TableColumnDefinition{Name: n, Type: "string", Format: "quantity"})
		}
		table.ColumnDefinitions = append(table.ColumnDefinitions, metav1beta1.TableColumnDefinition{Name: "Window", Type: "string", Format: "duration"})
	}
	cols := table.ColumnDefinitions[1 : len(table.ColumnDefinitions)-1]
	row := make([]any, 0, len(cols)+2)
	row = append(row, name)
	for _, c := range cols {
		v := usage[corev1.ResourceName(c.Name)]
		row = append(row, v.String())
	}
	row = append(row, window.String())
	table.Rows = append(table.Rows, metav1beta1.TableRow{Cells: row, Object: runtime.RawExtension{Object: obj}})
}
