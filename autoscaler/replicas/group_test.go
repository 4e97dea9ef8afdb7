package replicas

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestGroupPods(t *testing.T) {
	cfg := DefaultConfig() // 5m cpu initialization, 30s readiness delay
	deleted := readyPod("p", 100)
	deleted.Deleted = true
	noCond := readyPod("p", 100)
	noCond.Ready = nil
	noStart := readyPod("p", 100)
	noStart.StartTime = nil

	// Pods started 1 minute ago are within the cpu initialization period.
	young := func(status corev1.ConditionStatus, transitionAgo time.Duration) Pod {
		p := readyPod("p", 100)
		p.StartTime = tp(testNow.Add(-time.Minute))
		p.Ready = &ReadyCondition{Status: status, LastTransitionTime: testNow.Add(-transitionAgo)}
		return p
	}
	// Pods started 10 minutes ago are past it.
	old := func(status corev1.ConditionStatus, transition time.Time) Pod {
		p := readyPod("p", 100)
		p.StartTime = tp(testNow.Add(-10 * time.Minute))
		p.Ready = &ReadyCondition{Status: status, LastTransitionTime: transition}
		return p
	}
	start := testNow.Add(-10 * time.Minute)

	tests := []struct {
		name     string
		pod      Pod
		samples  PodSamples
		resource corev1.ResourceName
		want     string // ready, unready, missing, ignored
	}{
		{name: "ready pod with sample", pod: readyPod("p", 100), samples: samples("p", 1), resource: cpu, want: "ready"},
		{name: "deleted pod is ignored", pod: deleted, samples: samples("p", 1), resource: cpu, want: "ignored"},
		{name: "failed pod is ignored", pod: withPhase(readyPod("p", 100), corev1.PodFailed), samples: samples("p", 1), resource: cpu, want: "ignored"},
		{name: "pending pod is unready even with a sample", pod: withPhase(readyPod("p", 100), corev1.PodPending), samples: samples("p", 1), resource: cpu, want: "unready"},
		{name: "pending pod without sample is unready, not missing", pod: withPhase(readyPod("p", 100), corev1.PodPending), samples: PodSamples{}, resource: cpu, want: "unready"},
		{name: "running pod without sample is missing", pod: readyPod("p", 100), samples: PodSamples{}, resource: cpu, want: "missing"},
		{name: "cpu: no Ready condition is unready", pod: noCond, samples: samples("p", 1), resource: cpu, want: "unready"},
		{name: "cpu: no start time is unready", pod: noStart, samples: samples("p", 1), resource: cpu, want: "unready"},
		{name: "memory: no Ready condition is ready", pod: noCond, samples: samples("p", 1), resource: corev1.ResourceMemory, want: "ready"},
		{name: "custom metric: never ready pod is ready", pod: neverReadyPod("p", 100), samples: samples("p", 1), resource: "", want: "ready"},
		{name: "cpu init period: Ready False is unready", pod: young(corev1.ConditionFalse, 50*time.Second), samples: samples("p", 1), resource: cpu, want: "unready"},
		// transition 30s ago + 60s window = 30s in the future, the sample (now) is before it.
		{name: "cpu init period: sample window overlaps transition is unready", pod: young(corev1.ConditionTrue, 30*time.Second), samples: samples("p", 1), resource: cpu, want: "unready"},
		// transition 60s ago + 60s window = now: the sample is not before it.
		{name: "cpu init period: sample exactly one window after transition is ready", pod: young(corev1.ConditionTrue, 60*time.Second), samples: samples("p", 1), resource: cpu, want: "ready"},
		{name: "cpu init period: Ready Unknown with full window is ready", pod: young(corev1.ConditionUnknown, 60*time.Second), samples: samples("p", 1), resource: cpu, want: "ready"},
		// start + 30s delay is after a transition 10s after start: never became ready.
		{name: "after init: Ready False never ready is unready", pod: old(corev1.ConditionFalse, start.Add(10*time.Second)), samples: samples("p", 1), resource: cpu, want: "unready"},
		// start + 30s equals the transition: not after it, so it was ready once.
		{name: "after init: Ready False at exactly the delay is ready", pod: old(corev1.ConditionFalse, start.Add(30*time.Second)), samples: samples("p", 1), resource: cpu, want: "ready"},
		{name: "after init: Ready False after having been ready is ready", pod: old(corev1.ConditionFalse, start.Add(5*time.Minute)), samples: samples("p", 1), resource: cpu, want: "ready"},
		{name: "after init: Ready True recently transitioned is ready", pod: old(corev1.ConditionTrue, testNow.Add(-time.Second)), samples: samples("p", 1), resource: cpu, want: "ready"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := cfg.GroupPods([]Pod{tt.pod}, tt.samples, tt.resource, testNow)
			got := "ready"
			switch {
			case g.Ignored["p"]:
				got = "ignored"
			case g.Unready["p"]:
				got = "unready"
			case g.Missing["p"]:
				got = "missing"
			}
			if got != tt.want {
				t.Fatalf("pod grouped as %s, want %s", got, tt.want)
			}
			wantReady := 0
			if tt.want == "ready" {
				wantReady = 1
			}
			if g.ReadyCount != wantReady {
				t.Errorf("ReadyCount = %d, want %d", g.ReadyCount, wantReady)
			}
		})
	}
}

func TestReadyPodCount(t *testing.T) {
	unknown := readyPod("c", 1)
	unknown.Ready.Status = corev1.ConditionUnknown
	tests := []struct {
		name    string
		pods    []Pod
		want    int64
		wantErr string
	}{
		{name: "empty list is an error", pods: nil, wantErr: "no pods returned by selector while calculating replica count"},
		{name: "counts Running and Ready=True only", pods: []Pod{
			readyPod("a", 1), withPhase(readyPod("b", 1), corev1.PodPending), unknown, neverReadyPod("d", 1), readyPod("e", 1),
		}, want: 2},
		{name: "no ready pod counts zero", pods: []Pod{neverReadyPod("a", 1)}, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadyPodCount(tt.pods)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}
