package autoscaler

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// defaultWorkers is tidal's --concurrent-horizontal-pod-autoscaler-syncs
// when its command line does not set it (kcm's default too).
const defaultWorkers = 5

// workSample is a controller's work queue totals at one time, from its
// workqueue_* metrics (client-go's, as kube-controller-manager names
// them): the seconds its workers spent on keys and the keys they finished,
// the seconds keys waited in the queue for a worker and the keys taken.
type workSample struct{ busy, done, wait, taken float64 }

// workerFigures are what a window says of a controller's workers: whether
// they were what held its reconciles back, which a deep queue alone does
// not say (a namespace's autoscalers come due together on its beat, so
// the queue holds a namespace's share at once by design).
type workerFigures struct {
	// workers is how many there were, every replica's together.
	workers int
	// busyShare is the workers' time on keys over all their time in the
	// window: near 1, every worker always had a key (the reconciles,
	// their reads and status writes, waited on a worker).
	busyShare float64
	// meanWork is a key's time with a worker (a reconcile, its status
	// write included); meanWait a key's time in the queue before it.
	meanWork, meanWait time.Duration
}

// measured is whether the figures were read (a side without the metrics,
// kcm, or a window whose scrape failed, has none).
func (w workerFigures) measured() bool { return w.workers > 0 }

func (w workerFigures) String() string {
	if !w.measured() {
		return "its workers not measured"
	}
	return fmt.Sprintf("its %d workers busy %.2f of the window (a key %s with a worker and %s in the queue before it, on average)",
		w.workers, w.busyShare, w.meanWork.Round(100*time.Microsecond), w.meanWait.Round(100*time.Microsecond))
}

// workersOver is the window's worker figures from each replica's totals
// at its start (s0) and end (s1) and each one's worker count.
func workersOver(s0, s1 []workSample, workers []int, window time.Duration) workerFigures {
	var busy, done, wait, taken float64
	w := workerFigures{}
	for i := range min(len(s0), len(s1), len(workers)) {
		busy += s1[i].busy - s0[i].busy
		done += s1[i].done - s0[i].done
		wait += s1[i].wait - s0[i].wait
		taken += s1[i].taken - s0[i].taken
		w.workers += workers[i]
	}
	if w.workers == 0 || window <= 0 {
		return workerFigures{}
	}
	w.busyShare = busy / (float64(w.workers) * window.Seconds())
	if done > 0 {
		w.meanWork = time.Duration(busy / done * float64(time.Second))
	}
	if taken > 0 {
		w.meanWait = time.Duration(wait / taken * float64(time.Second))
	}
	return w
}

// workersFlag is the worker count a tidal command line (argv) runs with:
// the last --concurrent-horizontal-pod-autoscaler-syncs, as the flag
// parser reads it, or the default.
func workersFlag(argv []string) int {
	const flag = "--concurrent-horizontal-pod-autoscaler-syncs"
	n := defaultWorkers
	for i, a := range argv {
		v, ok := strings.CutPrefix(a, flag+"=")
		if !ok && a == flag && i+1 < len(argv) {
			v, ok = argv[i+1], true
		}
		if !ok {
			continue
		}
		if x, err := strconv.Atoi(v); err == nil && x > 0 {
			n = x
		}
	}
	return n
}

// workersOf reads process pid's worker count from its command line (a
// wrapper script that execs tidal with more flags is read right too).
func workersOf(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return 0, err
	}
	return workersFlag(strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")), nil
}

// parseWork reads queue's work queue totals from a /metrics page fetched
// from url: the _sum and _count of its work and queue durations (the
// series labelled with its name alone, as client-go's workqueue metrics
// are; other queues' are left out).
func parseWork(page, url, queue string) (workSample, error) {
	sel := `{name="` + queue + `"}`
	v, err := sumsOf(page, url,
		"workqueue_work_duration_seconds_sum"+sel, "workqueue_work_duration_seconds_count"+sel,
		"workqueue_queue_duration_seconds_sum"+sel, "workqueue_queue_duration_seconds_count"+sel)
	if err != nil {
		return workSample{}, err
	}
	return workSample{busy: v[0], done: v[1], wait: v[2], taken: v[3]}, nil
}
