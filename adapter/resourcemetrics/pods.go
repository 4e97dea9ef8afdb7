package resourcemetrics

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/common/model"
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
	"k8s.io/client-go/tools/cache"
	"k8s.io/metrics/pkg/apis/metrics"

	"github.com/tidal-autoscaler/tidal/adapter/internal/encodecache"
	"github.com/tidal-autoscaler/tidal/adapter/internal/memo"
	"github.com/tidal-autoscaler/tidal/adapter/objects"
	"github.com/tidal-autoscaler/tidal/adapter/ruleset"
	"github.com/tidal-autoscaler/tidal/rules/promql"
)

type podKey struct{ namespace, name string }

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

// podStorage serves PodMetrics (see storage.go).
type podStorage struct {
	tableConvertor
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

func (*podStorage) New() runtime.Object     { return &metrics.PodMetrics{} }
func (*podStorage) NewList() runtime.Object { return &metrics.PodMetricsList{} }
func (*podStorage) Destroy()                {}
func (*podStorage) Kind() string            { return "PodMetrics" }
func (*podStorage) NamespaceScoped() bool   { return true }
func (*podStorage) GetSingularName() string { return "" }

// List implements rest.Lister.
func (s *podStorage) List(ctx context.Context, options *metainternalversion.ListOptions) (runtime.Object, error) {
	namespace := genericapirequest.NamespaceValue(ctx)
	sel, fieldSel := selectors(options)
	pods, err := s.pods.Select(namespace, sel)
	if oos, ok := objects.AsOutOfScope(err); ok {
		return &metrics.PodMetricsList{}, oos // a 403 status, unwrapped
	}
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
		if oos, ok := objects.AsOutOfScope(err); ok {
			return &metrics.PodMetrics{}, oos // a 403 status, unwrapped
		}
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

// addPodRow adds a PodMetrics' row: its containers' usage summed per
// resource.
func addPodRow(table *metav1beta1.Table, m *metrics.PodMetrics) {
	usage := corev1.ResourceList{}
	for _, c := range m.Containers {
		for k, v := range c.Usage {
			u := usage[k]
			u.Add(v)
			usage[k] = u
		}
	}
	addRow(table, m.Name, usage, m.Window.Duration, m)
}
