package autoscaler

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestWorkersOver(t *testing.T) {
	window := 45 * time.Second
	for _, tc := range []struct {
		name     string
		s0, s1   []workSample
		workers  []int
		window   time.Duration
		want     workerFigures
		measured bool
	}{
		{
			name:    "one replica, its 5 workers busy 180 of 225 s",
			s0:      []workSample{{busy: 20, done: 1000, wait: 5, taken: 1000}},
			s1:      []workSample{{busy: 200, done: 31000, wait: 65, taken: 31000}},
			workers: []int{5}, window: window, measured: true,
			want: workerFigures{workers: 5, busyShare: 0.8, meanWork: 6 * time.Millisecond, meanWait: 2 * time.Millisecond},
		},
		{
			name: "three replicas: their workers and their totals together",
			s0:   []workSample{{}, {}, {}},
			s1: []workSample{
				{busy: 45, done: 9000, wait: 9, taken: 9000},
				{busy: 90, done: 9000, wait: 9, taken: 9000},
				{busy: 0, done: 0, wait: 0, taken: 0},
			},
			workers: []int{5, 5, 5}, window: window, measured: true,
			want: workerFigures{workers: 15, busyShare: 0.2, meanWork: 7500 * time.Microsecond, meanWait: 1 * time.Millisecond},
		},
		{
			name:    "nothing done in the window: busy 0, no means",
			s0:      []workSample{{busy: 3, done: 10, wait: 1, taken: 10}},
			s1:      []workSample{{busy: 3, done: 10, wait: 1, taken: 10}},
			workers: []int{20}, window: window, measured: true,
			want: workerFigures{workers: 20},
		},
		{
			name:    "no worker count: not measured",
			s0:      []workSample{{}},
			s1:      []workSample{{busy: 10, done: 10}},
			workers: []int{0}, window: window,
		},
		{
			name: "no window: not measured",
			s0:   []workSample{{}}, s1: []workSample{{busy: 10, done: 10}},
			workers: []int{5},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := workersOver(tc.s0, tc.s1, tc.workers, tc.window)
			if got.measured() != tc.measured {
				t.Fatalf("measured() = %v, want %v (%+v)", got.measured(), tc.measured, got)
			}
			if got.workers != tc.want.workers || !near(got.busyShare, tc.want.busyShare) ||
				!nearDuration(got.meanWork, tc.want.meanWork) || !nearDuration(got.meanWait, tc.want.meanWait) {
				t.Errorf("workersOver = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestWindowWorkers(t *testing.T) {
	procs := []proc{{workers: 5}, {workers: 5}}
	at := func(busy float64, has bool) procSample {
		return procSample{counters: counters{work: workSample{busy: busy, done: 1}, hasWork: has}}
	}
	got := windowWorkers(procs, []procSample{at(0, true), at(0, true)}, []procSample{at(45, true), at(45, true)}, 45*time.Second)
	if got.workers != 10 || !near(got.busyShare, 0.2) {
		t.Errorf("both replicas read: %+v, want 10 workers busy 0.2", got)
	}
	if got := windowWorkers(procs, []procSample{at(0, true), at(0, false)}, []procSample{at(45, true), at(45, true)}, 45*time.Second); got.measured() {
		t.Errorf("one replica's queue unread at the window's start: %+v, want not measured (a part would read as the whole)", got)
	}
	if got := windowWorkers([]proc{{}}, []procSample{at(0, true)}, []procSample{at(45, true)}, 45*time.Second); got.measured() {
		t.Errorf("worker count unknown: %+v, want not measured", got)
	}
}

func TestWorkersFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		argv []string
		want int
	}{
		{"not set: tidal's default, kcm's", []string{"/bin/tidal", "autoscaler", "--kube-api-qps=200"}, 5},
		{"set with =", []string{"/bin/tidal", "autoscaler", "--concurrent-horizontal-pod-autoscaler-syncs=20"}, 20},
		{"set as two words", []string{"/bin/tidal", "autoscaler", "--concurrent-horizontal-pod-autoscaler-syncs", "12"}, 12},
		{"set twice: the last, as the flag parser reads it", []string{"tidal", "--concurrent-horizontal-pod-autoscaler-syncs=8", "--kube-api-qps=200", "--concurrent-horizontal-pod-autoscaler-syncs=20"}, 20},
		{"a value the process would refuse: the default", []string{"tidal", "--concurrent-horizontal-pod-autoscaler-syncs=0"}, 5},
		{"a flag with the same start is another flag", []string{"tidal", "--concurrent-horizontal-pod-autoscaler-syncs-x=9"}, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := workersFlag(tc.argv); got != tc.want {
				t.Errorf("workersFlag(%q) = %d, want %d", tc.argv, got, tc.want)
			}
		})
	}
}

func TestParseWork(t *testing.T) {
	page := strings.Join([]string{
		`# HELP workqueue_work_duration_seconds How long in seconds processing an item from workqueue takes.`,
		`# TYPE workqueue_work_duration_seconds histogram`,
		`workqueue_work_duration_seconds_bucket{name="tidal-autoscaler",le="0.001"} 100`,
		`workqueue_work_duration_seconds_sum{name="DynamicServingCertificateController"} 99`,
		`workqueue_work_duration_seconds_sum{name="tidal-autoscaler"} 12.5`,
		`workqueue_work_duration_seconds_count{name="tidal-autoscaler"} 2500`,
		`workqueue_queue_duration_seconds_sum{name="tidal-autoscaler"} 1.25`,
		`workqueue_queue_duration_seconds_count{name="tidal-autoscaler"} 2501`,
		`workqueue_queue_duration_seconds_count{name="other"} 7`,
		`workqueue_depth{name="tidal-autoscaler"} 3`,
	}, "\n")
	got, err := parseWork(page, "tidal/metrics", "tidal-autoscaler")
	if err != nil {
		t.Fatal(err)
	}
	if want := (workSample{busy: 12.5, done: 2500, wait: 1.25, taken: 2501}); got != want {
		t.Errorf("parseWork = %+v, want %+v (other queues' series left out)", got, want)
	}
	_, err = parseWork(strings.ReplaceAll(page, `workqueue_queue_duration_seconds_sum{name="tidal-autoscaler"} 1.25`, ""), "tidal/metrics", "tidal-autoscaler")
	if !errors.Is(err, errNoSeries) || !strings.Contains(err.Error(), `has no workqueue_queue_duration_seconds_sum{name="tidal-autoscaler"}`) {
		t.Errorf("a total missing: error %v, want one that names the missing series", err)
	}
	if _, err := parseWork(strings.ReplaceAll(page, "12.5", "x"), "tidal/metrics", "tidal-autoscaler"); err == nil {
		t.Error("a value that is not a number: no error")
	}
}

// TestParseWorkKCM reads kube-controller-manager's HPA queue from a page
// with its other controllers' queues, one of whose names starts the same.
func TestParseWorkKCM(t *testing.T) {
	page := strings.Join([]string{
		`workqueue_work_duration_seconds_sum{name="horizontalpodautoscaler"} 40`,
		`workqueue_work_duration_seconds_count{name="horizontalpodautoscaler"} 10000`,
		`workqueue_queue_duration_seconds_sum{name="horizontalpodautoscaler"} 900`,
		`workqueue_queue_duration_seconds_count{name="horizontalpodautoscaler"} 10000`,
		`workqueue_work_duration_seconds_sum{name="horizontalpodautoscaler-extra"} 5`,
		`workqueue_work_duration_seconds_sum{name="deployment"} 3`,
		`workqueue_depth{name="horizontalpodautoscaler"} 2400`,
	}, "\n")
	got, err := parseWork(page, "kcm/metrics", kcmQueue)
	if err != nil {
		t.Fatal(err)
	}
	if want := (workSample{busy: 40, done: 10000, wait: 900, taken: 10000}); got != want {
		t.Errorf("parseWork = %+v, want %+v", got, want)
	}
	v, err := sumsOf(page, "kcm/metrics", `workqueue_depth{name="`+kcmQueue+`"}`)
	if err != nil || v[0] != 2400 {
		t.Errorf("kcm's queue depth = %v, %v; want 2400", v, err)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func nearDuration(a, b time.Duration) bool {
	d := a - b
	return d < time.Microsecond && -d < time.Microsecond
}
