package metrics

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	metricsapi "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/tidal-autoscaler/tidal/autoscaler/clustercache"
	"github.com/tidal-autoscaler/tidal/autoscaler/replicas"
)

const ns = "default"

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fakePodMetrics serves PodMetrics of pods labelled app=a (2) and app=b
// (1), and extra, honouring the label selector as metrics-server does, and
// records the selector of every LIST.
func fakePodMetrics(extra ...metricsapi.PodMetrics) (*metricsfake.Clientset, func() []string) {
	var mu sync.Mutex
	var lists []string
	c := &metricsfake.Clientset{}
	items := []metricsapi.PodMetrics{
		{ObjectMeta: metav1.ObjectMeta{Name: "a-1", Namespace: ns, Labels: map[string]string{"app": "a"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "a-2", Namespace: ns, Labels: map[string]string{"app": "a"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b-1", Namespace: ns, Labels: map[string]string{"app": "b"}}},
	}
	items = append(items, extra...)
	c.AddReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sel := a.(k8stesting.ListAction).GetListRestrictions().Labels
		mu.Lock()
		lists = append(lists, sel.String())
		mu.Unlock()
		out := &metricsapi.PodMetricsList{}
		for _, m := range items {
			if sel.Matches(labels.Set(m.Labels)) {
				out.Items = append(out.Items, m)
			}
		}
		return true, out, nil
	})
	return c, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), lists...)
	}
}

func names(items []replicas.PodUsage) []string {
	var out []string
	for _, m := range items {
		out = append(out, m.Name)
	}
	return out
}

// TestPodMetricsLister: a namespace with several autoscalers is listed
// once per podMetricsMaxAge and each autoscaler gets exactly the pods its
// selector would have listed; a namespace with one autoscaler is listed
// with its selector, as upstream does.
func TestPodMetricsLister(t *testing.T) {
	ctx := context.Background()
	a, b := labels.SelectorFromSet(labels.Set{"app": "a"}), labels.SelectorFromSet(labels.Set{"app": "b"})
	tests := []struct {
		name      string
		shared    bool
		steps     []time.Duration // when each of the four reads happens
		wantLists []string
	}{
		{name: "one autoscaler: a LIST per read, with its selector", shared: false,
			steps: []time.Duration{0, 0, 0, 0}, wantLists: []string{"app=a", "app=b", "app=a", "app=b"}},
		{name: "several: one LIST for reads within the max age", shared: true,
			steps: []time.Duration{0, 0, time.Second, podMetricsMaxAge - time.Millisecond}, wantLists: []string{""}},
		{name: "several: a new LIST once the max age has passed", shared: true,
			steps: []time.Duration{0, 0, podMetricsMaxAge, podMetricsMaxAge}, wantLists: []string{"", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, lists := fakePodMetrics()
			clk := testingclock.NewFakePassiveClock(now)
			l := newPodMetricsLister(client.MetricsV1beta1(), clk)
			l.shared = func(string) bool { return tt.shared }
			for i, at := range tt.steps {
				clk.SetTime(now.Add(at))
				sel, want := a, []string{"a-1", "a-2"}
				if i%2 == 1 {
					sel, want = b, []string{"b-1"}
				}
				got, err := l.list(ctx, ns, sel)
				if err != nil {
					t.Fatal(err)
				}
				if g := names(got); len(g) != len(want) || (len(g) > 0 && (g[0] != want[0] || g[len(g)-1] != want[len(want)-1])) {
					t.Errorf("read %d (%s): pods %v, want %v", i, sel, g, want)
				}
			}
			if got := lists(); len(got) != len(tt.wantLists) || (len(got) > 0 && got[0] != tt.wantLists[0]) {
				t.Errorf("LISTs with selectors %q, want %q", got, tt.wantLists)
			}
		})
	}
}

// TestPodMetricsListerConcurrent: concurrent reads of a shared namespace
// make one request.
func TestPodMetricsListerConcurrent(t *testing.T) {
	client, lists := fakePodMetrics()
	l := newPodMetricsLister(client.MetricsV1beta1(), testingclock.NewFakePassiveClock(now))
	l.shared = func(string) bool { return true }
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			// No equality requirement: the whole list is scanned.
			got, err := l.list(context.Background(), ns, labels.Everything())
			if err != nil {
				t.Error(err)
			}
			if len(got) != 3 {
				t.Errorf("got %v, want all 3", names(got))
			}
		})
	}
	wg.Wait()
	if n := len(lists()); n != 1 {
		t.Errorf("%d LISTs for 8 concurrent reads, want 1", n)
	}
}

// TestPodMetricsListerCover: a shared namespace is listed with the cover
// of its autoscalers' selectors, so its other pods are not fetched; an
// autoscaler the cover leaves out gets its pods from a list of the whole
// namespace, which then serves the others too.
func TestPodMetricsListerCover(t *testing.T) {
	ctx := context.Background()
	client, lists := fakePodMetrics(metricsapi.PodMetrics{ObjectMeta: metav1.ObjectMeta{Name: "c-1", Namespace: ns, Labels: map[string]string{"app": "c"}}})
	clk := testingclock.NewFakePassiveClock(now)
	l := newPodMetricsLister(client.MetricsV1beta1(), clk)
	l.shared = func(string) bool { return true }
	tracker := clustercache.NewSelectorTracker()
	a, b, c := labels.SelectorFromSet(labels.Set{"app": "a"}), labels.SelectorFromSet(labels.Set{"app": "b"}), labels.SelectorFromSet(labels.Set{"app": "c"})
	tracker.PutIfAbsent(ns, ns+"/a", a)
	tracker.PutIfAbsent(ns, ns+"/b", b)
	l.cover = func(namespace string, _ labels.Selector, _ time.Time) (clustercache.Cover, bool) {
		_, all := tracker.Selectors(namespace, func(string) bool { return false })
		return clustercache.CoverOf(all)
	}
	for i, step := range []struct {
		sel       labels.Selector
		want      []string
		wantLists []string // every LIST so far
	}{
		{a, []string{"a-1", "a-2"}, []string{"app in (a,b)"}},
		{b, []string{"b-1"}, []string{"app in (a,b)"}},
		{c, []string{"c-1"}, []string{"app in (a,b)", ""}}, // not covered
		{a, []string{"a-1", "a-2"}, []string{"app in (a,b)", ""}},
	} {
		got, err := l.list(ctx, ns, step.sel)
		if err != nil {
			t.Fatal(err)
		}
		if g := names(got); !slices.Equal(g, step.want) {
			t.Errorf("read %d (%s): pods %v, want %v", i, step.sel, g, step.want)
		}
		if g := lists(); !slices.Equal(g, step.wantLists) {
			t.Errorf("after read %d (%s): LISTs %q, want %q", i, step.sel, g, step.wantLists)
		}
	}
	// Past the max age, with c registered, the cover takes c in.
	tracker.PutIfAbsent(ns, ns+"/c", c)
	clk.SetTime(now.Add(podMetricsMaxAge))
	if got, err := l.list(ctx, ns, c); err != nil || !slices.Equal(names(got), []string{"c-1"}) {
		t.Errorf("read of c: %v, %v", names(got), err)
	}
	if g := lists(); g[len(g)-1] != "app in (a,b,c)" {
		t.Errorf("LISTs %q, want the last with app in (a,b,c)", g)
	}
}

// TestPodMetricsListerCoverAsks: the cover is asked for with the selector
// of the read that makes the list and the time the list serves until: its
// round's due time plus the max age, or, outside a round, now plus it.
func TestPodMetricsListerCoverAsks(t *testing.T) {
	due := now.Add(-40 * time.Second) // a reconcile far behind its time
	for _, tc := range []struct {
		name      string
		ctx       context.Context
		wantUntil time.Time
	}{
		{"in a round", WithRound(context.Background(), due), due.Add(podMetricsMaxAge)},
		{"outside a round", context.Background(), now.Add(podMetricsMaxAge)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, lists := fakePodMetrics()
			l := newPodMetricsLister(client.MetricsV1beta1(), testingclock.NewFakePassiveClock(now))
			l.shared = func(string) bool { return true }
			a := labels.SelectorFromSet(labels.Set{"app": "a"})
			var gotCaller labels.Selector
			var gotUntil time.Time
			l.cover = func(_ string, caller labels.Selector, until time.Time) (clustercache.Cover, bool) {
				gotCaller, gotUntil = caller, until
				return clustercache.CoverOf([]labels.Selector{caller})
			}
			got, err := l.list(tc.ctx, ns, a)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(names(got), []string{"a-1", "a-2"}) {
				t.Errorf("pods %v, want a-1, a-2", names(got))
			}
			if gotCaller == nil || gotCaller.String() != "app=a" || !gotUntil.Equal(tc.wantUntil) {
				t.Errorf("cover asked with %v, %s; want app=a, %s", gotCaller, gotUntil, tc.wantUntil)
			}
			if g := lists(); !slices.Equal(g, []string{"app in (a)"}) {
				t.Errorf("LISTs %q, want one with app in (a)", g)
			}
		})
	}
}

// TestPodMetricsListerCoverConcurrent: reads sharing one request get their
// own pods even when that request's cover leaves their selector out.
func TestPodMetricsListerCoverConcurrent(t *testing.T) {
	client, _ := fakePodMetrics(metricsapi.PodMetrics{ObjectMeta: metav1.ObjectMeta{Name: "c-1", Namespace: ns, Labels: map[string]string{"app": "c"}}})
	l := newPodMetricsLister(client.MetricsV1beta1(), testingclock.NewFakePassiveClock(now))
	l.shared = func(string) bool { return true }
	covered := labels.SelectorFromSet(labels.Set{"app": "a"})
	l.cover = func(string, labels.Selector, time.Time) (clustercache.Cover, bool) {
		return clustercache.CoverOf([]labels.Selector{covered})
	}
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			sel, want := covered, []string{"a-1", "a-2"}
			if i%2 == 1 {
				sel, want = labels.SelectorFromSet(labels.Set{"app": "c"}), []string{"c-1"}
			}
			got, err := l.list(context.Background(), ns, sel)
			if err != nil {
				t.Error(err)
			}
			if !slices.Equal(names(got), want) {
				t.Errorf("read of %s: %v, want %v", sel, names(got), want)
			}
		})
	}
	wg.Wait()
}
