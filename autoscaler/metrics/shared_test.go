package metrics

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	customapi "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	externalapi "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	customclient "k8s.io/metrics/pkg/client/custom_metrics"
	externalclient "k8s.io/metrics/pkg/client/external_metrics"
	testingclock "k8s.io/utils/clock/testing"
)

// countingMetrics is a custom and external metrics client that counts
// its requests by what they ask for, and answers each request with a new
// value (the number of requests so far), so a reused answer shows. With
// fail set every request fails with that error; with gate set every
// request waits for it to close.
type countingMetrics struct {
	mu    sync.Mutex
	calls map[string]int
	n     int64
	fail  error
	gate  chan struct{}
}

func newCountingMetrics() *countingMetrics { return &countingMetrics{calls: map[string]int{}} }

func (f *countingMetrics) answer(request string) (int64, error) {
	if f.gate != nil {
		<-f.gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[request]++
	f.n++
	return f.n, f.fail
}

func (f *countingMetrics) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		n += c
	}
	return n
}

type countingScope struct {
	f  *countingMetrics
	ns string // "" for root-scoped
}

func (f *countingMetrics) RootScopedMetrics() customclient.MetricsInterface {
	return countingScope{f: f}
}
func (f *countingMetrics) NamespacedMetrics(ns string) customclient.MetricsInterface {
	return countingScope{f: f, ns: ns}
}

func (s countingScope) GetForObject(gk schema.GroupKind, name, metric string, metricSelector labels.Selector) (*customapi.MetricValue, error) {
	v, err := s.f.answer(fmt.Sprintf("object %s %s %s %s {%s}", s.ns, gk, name, metric, metricSelector))
	if err != nil {
		return nil, err
	}
	return &customapi.MetricValue{Value: *resource.NewQuantity(v, resource.DecimalSI)}, nil
}

func (s countingScope) GetForObjects(gk schema.GroupKind, selector labels.Selector, metric string, metricSelector labels.Selector) (*customapi.MetricValueList, error) {
	v, err := s.f.answer(fmt.Sprintf("objects %s %s {%s} %s {%s}", s.ns, gk, selector, metric, metricSelector))
	if err != nil {
		return nil, err
	}
	return &customapi.MetricValueList{Items: []customapi.MetricValue{{
		DescribedObject: corev1.ObjectReference{Kind: "Pod", Name: "a-1"},
		Value:           *resource.NewQuantity(v, resource.DecimalSI),
	}}}, nil
}

type countingExternal struct{ f *countingMetrics }

func (f *countingMetrics) external() externalclient.ExternalMetricsClient { return countingExternal{f} }

func (e countingExternal) NamespacedMetrics(ns string) externalclient.MetricsInterface {
	return countingExternalScope{f: e.f, ns: ns}
}

type countingExternalScope struct {
	f  *countingMetrics
	ns string
}

func (s countingExternalScope) List(metric string, selector labels.Selector) (*externalapi.ExternalMetricValueList, error) {
	v, err := s.f.answer(fmt.Sprintf("external %s %s {%s}", s.ns, metric, selector))
	if err != nil {
		return nil, err
	}
	return &externalapi.ExternalMetricValueList{Items: []externalapi.ExternalMetricValue{{Value: *resource.NewQuantity(v, resource.DecimalSI)}}}, nil
}

// read is one autoscaler's metric read, its answer printed.
type read func(c Client) string

func podsRead(metric string, selector, metricSelector labels.Selector) read {
	return func(c Client) string {
		s, err := c.PodsMetric(context.Background(), metric, ns, selector, metricSelector)
		if err != nil {
			return "error: " + err.Error()
		}
		return fmt.Sprint(s["a-1"].Value)
	}
}

func objectRead(metric string, ref autoscalingv2.CrossVersionObjectReference, metricSelector labels.Selector) read {
	return func(c Client) string {
		v, err := c.ObjectMetric(context.Background(), metric, ns, &ref, metricSelector)
		if err != nil {
			return "error: " + err.Error()
		}
		return fmt.Sprint(v)
	}
}

func externalRead(metric string, selector labels.Selector) read {
	return func(c Client) string {
		v, err := c.ExternalMetric(context.Background(), metric, ns, selector)
		if err != nil {
			return "error: " + err.Error()
		}
		return fmt.Sprint(v)
	}
}

func sel(s string) labels.Selector {
	out, err := labels.Parse(s)
	if err != nil {
		panic(err)
	}
	return out
}

// TestSharedReads: in a namespace with several autoscalers, identical
// custom and external requests within the max age are made once and every
// autoscaler gets that answer, errors included; different requests, and
// any request after the max age, are made anew; an autoscaler alone in
// its namespace reads for itself.
func TestSharedReads(t *testing.T) {
	web := autoscalingv2.CrossVersionObjectReference{APIVersion: "networking.k8s.io/v1", Kind: "Ingress", Name: "web"}
	webV1beta1 := web
	webV1beta1.APIVersion = "networking.k8s.io/v1beta1"
	api := web
	api.Name = "api"
	nsA := autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Kind: "Namespace", Name: "a"}
	nsB := nsA
	nsB.Name = "b"
	rps := podsRead("rps", sel("app=a"), labels.Everything())
	queue := externalRead("queue", sel("queue=jobs"))
	tests := []struct {
		name      string
		shared    bool
		fail      error
		reads     []read
		at        []time.Duration // when each read happens; nil: all at 0
		wantCalls int
		// wantSame: every read got the first one's answer; otherwise
		// every read got its own.
		wantSame bool
	}{
		{name: "pods: 5 autoscalers, one request", shared: true,
			reads: []read{rps, rps, rps, rps, rps}, wantCalls: 1, wantSame: true},
		{name: "object: 5 autoscalers, one request (the version is not part of it)", shared: true,
			reads: []read{objectRead("hits", web, labels.Everything()), objectRead("hits", webV1beta1, labels.Everything()),
				objectRead("hits", web, labels.Everything()), objectRead("hits", web, labels.Everything()), objectRead("hits", web, labels.Everything())},
			wantCalls: 1, wantSame: true},
		{name: "object: a Namespace metric is the autoscaler's namespace's, whatever the name", shared: true,
			reads: []read{objectRead("load", nsA, labels.Everything()), objectRead("load", nsB, labels.Everything())}, wantCalls: 1, wantSame: true},
		{name: "external: 5 autoscalers, one request", shared: true,
			reads: []read{queue, queue, queue, queue, queue}, wantCalls: 1, wantSame: true},
		{name: "reads within the max age share", shared: true,
			reads: []read{rps, rps, rps}, at: []time.Duration{0, time.Second, podMetricsMaxAge - time.Millisecond}, wantCalls: 1, wantSame: true},
		{name: "pods: different pod selectors, separate requests", shared: true,
			reads: []read{podsRead("rps", sel("app=a"), labels.Everything()), podsRead("rps", sel("app=b"), labels.Everything())}, wantCalls: 2},
		{name: "pods: different metric selectors, separate requests", shared: true,
			reads: []read{podsRead("rps", sel("app=a"), sel("verb=get")), podsRead("rps", sel("app=a"), sel("verb=put"))}, wantCalls: 2},
		{name: "pods: different metrics, separate requests", shared: true,
			reads: []read{podsRead("rps", sel("app=a"), labels.Everything()), podsRead("latency", sel("app=a"), labels.Everything())}, wantCalls: 2},
		{name: "object: different described objects, separate requests", shared: true,
			reads: []read{objectRead("hits", web, labels.Everything()), objectRead("hits", api, labels.Everything())}, wantCalls: 2},
		{name: "object: different metric selectors, separate requests", shared: true,
			reads: []read{objectRead("hits", web, sel("code=200")), objectRead("hits", web, sel("code=500"))}, wantCalls: 2},
		{name: "external: different selectors, separate requests", shared: true,
			reads: []read{externalRead("queue", sel("queue=jobs")), externalRead("queue", sel("queue=mail"))}, wantCalls: 2},
		{name: "an answer as old as the max age is not reused", shared: true,
			reads: []read{rps, rps, queue, queue}, at: []time.Duration{0, podMetricsMaxAge, 0, podMetricsMaxAge}, wantCalls: 4},
		{name: "an autoscaler alone in its namespace reads for itself", shared: false,
			reads: []read{rps, rps, queue, queue}, wantCalls: 4},
		{name: "an error is shared as the own request's", shared: true, fail: errors.New("the server is currently unable to handle the request"),
			reads:     []read{rps, rps, queue, queue, objectRead("hits", web, labels.Everything()), objectRead("hits", web, labels.Everything())},
			wantCalls: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newCountingMetrics()
			f.fail = tt.fail
			clk := testingclock.NewFakePassiveClock(now)
			c := newRESTClient(nil, f, f.external(), clk)
			c.ShareNamespaceLists(func(string) bool { return tt.shared })
			var got []string
			for i, r := range tt.reads {
				if tt.at != nil {
					clk.SetTime(now.Add(tt.at[i]))
				}
				got = append(got, r(c))
				if tt.fail != nil {
					// What the read gets from a request of its own.
					ownFail := newCountingMetrics()
					ownFail.fail = tt.fail
					own := newRESTClient(nil, ownFail, ownFail.external(), nil)
					if want := r(own); got[i] != want {
						t.Errorf("read %d: %q, want what its own request answers, %q", i, got[i], want)
					}
				}
			}
			if n := f.total(); n != tt.wantCalls {
				t.Errorf("%d requests (%v), want %d", n, f.calls, tt.wantCalls)
			}
			if tt.fail != nil {
				return
			}
			for i := 1; i < len(got); i++ {
				if same := got[i] == got[0]; tt.wantSame != same {
					t.Errorf("answers %v: read %d same as read 0 = %v, want %v", got, i, same, tt.wantSame)
				}
			}
		})
	}
}

// TestSharedReadsConcurrent: identical requests made at once wait for one
// request and all get its answer.
func TestSharedReadsConcurrent(t *testing.T) {
	f := newCountingMetrics()
	f.gate = make(chan struct{})
	c := newRESTClient(nil, f, f.external(), testingclock.NewFakePassiveClock(now))
	c.ShareNamespaceLists(func(string) bool { return true })
	rps := podsRead("rps", sel("app=a"), labels.Everything())
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		got = map[string]int{}
	)
	for range 8 {
		wg.Go(func() {
			v := rps(c)
			mu.Lock()
			got[v]++
			mu.Unlock()
		})
	}
	// Let the readers queue up behind the first request before it
	// answers; a late one finds the stored answer.
	time.Sleep(50 * time.Millisecond)
	close(f.gate)
	wg.Wait()
	if n := f.total(); n != 1 {
		t.Errorf("%d requests for 8 concurrent reads, want 1", n)
	}
	if len(got) != 1 {
		t.Errorf("answers %v, want one answer for all", got)
	}
}

// TestSharedReadsForgetStale: answers no autoscaler asks for any more are
// dropped once they are too old to be shared.
func TestSharedReadsForgetStale(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(now)
	s := newSharedReads(clk)
	s.shared = func(string) bool { return true }
	for i := range 3 {
		_, _ = s.read(context.Background(), ns, fmt.Sprint(i), func() (any, error) { return i, nil })
	}
	clk.SetTime(now.Add(podMetricsMaxAge))
	_, _ = s.read(context.Background(), ns, "new", func() (any, error) { return 0, nil })
	if len(s.answers) != 1 {
		t.Errorf("%d answers kept, want 1 (the new one)", len(s.answers))
	}
}

// TestSharedReadsRounds: only reads of one sync round share an answer, so
// an autoscaler whose next round comes within the max age (a short sync
// period, a queue catching up) never gets the answer of its previous one.
func TestSharedReadsRounds(t *testing.T) {
	f := newCountingMetrics()
	clk := testingclock.NewFakePassiveClock(now)
	c := newRESTClient(nil, f, f.external(), clk)
	c.ShareNamespaceLists(func(string) bool { return true })
	round1, round2 := WithRound(context.Background(), now), WithRound(context.Background(), now.Add(time.Second))
	queue := func(ctx context.Context) string {
		v, err := c.ExternalMetric(ctx, "queue", ns, sel("queue=jobs"))
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(v)
	}
	steps := []struct {
		name      string
		ctx       context.Context
		at        time.Duration
		wantCalls int
	}{
		{"round 1, first autoscaler", round1, 0, 1},
		{"round 1, second autoscaler", round1, 100 * time.Millisecond, 1},
		{"round 2 within the max age: its own request", round2, time.Second, 2},
		{"round 2, another autoscaler", round2, time.Second + 100*time.Millisecond, 2},
		{"round 1 late, within the max age: round 1's answer", round1, 1500 * time.Millisecond, 2},
	}
	for _, st := range steps {
		clk.SetTime(now.Add(st.at))
		queue(st.ctx)
		if n := f.total(); n != st.wantCalls {
			t.Errorf("%s: %d requests in all, want %d", st.name, n, st.wantCalls)
		}
	}
}
