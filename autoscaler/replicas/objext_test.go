package replicas

import (
	"math"
	"testing"
)

func TestObjectAndExternalValue(t *testing.T) {
	three := podsWithRequests(1, 1, 1)
	oneReadyOfThree := []Pod{readyPod("a", 1), neverReadyPod("b", 1), neverReadyPod("c", 1)}
	noneReady := []Pod{neverReadyPod("a", 1)}
	tests := []struct {
		name     string
		external bool
		spec     int32
		usage    int64   // object
		values   []int64 // external
		target   int64
		tol      Tolerances
		pods     []Pod
		want     ValueProposal
		wantErr  string
	}{
		// Worked example 11: 20/15 = 1.333 with 3 ready pods: ceil(4) = 4.
		{name: "ex11 object value", spec: 3, usage: 20000, target: 15000, tol: tol(0.1), pods: three,
			want: ValueProposal{Replicas: 4, Usage: 20000}},
		// Worked example 13: 8.6/4.4 = 1.9545 with 1 ready pod: ceil(1.95) = 2.
		{name: "ex13 external value", external: true, spec: 1, values: []int64{8600}, target: 4400, tol: tol(0.1), pods: podsWithRequests(1),
			want: ValueProposal{Replicas: 2, Usage: 8600}},
		{name: "external value sums series", external: true, spec: 1, values: []int64{3000, 5600}, target: 4400, tol: tol(0.1), pods: podsWithRequests(1),
			want: ValueProposal{Replicas: 2, Usage: 8600}},
		// Only Running+Ready pods count: 20/10 * 1 = 2, although spec is 3.
		{name: "only ready pods count", spec: 3, usage: 20000, target: 10000, tol: tol(0.1), pods: oneReadyOfThree,
			want: ValueProposal{Replicas: 2, Usage: 20000}},
		{name: "within tolerance keeps spec without looking at pods", spec: 3, usage: 10500, target: 10000, tol: tol(0.1), pods: nil,
			want: ValueProposal{Replicas: 3, Usage: 10500, WithinTolerance: true}},
		{name: "zero ready pods proposes zero", spec: 2, usage: 30000, target: 10000, tol: tol(0.1), pods: noneReady,
			want: ValueProposal{Replicas: 0, Usage: 30000}},
		{name: "no pods is an error", spec: 2, usage: 30000, target: 10000, tol: tol(0.1), pods: nil,
			wantErr: "unable to calculate ready pods: no pods returned by selector while calculating replica count"},
		// From zero: ceil(ratio), no tolerance, no pods.
		{name: "from zero scales to ceil(ratio)", spec: 0, usage: 10500, target: 10000, tol: tol(0.1), pods: nil,
			want: ValueProposal{Replicas: 2, Usage: 10500}},
		{name: "from zero with zero usage stays zero", external: true, spec: 0, values: []int64{0}, target: 10000, tol: tol(0.1),
			want: ValueProposal{Replicas: 0, Usage: 0}},
		// ratio*ready beyond MaxInt32 is capped.
		{name: "capped at MaxInt32", external: true, spec: 1, values: []int64{math.MaxInt64}, target: 1, tol: tol(0.1), pods: podsWithRequests(1),
			want: ValueProposal{Replicas: math.MaxInt32, Usage: math.MaxInt64}},
		{name: "external sum saturates", external: true, spec: 1, values: []int64{math.MaxInt64 - 1, 5}, target: 1000, tol: tol(0.1), pods: podsWithRequests(1),
			want: ValueProposal{Replicas: math.MaxInt32, Usage: math.MaxInt64}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				got ValueProposal
				err error
			)
			if tt.external {
				got, err = ExternalValue(tt.spec, tt.values, tt.target, tt.tol, tt.pods)
			} else {
				got, err = ObjectValue(tt.spec, tt.usage, tt.target, tt.tol, tt.pods)
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
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestObjectAndExternalAverageValue(t *testing.T) {
	tests := []struct {
		name     string
		external bool
		status   int32
		usage    int64
		values   []int64
		target   int64
		tol      Tolerances
		want     ValueProposal
	}{
		// Worked example 12: 20/(5*3) = 1.333: ceil(20/5) = 4; status ceil(20/3).
		{name: "ex12 object average value", status: 3, usage: 20000, target: 5000, tol: tol(0.1),
			want: ValueProposal{Replicas: 4, Usage: 6667}},
		// Worked example 14: 8.6/(2.15*3) = 1.333: ceil(8.6/2.15) = 4; status ceil(8600/3).
		{name: "ex14 external average value", external: true, status: 3, values: []int64{8600}, target: 2150, tol: tol(0.1),
			want: ValueProposal{Replicas: 4, Usage: 2867}},
		// 10.5/(5*2) = 1.05: within, keep status replicas.
		{name: "within tolerance keeps status replicas", status: 2, usage: 10500, target: 5000, tol: tol(0.1),
			want: ValueProposal{Replicas: 2, Usage: 5250, WithinTolerance: true}},
		// Scale down: 3/(5*3) = 0.2: ceil(0.6) = 1.
		{name: "scale down", external: true, status: 3, values: []int64{1000, 2000}, target: 5000, tol: tol(0.1),
			want: ValueProposal{Replicas: 1, Usage: 1000}},
		// 0/(5*3) = 0: ceil(0) = 0 replicas proposed.
		{name: "zero usage proposes zero", status: 3, usage: 0, target: 5000, tol: tol(0.1),
			want: ValueProposal{Replicas: 0, Usage: 0}},
		{name: "external capped at MaxInt32", external: true, status: 1, values: []int64{math.MaxInt64}, target: 1, tol: tol(0.1),
			want: ValueProposal{Replicas: math.MaxInt32, Usage: math.MaxInt64}},
		// The running sum going negative is taken as an overflow (upstream quirk).
		{name: "external negative running sum saturates", external: true, status: 1, values: []int64{-5}, target: 1, tol: tol(0.1),
			want: ValueProposal{Replicas: math.MaxInt32, Usage: math.MaxInt64}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got ValueProposal
			if tt.external {
				got = ExternalAverageValue(tt.status, tt.values, tt.target, tt.tol)
			} else {
				got = ObjectAverageValue(tt.status, tt.usage, tt.target, tt.tol)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestExternalSums(t *testing.T) {
	tests := []struct {
		name        string
		values      []int64
		wantValue   int64
		wantAverage int64
	}{
		{name: "plain sum", values: []int64{1, 2, 3}, wantValue: 6, wantAverage: 6},
		{name: "overflow saturates both", values: []int64{math.MaxInt64, 1}, wantValue: math.MaxInt64, wantAverage: math.MaxInt64},
		// Value path: negative values are summed; AverageValue path: a negative
		// running sum is read as an overflow.
		{name: "negative values differ", values: []int64{5, -10, 20}, wantValue: 15, wantAverage: math.MaxInt64},
		{name: "negative value absorbed", values: []int64{10, -5}, wantValue: 5, wantAverage: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SumExternalValue(tt.values); got != tt.wantValue {
				t.Errorf("SumExternalValue = %d, want %d", got, tt.wantValue)
			}
			if got := SumExternalAverageValue(tt.values); got != tt.wantAverage {
				t.Errorf("SumExternalAverageValue = %d, want %d", got, tt.wantAverage)
			}
		})
	}
}
