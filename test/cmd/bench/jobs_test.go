package main

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/tidal-autoscaler/tidal/test/bench/samples"
)

// recorder is a job runner that counts runs and the most that overlap.
// With wait, a run that starts alone waits for a second to start beside
// it (closing overlap), up to a bound so that one lane cannot hang the
// test.
type recorder struct {
	mu            sync.Mutex
	runs          map[string]int
	running, most int
	overlap       chan struct{}
	fail          map[string]bool
	wait          bool
}

func newRecorder(wait bool, fail ...string) *recorder {
	r := &recorder{runs: map[string]int{}, overlap: make(chan struct{}), fail: map[string]bool{}, wait: wait}
	for _, id := range fail {
		r.fail[id] = true
	}
	return r
}

func (r *recorder) run(ctx context.Context, j job) ([]samples.Sample, error) {
	r.mu.Lock()
	r.runs[j.id]++
	r.running++
	if r.running == 2 && r.most < 2 {
		close(r.overlap)
	}
	r.most = max(r.most, r.running)
	r.mu.Unlock()
	if r.wait {
		select {
		case <-r.overlap:
		case <-time.After(10 * time.Second):
		}
	}
	r.mu.Lock()
	r.running--
	r.mu.Unlock()
	if r.fail[j.id] {
		return nil, errors.New("boom")
	}
	return []samples.Sample{{Side: j.id}}, nil
}

func TestRunJobs(t *testing.T) {
	same := map[string]string{"X": "1"}
	p := plan{jobs: map[string]job{
		"a":  {id: "a", pkg: "./a", bench: "A", env: same},
		"a2": {id: "a2", pkg: "./a", bench: "A", env: same}, // a's key: runs once
		"b":  {id: "b", pkg: "./b", bench: "B"},
		"c":  {id: "c", pkg: "./c", bench: "C"},
	}}
	rowsOf := []row{
		{id: "r1", cells: []ref{{job: "a"}, {job: "b"}}},
		{id: "r2", cells: []ref{{job: "a2"}, {job: "c"}}},
	}
	for _, tc := range []struct {
		name      string
		lanes     int
		wait      bool
		fail      []string
		wantMost  int
		wantFails []string
	}{
		{name: "one lane runs one job at a time", lanes: 1, wantMost: 1},
		{name: "two lanes run two jobs at once", lanes: 2, wait: true, wantMost: 2},
		{name: "a failure is every alias's", lanes: 2, fail: []string{"a"}, wantMost: 2, wait: true, wantFails: []string{"a", "a2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder(tc.wait, tc.fail...)
			d := runJobs(context.Background(), p, rowsOf, tc.lanes, io.Discard, rec.run)
			if rec.runs["a"] != 1 || rec.runs["a2"] != 0 || rec.runs["b"] != 1 || rec.runs["c"] != 1 {
				t.Errorf("runs %v, want a, b and c once each and a2 (a's job) never", rec.runs)
			}
			if rec.most != tc.wantMost {
				t.Errorf("at most %d jobs ran at once, want %d", rec.most, tc.wantMost)
			}
			for _, id := range []string{"a", "a2", "b", "c"} {
				_, failed := d.failed[id]
				wantFail := false
				for _, f := range tc.wantFails {
					wantFail = wantFail || f == id
				}
				if failed != wantFail {
					t.Errorf("%s failed: %v, want %v", id, failed, wantFail)
				}
				if !wantFail && (len(d.samples[id]) != 1 || (id != "a2" && d.samples[id][0].Side != id)) {
					t.Errorf("%s's samples %v", id, d.samples[id])
				}
			}
			if len(tc.wantFails) == 0 && d.samples["a2"][0].Side != "a" {
				t.Errorf("a2 holds %v, want a's samples", d.samples["a2"])
			}
		})
	}
}
