package metrics

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	resourceclient "k8s.io/metrics/pkg/client/clientset/versioned/typed/metrics/v1beta1"
	"k8s.io/utils/clock"

	"golang.org/x/sync/singleflight"

	"github.com/tidal-autoscaler/tidal/autoscaler/clustercache"
	"github.com/tidal-autoscaler/tidal/autoscaler/replicas"
)

// podMetricsMaxAge is how long one LIST of a namespace's PodMetrics
// answers the autoscalers of that namespace. metrics-server refreshes its
// samples every 15 s (its default resolution), so a list at most this old
// holds the samples a fresh one would, or the ones just before.
const podMetricsMaxAge = 2 * time.Second

// podMetricsLister lists PodMetrics for the autoscalers. Where several
// autoscalers share a namespace it lists the whole namespace once per
// podMetricsMaxAge and selects each autoscaler's pods from that list by
// their labels, as metrics-server does with a label selector (it copies
// the pods' labels onto their PodMetrics): upstream's one LIST per
// autoscaler per sync is most of its API traffic. Such autoscalers come
// due together, on their namespace's beat (see nextDue), so one list
// serves them all each period. A namespace with a
// single autoscaler is listed with its selector, as upstream does, so a
// large namespace is not fetched for a few pods. With cover set, a list
// is made with the selector cover returns (clustercache.Cover) when there
// is one, so that only the pods of the autoscalers that will read the list
// are fetched: a sharded replica's own, or, off the beat, the few due
// before the list expires.
type podMetricsLister struct {
	read  listPodMetrics
	clock clock.PassiveClock
	// shared reports whether several autoscalers use the namespace; nil:
	// never.
	shared func(namespace string) bool
	// cover returns the selector a list of the namespace is made with;
	// nil, or false: list the whole namespace.
	cover CoverFunc

	group singleflight.Group
	mu    sync.Mutex
	lists map[string]*namespaceList
}

// CoverFunc returns a selector covering the selector of the reconcile that
// makes a namespace's shared PodMetrics list (caller) and those of the
// autoscalers that will read the list before it expires (until: its round's
// due time plus podMetricsMaxAge); false: list the whole namespace.
type CoverFunc func(namespace string, caller labels.Selector, until time.Time) (clustercache.Cover, bool)

type namespaceList struct {
	// items are the list's PodMetrics converted once for the arithmetic
	// (converting each autoscaler's share again per reconcile, and copying
	// its 400-byte PodMetrics, was 8% of a reconcile's allocations);
	// labels[i] are items[i]'s labels.
	items  []replicas.PodUsage
	labels []map[string]string
	// byLabel indexes items by each of their labels, as
	// clustercache.PodIndex does pods (keyed by the label itself, not
	// its "key=value" string, which cost a string per label per list).
	byLabel map[clustercache.Pair][]int
	at      time.Time
	// cover is the selector the list was made with; nil: the whole
	// namespace.
	cover *clustercache.Cover
}

func newNamespaceList(list usageList, at time.Time, cover *clustercache.Cover) *namespaceList {
	l := &namespaceList{items: list.items, labels: list.labels, byLabel: map[clustercache.Pair][]int{}, at: at, cover: cover}
	for i, ls := range list.labels {
		for k, v := range ls {
			key := clustercache.Pair{Key: k, Value: v}
			l.byLabel[key] = append(l.byLabel[key], i)
		}
	}
	return l
}

// holds reports whether the list holds every PodMetrics sel matches.
func (l *namespaceList) holds(sel labels.Selector) bool {
	return l.cover == nil || l.cover.Covers(sel)
}

// selecting returns the items whose labels sel matches, in a slice sized
// once (growing it by appends was 6% of a reconcile's allocations).
func (l *namespaceList) selecting(sel labels.Selector) []replicas.PodUsage {
	var candidates []int
	pairs := clustercache.EqualityLabels(sel)
	for i, p := range pairs {
		if idx := l.byLabel[p]; i == 0 || len(idx) < len(candidates) {
			candidates = idx
		}
	}
	if len(pairs) == 0 {
		var out []replicas.PodUsage
		for i := range l.items {
			if sel.Matches(labels.Set(l.labels[i])) {
				out = append(out, l.items[i])
			}
		}
		return out
	}
	out := make([]replicas.PodUsage, 0, len(candidates))
	for _, i := range candidates {
		if sel.Matches(labels.Set(l.labels[i])) {
			out = append(out, l.items[i])
		}
	}
	return out
}

func newPodMetricsLister(client resourceclient.PodMetricsesGetter, clk clock.PassiveClock) *podMetricsLister {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &podMetricsLister{read: podMetricsList(client), clock: clk, lists: map[string]*namespaceList{}}
}

// list returns the usage of namespace's pods whose labels selector
// matches. The items may be shared: callers must not modify them.
func (l *podMetricsLister) list(ctx context.Context, namespace string, selector labels.Selector) ([]replicas.PodUsage, error) {
	if l.shared == nil || !l.shared(namespace) {
		return l.listSelected(ctx, namespace, selector)
	}
	all, err := l.namespace(ctx, namespace, selector)
	if err != nil {
		return nil, err
	}
	if !all.holds(selector) {
		// An autoscaler the shared list's cover was made without (added
		// or changed while it was made) is listed with its own selector.
		return l.listSelected(ctx, namespace, selector)
	}
	return all.selecting(selector), nil
}

// listSelected lists the namespace's PodMetrics with selector, as
// upstream does for every autoscaler.
func (l *podMetricsLister) listSelected(ctx context.Context, namespace string, selector labels.Selector) ([]replicas.PodUsage, error) {
	list, err := l.read(ctx, namespace, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, err
	}
	return list.items, nil
}

// namespace returns the PodMetrics of the namespace that its autoscalers'
// selectors may match, from a list at most podMetricsMaxAge old that holds
// those selector matches; concurrent callers share one request, whose list
// may not hold selector's (see namespaceList.holds). The items are
// shared: callers must not modify them.
func (l *podMetricsLister) namespace(ctx context.Context, namespace string, selector labels.Selector) (*namespaceList, error) {
	if cached := l.fresh(namespace, selector); cached != nil {
		return cached, nil
	}
	v, err, _ := l.group.Do(namespace, func() (any, error) {
		// A caller that missed the cache just as another call stored its
		// list starts a new call: it finds that list here.
		if cached := l.fresh(namespace, selector); cached != nil {
			return cached, nil
		}
		at := l.clock.Now()
		var opts metav1.ListOptions
		var cover *clustercache.Cover
		if l.cover != nil {
			round, ok := roundDue(ctx)
			if !ok {
				round = at
			}
			if c, ok := l.cover(namespace, selector, round.Add(podMetricsMaxAge)); ok && c.Covers(selector) {
				cover = &c
				opts.LabelSelector = c.String()
			}
		}
		items, err := l.read(ctx, namespace, opts)
		if err != nil {
			return nil, err
		}
		fresh := newNamespaceList(items, at, cover)
		l.mu.Lock()
		// Drop stale lists, so namespaces whose autoscalers are gone hold
		// no memory.
		for ns, old := range l.lists {
			if l.clock.Since(old.at) >= podMetricsMaxAge {
				delete(l.lists, ns)
			}
		}
		l.lists[namespace] = fresh
		l.mu.Unlock()
		return fresh, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*namespaceList), nil
}

// fresh returns the namespace's list if it is younger than
// podMetricsMaxAge and holds selector's matches, else nil.
func (l *podMetricsLister) fresh(namespace string, selector labels.Selector) *namespaceList {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cached, ok := l.lists[namespace]; ok && l.clock.Since(cached.at) < podMetricsMaxAge && cached.holds(selector) {
		return cached
	}
	return nil
}
