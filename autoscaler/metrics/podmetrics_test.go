package metrics

import (
	"context"
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
)

const ns = "default"

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fakePodMetrics serves PodMetrics of pods labelled app=a (2) and app=b
// (1), honouring the label selector as metrics-server does, and records
// the selector of every LIST.
func fakePodMetrics() (*metricsfake.Clientset, func() []string) {
	var mu sync.Mutex
	var lists []string
	c := &metricsfake.Clientset{}
	items := []metricsapi.PodMetrics{
		{ObjectMeta: metav1.ObjectMeta{Name: "a-1", Namespace: ns, Labels: map[string]string{"app": "a"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "a-2", Namespace: ns, Labels: map[string]string{"app": "a"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b-1", Namespace: ns, Labels: map[string]string{"app": "b"}}},
	}
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

func names(items []metricsapi.PodMetrics) []string {
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
