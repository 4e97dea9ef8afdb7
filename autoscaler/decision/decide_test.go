package decision

import (
	"errors"
	"fmt"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/tidal-autoscaler/tidal/autoscaler/behavior"
	"github.com/tidal-autoscaler/tidal/autoscaler/replicas"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func condOf(d []Condition, t autoscalingv2.HorizontalPodAutoscalerConditionType) *Condition {
	var found *Condition
	for i := range d {
		if d[i].Type == t {
			found = &d[i]
		}
	}
	return found
}

func combined(n int32, name string) *Combined {
	c := Combine(3, []MetricOutcome{{Replicas: n, Name: name}})
	return &c
}

func TestDecideBranches(t *testing.T) {
	cfg := DefaultConfig()
	gateOff := DefaultConfig()
	gateOff.ScaleToZero = false
	fatal := Combine(3, []MetricOutcome{failure("FailedGetResourceMetric", errors.New("x"), errors.New("x"))})
	partial := Combine(3, []MetricOutcome{{Replicas: 5, Name: "pods metric rps"}, failure("FailedGetResourceMetric", errors.New("x"), errors.New("x"))})
	empty := Combine(3, nil)

	tests := []struct {
		name           string
		cfg            Config
		in             Input
		metrics        *Combined
		wantNeeds      bool
		wantFailed     bool
		wantRescale    bool
		wantDesired    int32
		wantReason     string
		wantActive     string // ScalingActive reason, "" when not set
		wantRemoveSTZ  bool
		wantErr        bool
		wantNormalized bool
	}{
		{name: "zero replicas: maintenance mode", cfg: cfg, in: Input{CurrentReplicas: 0, MaxReplicas: 10},
			wantActive: "ScalingDisabled"},
		{name: "zero replicas, gate off: condition ScaledToZero removed", cfg: gateOff, in: Input{CurrentReplicas: 0, MaxReplicas: 10, ScaledToZero: true, HasObjectOrExternalMetrics: true},
			wantActive: "ScalingDisabled", wantRemoveSTZ: true},
		{name: "zero replicas, ScaledToZero but min 0 and no object metric: disabled", cfg: cfg,
			in:         Input{CurrentReplicas: 0, MinReplicas: i32(0), MaxReplicas: 10, ScaledToZero: true},
			wantActive: "ScalingDisabled"},
		{name: "above max: clamp without metrics", cfg: cfg, in: Input{CurrentReplicas: 12, MaxReplicas: 10},
			wantRescale: true, wantDesired: 10, wantReason: ReasonAboveMax},
		{name: "below min: clamp without metrics", cfg: cfg, in: Input{CurrentReplicas: 1, MinReplicas: i32(3), MaxReplicas: 10},
			wantRescale: true, wantDesired: 3, wantReason: ReasonBelowMin},
		{name: "below default min of 1 is impossible above zero; in range uses metrics", cfg: cfg, in: Input{CurrentReplicas: 1, MaxReplicas: 10},
			metrics: combined(3, "pods metric rps"), wantNeeds: true, wantRescale: true, wantDesired: 3,
			wantReason: "pods metric rps above target", wantActive: "ValidMetricFound", wantNormalized: true},
		{name: "metrics fatal", cfg: cfg, in: Input{CurrentReplicas: 3, MaxReplicas: 10}, metrics: &fatal,
			wantNeeds: true, wantFailed: true, wantDesired: 0, wantActive: "FailedGetResourceMetric", wantErr: true},
		{name: "metrics partially invalid still scale up", cfg: cfg, in: Input{CurrentReplicas: 3, MaxReplicas: 10}, metrics: &partial,
			wantNeeds: true, wantRescale: true, wantDesired: 5, wantReason: "pods metric rps above target", wantActive: "ValidMetricFound", wantErr: true, wantNormalized: true},
		{name: "scale down reason", cfg: cfg, in: Input{CurrentReplicas: 3, MaxReplicas: 10, Behavior: cfg.Behavior(&autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: i32(0)}})},
			metrics: combined(2, "pods metric rps"), wantNeeds: true, wantRescale: true, wantDesired: 2, wantReason: ReasonAllBelowTarget, wantActive: "ValidMetricFound", wantNormalized: true},
		{name: "no change", cfg: cfg, in: Input{CurrentReplicas: 3, MaxReplicas: 10}, metrics: combined(3, "pods metric rps"),
			wantNeeds: true, wantDesired: 3, wantActive: "ValidMetricFound", wantNormalized: true},
		// Empty spec.metrics (not possible after defaulting): upstream proposes 0.
		{name: "empty metrics propose zero", cfg: cfg, in: Input{CurrentReplicas: 3, MaxReplicas: 10, Behavior: cfg.Behavior(&autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: i32(0)}})},
			metrics: &empty, wantNeeds: true, wantRescale: true, wantDesired: 1, wantReason: ReasonAllBelowTarget, wantNormalized: true},
		// Scale from zero: gate on, ScaledToZero, min 0 and an Object metric.
		{name: "from zero with an object metric", cfg: cfg,
			in:      Input{CurrentReplicas: 0, MinReplicas: i32(0), MaxReplicas: 10, ScaledToZero: true, HasObjectOrExternalMetrics: true},
			metrics: combined(2, "Ingress metric qps"), wantNeeds: true, wantRescale: true, wantDesired: 2,
			wantReason: "Ingress metric qps above target", wantActive: "ValidMetricFound", wantNormalized: true},
		{name: "from zero stays at zero when the metric says zero", cfg: cfg,
			in:      Input{CurrentReplicas: 0, MinReplicas: i32(0), MaxReplicas: 10, ScaledToZero: true, HasObjectOrExternalMetrics: true},
			metrics: combined(0, "Ingress metric qps"), wantNeeds: true, wantDesired: 0, wantActive: "ValidMetricFound", wantNormalized: true},
		// minReplicas raised while scaled to zero, legacy rules: the legacy clamp
		// already raises 0 to min; the rescale reason stays empty as upstream's.
		{name: "from zero, legacy clamp to min", cfg: cfg,
			in:      Input{CurrentReplicas: 0, MinReplicas: i32(2), MaxReplicas: 10, ScaledToZero: true},
			metrics: combined(0, "Ingress metric qps"), wantNeeds: true, wantRescale: true, wantDesired: 2,
			wantReason: "", wantActive: "ValidMetricFound", wantNormalized: true},
		// With behavior there is no direction of change, so no clamp: the
		// from-zero rule raises to min with the below-min reason.
		{name: "from zero, behavior, raised to min", cfg: cfg,
			in:      Input{CurrentReplicas: 0, MinReplicas: i32(2), MaxReplicas: 10, ScaledToZero: true, Behavior: cfg.Behavior(&autoscalingv2.HorizontalPodAutoscalerBehavior{})},
			metrics: combined(0, "Ingress metric qps"), wantNeeds: true, wantRescale: true, wantDesired: 2,
			wantReason: ReasonBelowMin, wantActive: "ValidMetricFound", wantNormalized: true},
		// Legacy limit from 0 is 4; min 5 raises it again.
		{name: "from zero above the legacy limit is raised to min", cfg: cfg,
			in:      Input{CurrentReplicas: 0, MinReplicas: i32(5), MaxReplicas: 10, ScaledToZero: true},
			metrics: combined(9, "Ingress metric qps"), wantNeeds: true, wantRescale: true, wantDesired: 5,
			wantReason: "Ingress metric qps above target", wantActive: "ValidMetricFound", wantNormalized: true},
		{name: "from zero needs the gate", cfg: gateOff,
			in:         Input{CurrentReplicas: 0, MinReplicas: i32(2), MaxReplicas: 10, ScaledToZero: true},
			wantActive: "ScalingDisabled", wantRemoveSTZ: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Now = now
			if got := tt.cfg.NeedsMetrics(tt.in); got != tt.wantNeeds {
				t.Errorf("NeedsMetrics = %v, want %v", got, tt.wantNeeds)
			}
			var h behavior.History
			d := tt.cfg.Decide(tt.in, tt.metrics, &h)
			if d.MetricsFailed != tt.wantFailed || d.Rescale != tt.wantRescale || d.Reason != tt.wantReason || d.RemoveScaledToZero != tt.wantRemoveSTZ {
				t.Errorf("got %+v", d)
			}
			if !tt.wantFailed && d.DesiredReplicas != tt.wantDesired {
				t.Errorf("desired %d, want %d", d.DesiredReplicas, tt.wantDesired)
			}
			if (d.Err != nil) != tt.wantErr {
				t.Errorf("err = %v, want error %v", d.Err, tt.wantErr)
			}
			if (d.Normalization != nil) != tt.wantNormalized || d.MetricsComputed != tt.wantNormalized {
				t.Errorf("normalization %+v computed %v, want %v", d.Normalization, d.MetricsComputed, tt.wantNormalized)
			}
			active := condOf(d.Conditions, autoscalingv2.ScalingActive)
			switch {
			case tt.wantActive == "" && active != nil:
				t.Errorf("unexpected ScalingActive %+v", active)
			case tt.wantActive != "" && (active == nil || active.Reason != tt.wantActive):
				t.Errorf("ScalingActive %+v, want %s", active, tt.wantActive)
			}
			if len(h.Recommendations) == 0 || h.Recommendations[0].Replicas != tt.in.CurrentReplicas {
				t.Errorf("initial recommendation not recorded: %+v", h.Recommendations)
			}
		})
	}
}

// pod is Running and Ready for long, with one container requesting reqMilli cpu.
func pod(name string, reqMilli int64) replicas.Pod {
	start := now.Add(-time.Hour)
	return replicas.Pod{
		Name: name, Phase: corev1.PodRunning, StartTime: &start,
		Ready:      &replicas.ReadyCondition{Status: corev1.ConditionTrue, LastTransitionTime: start.Add(time.Minute)},
		Containers: []replicas.Container{{Name: "app", Requests: map[corev1.ResourceName]int64{corev1.ResourceCPU: reqMilli}}},
	}
}

// cpuScenario runs the whole pure pipeline for one cpu utilization metric.
func cpuScenario(t *testing.T, cfg Config, in Input, history *behavior.History, reqs, usage []int64, target int32) Decision {
	t.Helper()
	var pods []replicas.Pod
	s := replicas.PodSamples{}
	for i := range reqs {
		name := fmt.Sprintf("p%d", i)
		pods = append(pods, pod(name, reqs[i]))
		s[name] = replicas.Sample{Value: usage[i], Timestamp: now, Window: time.Minute}
	}
	spec := cpuUtilization(target)
	if !cfg.NeedsMetrics(in) {
		t.Fatal("metrics not needed")
	}
	var outcome MetricOutcome
	p, err := cfg.Calculator.ResourceUtilization(replicas.PodMetricInput{
		CurrentReplicas: in.CurrentReplicas, Pods: pods, Samples: s, Tolerances: cfg.Tolerances(in.Behavior), Now: in.Now,
	}, corev1.ResourceCPU, "", target)
	if err != nil {
		outcome = Failed(spec, err)
	} else {
		outcome = Succeeded(spec, p.Replicas)
	}
	c := Combine(in.CurrentReplicas, []MetricOutcome{outcome})
	return cfg.Decide(in, &c, history)
}

func TestWorkedControllerExamples(t *testing.T) {
	cfg := DefaultConfig()
	ex17 := cfg.Behavior(&autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: &autoscalingv2.HPAScalingRules{
		Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 700, PeriodSeconds: 60}},
	}})
	ex18 := cfg.Behavior(&autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{
		StabilizationWindowSeconds: i32(0),
		Policies:                   []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 50, PeriodSeconds: 120}},
	}})

	tests := []struct {
		name        string
		in          Input
		history     behavior.History
		reqs, usage []int64
		target      int32
		metrics     *Combined // used instead of the cpu pipeline when set
		wantDesired int32
		wantLimited corev1.ConditionStatus
		wantReason  string
		wantRescale string
	}{
		// Example 15: 18500m/3000m = 616%, 616/90 = 6.84, ceil(20.5) = 21; legacy
		// limit max(6,4) = 6 >= max 5: TooManyReplicas.
		{name: "ex15 clamped to max", in: Input{CurrentReplicas: 3, MinReplicas: i32(2), MaxReplicas: 5},
			reqs: []int64{900, 1000, 1100}, usage: []int64{8000, 9500, 1000}, target: 90,
			wantDesired: 5, wantLimited: corev1.ConditionTrue, wantReason: behavior.ReasonTooManyReplicas,
			wantRescale: "cpu resource utilization (percentage of request) above target"},
		// Example 16: legacy, 1000 wanted from 3 with max 2000: 2*3 = 6.
		{name: "ex16 legacy scale up limit", in: Input{CurrentReplicas: 3, MaxReplicas: 2000},
			metrics:     combined(1000, "pods metric rps"),
			wantDesired: 6, wantLimited: corev1.ConditionTrue, wantReason: behavior.ReasonScaleUpLimit,
			wantRescale: "pods metric rps above target"},
		// Example 17: 600m/300m = 200% of 10%: ratio 20, 60 wanted; ceil(3*8) = 24.
		{name: "ex17 percent policy limits the scale up", in: Input{CurrentReplicas: 3, MaxReplicas: 100, Behavior: ex17},
			reqs: []int64{100, 100, 100}, usage: []int64{100, 200, 300}, target: 10,
			wantDesired: 24, wantLimited: corev1.ConditionTrue, wantReason: behavior.ReasonScaleUpLimit,
			wantRescale: "cpu resource utilization (percentage of request) above target"},
		// Example 18: 12 removed within 120s: periodStart 112, trunc(56) = 56.
		{name: "ex18 percent policy over a period of scale downs", in: Input{CurrentReplicas: 100, MaxReplicas: 200, Behavior: ex18},
			history: behavior.History{ScaleDownEvents: []behavior.ScaleEvent{
				{Change: 5, Time: now.Add(-100 * time.Second)}, {Change: 7, Time: now.Add(-20 * time.Second)}, {Change: 30, Time: now.Add(-200 * time.Second)},
			}},
			metrics:     combined(0, "pods metric rps"),
			wantDesired: 56, wantLimited: corev1.ConditionTrue, wantReason: behavior.ReasonScaleDownLimit,
			wantRescale: ReasonAllBelowTarget},
		// Legacy down-stabilization over the decision: a recommendation of 8 a
		// minute ago holds a proposal of 4.
		{name: "legacy stabilization holds the scale down", in: Input{CurrentReplicas: 8, MaxReplicas: 10},
			history: behavior.History{Recommendations: []behavior.Recommendation{{Replicas: 8, Time: now.Add(-time.Minute)}}},
			metrics: combined(4, "pods metric rps"), wantDesired: 8, wantLimited: corev1.ConditionFalse, wantReason: behavior.ReasonDesiredWithinRange,
			wantRescale: ReasonAllBelowTarget},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Now = now
			h := tt.history.Clone()
			var d Decision
			if tt.metrics != nil {
				d = cfg.Decide(tt.in, tt.metrics, &h)
			} else {
				d = cpuScenario(t, cfg, tt.in, &h, tt.reqs, tt.usage, tt.target)
			}
			if d.MetricsFailed {
				t.Fatalf("metrics failed: %v", d.Err)
			}
			if d.DesiredReplicas != tt.wantDesired || d.Reason != tt.wantRescale {
				t.Errorf("desired %d reason %q, want %d %q", d.DesiredReplicas, d.Reason, tt.wantDesired, tt.wantRescale)
			}
			limited := condOf(d.Conditions, autoscalingv2.ScalingLimited)
			if limited == nil || limited.Status != tt.wantLimited || limited.Reason != tt.wantReason {
				t.Errorf("ScalingLimited %+v, want %s/%s", limited, tt.wantLimited, tt.wantReason)
			}
			if able := condOf(d.Conditions, autoscalingv2.AbleToScale); able == nil || able.Status != corev1.ConditionTrue {
				t.Errorf("AbleToScale %+v", able)
			}
		})
	}
}

func TestRescaled(t *testing.T) {
	cfg := DefaultConfig()
	gateOff := DefaultConfig()
	gateOff.ScaleToZero = false
	b := cfg.Behavior(&autoscalingv2.HorizontalPodAutoscalerBehavior{})
	tests := []struct {
		name        string
		cfg         Config
		in          Input
		desired     int32
		wantSTZ     string // ScaledToZero reason, "" when absent
		wantRemove  bool
		wantUpCount int
	}{
		{name: "scaled to zero", cfg: cfg, in: Input{CurrentReplicas: 3, MinReplicas: i32(0), HasObjectOrExternalMetrics: true, Behavior: b},
			desired: 0, wantSTZ: "ScaledToZero"},
		{name: "to zero without object metric is not ScaledToZero", cfg: cfg, in: Input{CurrentReplicas: 3, MinReplicas: i32(0), Behavior: b},
			desired: 0, wantSTZ: "NotScaledToZero"},
		{name: "scale up records an event", cfg: cfg, in: Input{CurrentReplicas: 3, Behavior: b}, desired: 5, wantSTZ: "NotScaledToZero", wantUpCount: 1},
		{name: "legacy records no event", cfg: cfg, in: Input{CurrentReplicas: 3}, desired: 5, wantSTZ: "NotScaledToZero"},
		{name: "gate off removes the condition", cfg: gateOff, in: Input{CurrentReplicas: 3, MinReplicas: i32(0), HasObjectOrExternalMetrics: true},
			desired: 0, wantRemove: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Now = now
			var h behavior.History
			conds, remove := tt.cfg.Rescaled(tt.in, tt.desired, &h)
			if remove != tt.wantRemove {
				t.Errorf("remove = %v", remove)
			}
			able := condOf(conds, autoscalingv2.AbleToScale)
			if able == nil || able.Reason != "SucceededRescale" || able.Message != fmt.Sprintf("the HPA controller was able to update the target scale to %d", tt.desired) {
				t.Errorf("AbleToScale %+v", able)
			}
			stz := condOf(conds, autoscalingv2.ScaledToZero)
			gotSTZ := ""
			if stz != nil {
				gotSTZ = stz.Reason
			}
			if gotSTZ != tt.wantSTZ {
				t.Errorf("ScaledToZero %+v, want %q", stz, tt.wantSTZ)
			}
			if len(h.ScaleUpEvents) != tt.wantUpCount {
				t.Errorf("up events %v", h.ScaleUpEvents)
			}
		})
	}
}

func TestTolerancesFromBehavior(t *testing.T) {
	cfg := DefaultConfig()
	b := cfg.Behavior(&autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{Tolerance: q("360m")}})
	tests := []struct {
		name string
		b    *behavior.Behavior
		want replicas.Tolerances
	}{
		{name: "no behavior uses the flag", b: nil, want: replicas.Tolerances{Down: 0.1, Up: 0.1}},
		{name: "per-direction tolerance", b: b, want: replicas.Tolerances{Down: 0.36, Up: 0.1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := cfg.Tolerances(tt.b); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestZeroConfigIsKept: an explicit zero tolerance or downscale window
// decides as zero, as in kube-controller-manager, whose defaulting runs
// before its flags are parsed (with the re-defaulting it replaced, the zero
// cases decided as the default ones).
func TestZeroConfigIsKept(t *testing.T) {
	def := DefaultConfig()
	zeroWindow, zeroTolerance := def, def
	zeroWindow.DownscaleStabilizationWindow = 0
	zeroTolerance.Tolerance = 0
	held := behavior.History{Recommendations: []behavior.Recommendation{{Replicas: 8, Time: now.Add(-time.Minute)}}}
	tests := []struct {
		name        string
		cfg         Config
		in          Input
		history     behavior.History
		reqs, usage []int64
		metrics     *Combined
		want        int32
	}{
		{name: "default window holds a scale down", cfg: def, in: Input{CurrentReplicas: 8, MaxReplicas: 10},
			history: held, metrics: combined(4, "pods metric rps"), want: 8},
		{name: "zero window scales down at once", cfg: zeroWindow, in: Input{CurrentReplicas: 8, MaxReplicas: 10},
			history: held, metrics: combined(4, "pods metric rps"), want: 4},
		{name: "zero window is the behavior's default scale-down window", cfg: zeroWindow,
			in:      Input{CurrentReplicas: 8, MaxReplicas: 10, Behavior: zeroWindow.Behavior(&autoscalingv2.HorizontalPodAutoscalerBehavior{})},
			history: held, metrics: combined(4, "pods metric rps"), want: 4},
		// 4 pods at 104% of a 50% target: within the default 10%.
		{name: "default tolerance keeps 104%", cfg: def, in: Input{CurrentReplicas: 4, MaxReplicas: 10},
			reqs: []int64{100, 100, 100, 100}, usage: []int64{52, 52, 52, 52}, want: 4},
		{name: "zero tolerance scales on 104%", cfg: zeroTolerance, in: Input{CurrentReplicas: 4, MaxReplicas: 10},
			reqs: []int64{100, 100, 100, 100}, usage: []int64{52, 52, 52, 52}, want: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Now = now
			h := tt.history.Clone()
			var d Decision
			if tt.metrics != nil {
				d = tt.cfg.Decide(tt.in, tt.metrics, &h)
			} else {
				d = cpuScenario(t, tt.cfg, tt.in, &h, tt.reqs, tt.usage, 50)
			}
			if d.MetricsFailed {
				t.Fatalf("metrics failed: %v", d.Err)
			}
			if d.DesiredReplicas != tt.want {
				t.Errorf("desired %d, want %d", d.DesiredReplicas, tt.want)
			}
		})
	}
}

// TestStampOnTheBeat replays the scale-ups of conformance's random scenario
// 596459878 on a 5 s beat: the memory metric wants 8 from every count, each
// reconcile starts a queue wait after it is due, and the API's default
// scale-up policies (Pods 4 and Percent 100 per 15 s) limit each step. The
// reconcile at 6 replicas comes exactly one policy period after the one
// that went from 3 to 4; upstream, whose intervals are the period plus the
// reconcile's own time, leaves that event outside the period (periodStart
// 4, limit 8). Dated by their starts, the event fell inside when that
// earlier reconcile had waited longer in the queue (periodStart 3, limit
// 7); dated by when they were due, it falls outside whatever the waits.
func TestStampOnTheBeat(t *testing.T) {
	cfg := DefaultConfig()
	b := cfg.Behavior(&autoscalingv2.HorizontalPodAutoscalerBehavior{})
	const sync = 5 * time.Second
	// The queue waits of the six reconciles: the third (3 -> 4) waited 3 ms,
	// the sixth (at 6) 1 ms.
	waits := []time.Duration{2, 2, 3, 2, 2, 1}
	for _, tc := range []struct {
		name    string
		stamped bool
		want    []int32
	}{
		{"dated by when each was due", true, []int32{2, 3, 4, 5, 6, 8}},
		{"dated by their starts (before)", false, []int32{2, 3, 4, 5, 6, 7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h behavior.History
			cur := int32(1)
			var got []int32
			for i, w := range waits {
				due := now.Add(time.Duration(i) * sync)
				in := Input{Now: due.Add(w * time.Millisecond), CurrentReplicas: cur, MaxReplicas: 8, Behavior: b}
				if tc.stamped {
					in.Stamp = due
				}
				// ceil(cur * 1.1875), as memory at 59% of request against 50%.
				d := cfg.Decide(in, combined(min((cur*19+15)/16, 8), "memory"), &h)
				if !d.Rescale {
					t.Fatalf("reconcile %d at %d: no rescale (%+v)", i, cur, d)
				}
				cfg.Rescaled(in, d.DesiredReplicas, &h)
				cur = d.DesiredReplicas
				got = append(got, cur)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("replicas %v, want %v", got, tc.want)
			}
		})
	}
}
