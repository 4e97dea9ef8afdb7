package replicas

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// uniformPods returns n ready pods named p0..p(n-1) with the same cpu request.
func uniformPods(n int, reqMilli int64) []Pod {
	pods := make([]Pod, n)
	for i := range pods {
		pods[i] = readyPod(fmt.Sprintf("p%d", i), reqMilli)
	}
	return pods
}

func podsWithRequests(reqMilli ...int64) []Pod {
	pods := make([]Pod, len(reqMilli))
	for i, r := range reqMilli {
		pods[i] = readyPod(fmt.Sprintf("p%d", i), r)
	}
	return pods
}

func uniformSamples(n int, valueMilli int) PodSamples {
	s := PodSamples{}
	for i := 0; i < n; i++ {
		s[fmt.Sprintf("p%d", i)] = sample(int64(valueMilli))
	}
	return s
}

func TestResourceUtilization(t *testing.T) {
	ex2 := podsWithRequests(2000, 2000, 2000)
	ex2[0] = neverReadyPod("p0", 2000)
	ex3 := append(podsWithRequests(2000, 2000),
		withPhase(readyPod("f0", 2000), corev1.PodFailed), withPhase(readyPod("f1", 2000), corev1.PodFailed))
	ex7 := podsWithRequests(2000, 2000, 2000)
	ex7[0] = neverReadyPod("p0", 2000)
	unreadyLow := podsWithRequests(1000, 1000, 1000)
	unreadyLow[0] = neverReadyPod("p0", 1000)
	zeroReq := podsWithRequests(0, 0)
	noReq := podsWithRequests(1000, 1000)
	noReq[1].Containers[0].Requests = nil
	allUnready := []Pod{neverReadyPod("p0", 1000), withPhase(readyPod("p1", 1000), corev1.PodPending)}

	tests := []struct {
		name            string
		current         int32
		pods            []Pod
		samples         PodSamples
		target          int32
		tol             Tolerances
		wantReplicas    int32
		wantUtilization int32
		wantRaw         int64
		// wantWithin: the ratio was within the tolerance (not another
		// reason to keep the current count, such as a direction flip).
		wantWithin bool
		wantErr    string
	}{
		// Worked example 1: 3000/6000 = 50%, ratio 50/30, ceil(1.67*3) = 5.
		{name: "ex1 scale up", current: 3, pods: podsWithRequests(2000, 2000, 2000),
			samples: samples("p0", 600, "p1", 1000, "p2", 1400), target: 30, tol: tol(0.1),
			wantReplicas: 5, wantUtilization: 50, wantRaw: 1000},
		// Worked example 2: p0 never ready: 2400/4000 = 60%; p0 at 0: 2400/6000 = 40%,
		// ratio 40/30, ceil(1.33*3) = 4.
		{name: "ex2 unready pod counted at zero on scale up", current: 3, pods: ex2,
			samples: samples("p0", 600, "p1", 1000, "p2", 1400), target: 30, tol: tol(0.1),
			wantReplicas: 4, wantUtilization: 60, wantRaw: 1200},
		// Worked example 3: failed pods are ignored: 2400/4000 = 60%, ceil(2*2) = 4.
		{name: "ex3 failed pods ignored", current: 2, pods: ex3,
			samples: samples("p0", 1000, "p1", 1400, "f0", 100, "f1", 100), target: 30, tol: tol(0.1),
			wantReplicas: 4, wantUtilization: 60, wantRaw: 1200},
		// Worked example 4: 2800/10000 = 28%, ratio 0.56, ceil(2.8) = 3.
		{name: "ex4 scale down", current: 5, pods: podsWithRequests(2000, 2000, 2000, 2000, 2000),
			samples: samples("p0", 200, "p1", 600, "p2", 1000, "p3", 500, "p4", 500), target: 50, tol: tol(0.1),
			wantReplicas: 3, wantUtilization: 28, wantRaw: 560},
		// Worked example 5: 6120/6000 = 102%, ratio 1.02 within tolerance.
		{name: "ex5 within tolerance", current: 3, pods: podsWithRequests(1800, 2000, 2200),
			samples: samples("p0", 2020, "p1", 2060, "p2", 2040), target: 100, tol: tol(0.1),
			wantReplicas: 3, wantUtilization: 102, wantRaw: 2040, wantWithin: true},
		// Worked example 6: 990/4000 = 24%; missing pods at 100% of 2000m:
		// 4990/8000 = 62%, ceil(0.62*4) = 3.
		{name: "ex6 missing pods at full request on scale down", current: 4, pods: podsWithRequests(2000, 2000, 2000, 2000),
			samples: samples("p0", 800, "p1", 190), target: 100, tol: tol(0.1),
			wantReplicas: 3, wantUtilization: 24, wantRaw: 495},
		// Worked example 7: p0 unready, p1 900/2000 = 45% -> ratio 0.9 (scale down
		// side); p2 missing at 100%: 2900/4000 = 72% -> ratio 1.44 flips direction.
		{name: "ex7 direction flip keeps current", current: 3, pods: ex7,
			samples: samples("p0", 200, "p1", 900), target: 50, tol: tol(0.1),
			wantReplicas: 3, wantUtilization: 45, wantRaw: 900},
		// Worked example 8: 3900/6000 = 65%, ratio 0.65; 1-0.36 = 0.64 <= 0.65.
		{name: "ex8 down tolerance 0.36 keeps", current: 3, pods: podsWithRequests(1800, 2000, 2200),
			samples: samples("p0", 1320, "p1", 1280, "p2", 1300), target: 100, tol: Tolerances{Down: 0.36, Up: 0.1},
			wantReplicas: 3, wantUtilization: 65, wantRaw: 1300, wantWithin: true},
		// ... 1-0.34 = 0.66 > 0.65: ceil(0.65*3) = ceil(1.95) = 2.
		{name: "ex8 down tolerance 0.34 scales", current: 3, pods: podsWithRequests(1800, 2000, 2200),
			samples: samples("p0", 1320, "p1", 1280, "p2", 1300), target: 100, tol: Tolerances{Down: 0.34, Up: 0.1},
			wantReplicas: 2, wantUtilization: 65, wantRaw: 1300},
		// Utilization is truncated: 1999/2000 = 99.95% -> 99.
		{name: "utilization truncation", current: 2, pods: podsWithRequests(1000, 1000),
			samples: samples("p0", 1000, "p1", 999), target: 100, tol: tol(0),
			wantReplicas: 2, wantUtilization: 99, wantRaw: 999},
		// 110% of a 100% target is exactly 1+0.1: within, no scale up.
		{name: "ratio exactly at upper tolerance bound", current: 2, pods: podsWithRequests(1000, 1000),
			samples: samples("p0", 1100, "p1", 1100), target: 100, tol: tol(0.1),
			wantReplicas: 2, wantUtilization: 110, wantRaw: 1100, wantWithin: true},
		// 111%: ceil(1.11*2) = 3.
		{name: "ratio just above upper bound", current: 2, pods: podsWithRequests(1000, 1000),
			samples: samples("p0", 1110, "p1", 1110), target: 100, tol: tol(0.1),
			wantReplicas: 3, wantUtilization: 111, wantRaw: 1110},
		// 90%: exactly 1-0.1, within.
		{name: "ratio exactly at lower tolerance bound", current: 10, pods: uniformPods(10, 1000),
			samples: uniformSamples(10, 900), target: 100, tol: tol(0.1),
			wantReplicas: 10, wantUtilization: 90, wantRaw: 900, wantWithin: true},
		// 89%: ceil(0.89*10) = ceil(8.9) = 9.
		{name: "ratio just below lower bound", current: 10, pods: uniformPods(10, 1000),
			samples: uniformSamples(10, 890), target: 100, tol: tol(0.1),
			wantReplicas: 9, wantUtilization: 89, wantRaw: 890},
		// float64(110)/100*100 = 110.00000000000001, so ceil gives 111, not 110.
		{name: "float artefact at 100 pods", current: 100, pods: uniformPods(100, 1000),
			samples: uniformSamples(100, 1100), target: 100, tol: tol(0.05),
			wantReplicas: 111, wantUtilization: 110, wantRaw: 1100},
		// float64(110)/100*1000 = 1100 exactly.
		{name: "large replica count without artefact", current: 1000, pods: uniformPods(1000, 1000),
			samples: uniformSamples(1000, 1100), target: 100, tol: tol(0.05),
			wantReplicas: 1100, wantUtilization: 110, wantRaw: 1100},
		// 50/30*3000 = 5000 exactly.
		{name: "large scale up", current: 3000, pods: uniformPods(3000, 2000),
			samples: uniformSamples(3000, 1000), target: 30, tol: tol(0.1),
			wantReplicas: 5000, wantUtilization: 50, wantRaw: 1000},
		// Scale up with a missing pod at 0: 3600/3000 = 120%, ceil(1.2*3) = 4.
		{name: "missing pod at zero on scale up", current: 3, pods: podsWithRequests(1000, 1000, 1000),
			samples: samples("p0", 1800, "p1", 1800), target: 100, tol: tol(0.1),
			wantReplicas: 4, wantUtilization: 180, wantRaw: 1800},
		// 3000/3000 = 100% after filling the missing pod with 0: within tolerance.
		{name: "missing pod at zero makes it within tolerance", current: 3, pods: podsWithRequests(1000, 1000, 1000),
			samples: samples("p0", 1500, "p1", 1500), target: 100, tol: tol(0.1),
			wantReplicas: 3, wantUtilization: 150, wantRaw: 1500, wantWithin: true},
		// Target above 100%: a missing pod is assumed at target (200%) of its request:
		// 1000/2000 = 50% -> 0.25; p2 at 2000m: 3000/3000 = 100% -> 0.5, ceil(1.5) = 2.
		{name: "missing pod at target when target above 100", current: 3, pods: podsWithRequests(1000, 1000, 1000),
			samples: samples("p0", 500, "p1", 500), target: 200, tol: tol(0.1),
			wantReplicas: 2, wantUtilization: 50, wantRaw: 500},
		// 4 pods but current 2: 200/2000 = 10%; missing at 100%: 2200/4000 = 55%,
		// ceil(0.55*4) = 3 > current on a scale down: keep current.
		{name: "more samples than current would scale against direction", current: 2, pods: podsWithRequests(1000, 1000, 1000, 1000),
			samples: samples("p0", 100, "p1", 100), target: 100, tol: tol(0.1),
			wantReplicas: 2, wantUtilization: 10, wantRaw: 100},
		// Unready pods only matter on a scale up: 1000/2000 = 50%, ceil(0.5*2) = 1.
		{name: "unready pod ignored on scale down", current: 3, pods: unreadyLow,
			samples: samples("p0", 3000, "p1", 500, "p2", 500), target: 100, tol: tol(0.1),
			wantReplicas: 1, wantUtilization: 50, wantRaw: 500},
		// A sample of a pod not in the list is skipped by the ratio but counted in
		// len(samples): 2000/2000 = 100% -> ratio 2; p2 missing at 0: 2000/3000 =
		// 66% -> 1.32; ceil(1.32*4) = 6.
		{name: "sample of unknown pod counts in the replica count", current: 3, pods: podsWithRequests(1000, 1000, 1000),
			samples: samples("p0", 1000, "p1", 1000, "gone", 5000), target: 50, tol: tol(0.1),
			wantReplicas: 6, wantUtilization: 100, wantRaw: 1000},
		{name: "no pods", current: 3, pods: nil, samples: samples("p0", 1), target: 50, tol: tol(0.1),
			wantErr: "no pods returned by selector while calculating replica count"},
		{name: "only unready pods", current: 2, pods: allUnready, samples: samples("p0", 1, "p1", 1), target: 50, tol: tol(0.1),
			wantErr: "did not receive metrics for targeted pods (pods might be unready)"},
		{name: "no samples at all", current: 2, pods: podsWithRequests(1000, 1000), samples: PodSamples{}, target: 50, tol: tol(0.1),
			wantErr: "did not receive metrics for targeted pods (pods might be unready)"},
		{name: "zero requests", current: 2, pods: zeroReq, samples: samples("p0", 1, "p1", 1), target: 50, tol: tol(0.1),
			wantErr: "no metrics returned matched known pods"},
		{name: "missing request", current: 2, pods: noReq, samples: samples("p0", 1, "p1", 1), target: 50, tol: tol(0.1),
			wantErr: "missing request for cpu in container app of Pod p1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := PodMetricInput{CurrentReplicas: tt.current, Pods: tt.pods, Samples: tt.samples, Tolerances: tt.tol, Now: testNow}
			before := len(tt.samples)
			got, err := DefaultConfig().ResourceUtilization(in, cpu, "", tt.target)
			if len(tt.samples) != before {
				t.Errorf("input samples modified")
			}
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := UtilizationProposal{Replicas: tt.wantReplicas, Utilization: tt.wantUtilization, RawAverage: tt.wantRaw, WithinTolerance: tt.wantWithin}
			if got != want {
				t.Errorf("got %+v, want %+v", got, want)
			}
		})
	}
}

func TestContainerResourceUtilization(t *testing.T) {
	two := func(name string) Pod {
		p := readyPod(name, 0)
		p.Containers = []Container{{Name: "app", Requests: reqs(500)}, {Name: "proxy", Requests: reqs(100)}}
		return p
	}
	usage := []PodUsage{
		{Name: "a", Timestamp: testNow, Containers: []ContainerUsage{{Name: "app", Usage: cpuUsage(400)}, {Name: "proxy", Usage: cpuUsage(100)}}},
		{Name: "b", Timestamp: testNow, Containers: []ContainerUsage{{Name: "app", Usage: cpuUsage(400)}, {Name: "proxy", Usage: cpuUsage(10)}}},
	}
	tests := []struct {
		name      string
		container string
		target    int32
		want      UtilizationProposal
	}{
		// app: 800/1000 = 80% of a 40% target: ceil(2*2) = 4.
		{name: "app container", container: "app", target: 40, want: UtilizationProposal{Replicas: 4, Utilization: 80, RawAverage: 400}},
		// proxy: 110/200 = 55% of 50%: ratio 1.1 within tolerance.
		{name: "proxy container", container: "proxy", target: 50, want: UtilizationProposal{Replicas: 2, Utilization: 55, RawAverage: 55, WithinTolerance: true}},
		// whole pod: 910/1200 = 75% of 50%: ceil(1.5*2) = 3.
		{name: "whole pod", container: "", target: 50, want: UtilizationProposal{Replicas: 3, Utilization: 75, RawAverage: 455}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _, err := ResourceSamples(usage, cpu, tt.container)
			if err != nil {
				t.Fatal(err)
			}
			in := PodMetricInput{CurrentReplicas: 2, Pods: []Pod{two("a"), two("b")}, Samples: s, Tolerances: tol(0.1), Now: testNow}
			got, err := DefaultConfig().ResourceUtilization(in, cpu, tt.container, tt.target)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestPlainAverage(t *testing.T) {
	withUnready := podsWithRequests(1, 1, 1)
	withUnready[0] = neverReadyPod("p0", 1)
	tests := []struct {
		name      string
		current   int32
		pods      []Pod
		samples   PodSamples
		target    int64
		tol       Tolerances
		resource  corev1.ResourceName // "" = Pods metric
		want      ValueProposal
		wantError string
	}{
		// Worked example 9: average 20 of 15: ratio 4/3, ceil(4/3*3) = 4.
		{name: "ex9 pods metric scale up", current: 3, pods: podsWithRequests(1, 1, 1),
			samples: samples("p0", 20000, "p1", 10000, "p2", 30000), target: 15000, tol: tol(0.1),
			want: ValueProposal{Replicas: 4, Usage: 20000}},
		// Worked example 10: 12 of 20: ratio 0.6, ceil(0.6*5) = 3.
		{name: "ex10 pods metric scale down", current: 5, pods: podsWithRequests(1, 1, 1, 1, 1),
			samples: uniformSamples(5, 12000), target: 20000, tol: tol(0.1),
			want: ValueProposal{Replicas: 3, Usage: 12000}},
		// The average is an integer division: 4/3 = 1 milli, exactly the target.
		{name: "average truncated before the ratio", current: 3, pods: podsWithRequests(1, 1, 1),
			samples: samples("p0", 1, "p1", 1, "p2", 2), target: 1, tol: tol(0),
			want: ValueProposal{Replicas: 3, Usage: 1, WithinTolerance: true}},
		// ratio 1.1 exactly: within.
		{name: "exactly at tolerance", current: 3, pods: podsWithRequests(1, 1, 1),
			samples: uniformSamples(3, 1100000000), target: 1000000000, tol: tol(0.1),
			want: ValueProposal{Replicas: 3, Usage: 1100000000, WithinTolerance: true}},
		// ratio 1.100000001: outside, ceil(3.300000003) = 4.
		{name: "just above tolerance", current: 3, pods: podsWithRequests(1, 1, 1),
			samples: uniformSamples(3, 1100000001), target: 1000000000, tol: tol(0.1),
			want: ValueProposal{Replicas: 4, Usage: 1100000001}},
		// Missing pods at the target on a scale down: 5000 of 10000 -> 0.5;
		// (5000+5000+10000+10000)/4 = 7500 -> 0.75, ceil(3) = 3.
		{name: "missing pods at target on scale down", current: 4, pods: podsWithRequests(1, 1, 1, 1),
			samples: samples("p0", 5000, "p1", 5000), target: 10000, tol: tol(0.1),
			want: ValueProposal{Replicas: 3, Usage: 5000}},
		// Pods metrics have no readiness rules: the never ready pod counts.
		// 60000/3 = 20000 of 10000: ceil(2*3) = 6.
		{name: "pods metric ignores cpu readiness", current: 3, pods: withUnready,
			samples: samples("p0", 20000, "p1", 20000, "p2", 20000), target: 10000, tol: tol(0.1),
			want: ValueProposal{Replicas: 6, Usage: 20000}},
		// Resource cpu AverageValue applies them: p0 dropped, then counted at 0 on the
		// scale up: 40000/3 = 13333 -> 1.3333, ceil(1.3333*3) = 4.
		{name: "cpu average value applies readiness", current: 3, pods: withUnready,
			samples: samples("p0", 20000, "p1", 20000, "p2", 20000), target: 10000, tol: tol(0.1), resource: cpu,
			want: ValueProposal{Replicas: 4, Usage: 20000}},
		// Resource memory AverageValue: no readiness rules.
		{name: "memory average value ignores readiness", current: 3, pods: withUnready,
			samples: samples("p0", 20000, "p1", 20000, "p2", 20000), target: 10000, tol: tol(0.1), resource: corev1.ResourceMemory,
			want: ValueProposal{Replicas: 6, Usage: 20000}},
		// A sample of a pod not in the list enters the average: (3000+3000+30000)/3.
		{name: "sample of unknown pod enters the average", current: 2, pods: podsWithRequests(1, 1),
			samples: samples("p0", 3000, "p1", 3000, "gone", 30000), target: 6000, tol: tol(0.1),
			want: ValueProposal{Replicas: 4, Usage: 12000}},
		{name: "no pods", current: 1, pods: nil, samples: samples("p0", 1), target: 1, tol: tol(0.1),
			wantError: "no pods returned by selector while calculating replica count"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := PodMetricInput{CurrentReplicas: tt.current, Pods: tt.pods, Samples: tt.samples, Tolerances: tt.tol, Now: testNow}
			var (
				got ValueProposal
				err error
			)
			if tt.resource == "" {
				got, err = DefaultConfig().PodsAverageValue(in, tt.target)
			} else {
				got, err = DefaultConfig().ResourceAverageValue(in, tt.resource, tt.target)
			}
			if tt.wantError != "" {
				if err == nil || err.Error() != tt.wantError {
					t.Fatalf("err = %v, want %q", err, tt.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
