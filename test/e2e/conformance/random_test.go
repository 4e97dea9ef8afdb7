package conformance

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// Random scenarios: seeded, so that a failing one is replayed exactly.
// TIDAL_CONFORMANCE_RANDOM is how many (default 3; `make conformance-random`
// runs more), TIDAL_CONFORMANCE_SEED the first seed (default: the clock);
// scenario i uses seed+i and is named random-<its seed>. To replay one:
// TIDAL_CONFORMANCE_SEED=<its seed> TIDAL_CONFORMANCE_RANDOM=1.
const (
	randomCountEnv = "TIDAL_CONFORMANCE_RANDOM"
	randomSeedEnv  = "TIDAL_CONFORMANCE_SEED"
)

func TestRandomScenarios(t *testing.T) {
	// Beside TestConformance's scenarios, on the base profile's control
	// plane.
	t.Parallel()
	p := baseProfile
	count, seed, err := randomSettings(os.Getenv(randomCountEnv), os.Getenv(randomSeedEnv), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d random scenarios from seed %d; replay one with %s=<its seed> %s=1", count, seed, randomSeedEnv, randomCountEnv)
	for i := range count {
		sc := randomScenario(seed + uint64(i))
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			t.Logf("scenario: %s", describe(sc))
			runScenario(t, p, sc)
			if t.Failed() {
				t.Logf("replay: %s=%d %s=1 go test ./test/e2e/conformance -run 'TestRandomScenarios/%s$'", randomSeedEnv, seed+uint64(i), randomCountEnv, sc.name)
			}
		})
	}
}

// randomSettings reads the count and the first seed.
func randomSettings(count, seed string, now time.Time) (int, uint64, error) {
	n := 3
	if count != "" {
		v, err := strconv.Atoi(count)
		if err != nil || v < 0 {
			return 0, 0, fmt.Errorf("%s=%q: want a count, 0 or more", randomCountEnv, count)
		}
		n = v
	}
	s := uint64(now.UnixNano()) % 1_000_000_000
	if seed != "" {
		v, err := strconv.ParseUint(seed, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s=%q: want an unsigned integer", randomSeedEnv, seed)
		}
		s = v
	}
	return n, s, nil
}

// describe is a scenario as text: the spec as JSON and the step names,
// which carry the values set.
func describe(sc scenario) string {
	spec, _ := json.Marshal(sc.spec)
	var steps []string
	for _, st := range sc.steps {
		steps = append(steps, st.name)
	}
	return fmt.Sprintf("replicas %d, spec %s, steps [%s]", sc.replicas, spec, strings.Join(steps, "; "))
}

// randomMetric is one kind of metric a random scenario may use: its spec
// for a target level, and how to set a value relative to that level.
type randomMetric struct {
	kind string
	// byReady marks a Value target on an Object or External metric: its
	// proposal is ceil(usage/target * ready pods), so while a scale is under
	// way it depends on how many new pods are ready yet. Its values come
	// from readyFree, and it has no second metric.
	byReady bool
	// base is the value at 1x (byReady metrics).
	base float64
	// spec is the metric spec.
	spec autoscalingv2.MetricSpec
	// set returns a step setting usage at factor x the target, per pod rank
	// where the metric is per pod ("" is a missing sample).
	set func(factors []float64) step
}

// per-pod values as quantities of the unit.
func scaled(base float64, unit string, factors []float64) []string {
	out := make([]string, len(factors))
	for i, f := range factors {
		if f < 0 {
			continue // missing
		}
		out[i] = strconv.FormatInt(int64(base*f+0.5), 10) + unit
	}
	return out
}

func randomMetrics(r *rand.Rand) randomMetric {
	// Targets: cpu requests are 100m per pod (harness.Deployment).
	switch r.IntN(8) {
	case 0:
		pct := int32(30 + 10*r.IntN(5))
		return randomMetric{kind: "cpu-utilization", spec: resourceMetric(corev1.ResourceCPU, utilization(pct)), set: func(f []float64) step {
			v := scaled(float64(pct), "m", f)
			return cpuStep("cpu "+strings.Join(v, ","), v...)
		}}
	case 1:
		return randomMetric{kind: "cpu-average-value", spec: resourceMetric(corev1.ResourceCPU, averageValue("60m")), set: func(f []float64) step {
			v := scaled(60, "m", f)
			return cpuStep("cpu "+strings.Join(v, ","), v...)
		}}
	case 2:
		return randomMetric{kind: "memory-utilization", spec: resourceMetric(corev1.ResourceMemory, utilization(50)), set: func(f []float64) step {
			v := scaled(32, "Mi", f)
			return setStep("memory "+strings.Join(v, ","), func(m twinMetrics) { m.memory(v...) })
		}}
	case 3:
		return randomMetric{kind: "container-cpu-utilization", spec: containerMetric(corev1.ResourceCPU, "app", utilization(50)), set: func(f []float64) step {
			v := scaled(50, "m", f)
			return cpuStep("cpu "+strings.Join(v, ","), v...)
		}}
	case 4:
		return randomMetric{kind: "pods", spec: podsMetric("qps", averageValue("10")), set: func(f []float64) step {
			v := scaled(10, "", f)
			return setStep("qps "+strings.Join(v, ","), func(m twinMetrics) { m.pods("qps", v...) })
		}}
	case 5:
		return randomMetric{kind: "object-value", byReady: true, base: 100, spec: objectMetric("rps", value("100")), set: func(f []float64) step {
			v := scaled(100, "", f[:1])[0]
			return setStep("rps "+v, func(m twinMetrics) { m.object("rps", v) })
		}}
	case 6:
		return randomMetric{kind: "object-average-value", spec: objectMetric("rps", averageValue("50")), set: func(f []float64) step {
			v := scaled(150, "", f[:1])[0] // three pods' worth at 1x
			return setStep("rps "+v, func(m twinMetrics) { m.object("rps", v) })
		}}
	default:
		return randomMetric{kind: "external-value", byReady: true, base: 20, spec: externalMetric("queue", nil, value("20")), set: func(f []float64) step {
			v := scaled(20, "", f[:1])[0]
			return setStep("queue "+v, func(m twinMetrics) { m.external("queue", v) })
		}}
	}
}

// factors near and far from the target, including the tolerance's edges.
var randomFactors = []float64{0.1, 0.3, 0.5, 0.85, 0.9, 0.95, 1, 1.05, 1.1, 1.2, 1.5, 2, 3}

// Windows (stabilization, policy periods) in seconds. None is near a
// multiple of the sync period (5 s): a controller reconciles every 5 s plus
// the reconcile's own time, so whether a recommendation or a scale event
// made k periods ago is still in a window of 5k seconds is decided by a few
// milliseconds of each controller's timing, not by its decisions (seed
// 700028, with 5 s policies, staged a scale-up 1, 3, 4, 6 upstream and 1,
// 3, 5, 6 in Tidal: upstream's next reconcile came 5.016 s after its
// scale to 3, outside the 5 s period, and took a stage; Tidal's left its
// scale inside the period and stayed at 3 until the one after). Each is at
// least 2 s from any multiple.
//
// The longest period, 13 s, lets a staged scale-up take its next stage at
// the third sync after the last, 15 s, well within a step's quiet time to
// settle (22 s in the base profile).
var (
	randomStabilizations = []int32{0, 3, 8}
	randomPeriods        = []int32{3, 8, 13}
)

func randomBehaviorRules(r *rand.Rand) *autoscalingv2.HPAScalingRules {
	if r.IntN(3) == 0 {
		return nil // the default for that direction
	}
	rules := &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To(randomStabilizations[r.IntN(len(randomStabilizations))])}
	for range 1 + r.IntN(2) {
		if r.IntN(2) == 0 {
			rules.Policies = append(rules.Policies, policy(autoscalingv2.PodsScalingPolicy, int32(1+r.IntN(3)), randomPeriods[r.IntN(len(randomPeriods))]))
		} else {
			rules.Policies = append(rules.Policies, policy(autoscalingv2.PercentScalingPolicy, int32(25*(1+r.IntN(4))), randomPeriods[r.IntN(len(randomPeriods))]))
		}
	}
	sel := []autoscalingv2.ScalingPolicySelect{autoscalingv2.MaxChangePolicySelect, autoscalingv2.MinChangePolicySelect,
		autoscalingv2.MaxChangePolicySelect, autoscalingv2.DisabledPolicySelect}
	rules.SelectPolicy = selectPolicy(sel[r.IntN(len(sel))])
	return rules
}

// randomScenario is the scenario of one seed: one metric (sometimes a
// second), a size range, maybe a behavior, and two or three steps of
// values around the target (a missing sample now and then; the oldest pod
// unready in a step now and then).
func randomScenario(seed uint64) scenario {
	r := rand.New(rand.NewPCG(seed, 0x7469_6461_6c))
	primary := randomMetrics(r)
	metrics := []autoscalingv2.MetricSpec{primary.spec}
	var second *randomMetric
	if r.IntN(4) == 0 {
		m := randomMetrics(r)
		if m.kind != primary.kind && !(strings.Contains(m.kind, "cpu") && strings.Contains(primary.kind, "cpu")) && !m.byReady && !primary.byReady {
			second = &m
			metrics = append(metrics, m.spec)
		}
	}
	minR := int32(1 + r.IntN(2))
	maxR := minR + int32(2+r.IntN(6))
	replicas := minR + int32(r.IntN(int(maxR-minR)+1))
	spec := hpaSpec(minR, maxR, metrics...)
	if r.IntN(2) == 0 {
		spec = withBehavior(spec, autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: randomBehaviorRules(r), ScaleDown: randomBehaviorRules(r)})
	}
	sc := scenario{name: fmt.Sprintf("random-%d", seed), replicas: replicas, spec: spec}
	current := replicas // where a byReady metric's steps start
	for i := range 2 + r.IntN(2) {
		factors := make([]float64, 1+r.IntN(3))
		for j := range factors {
			factors[j] = randomFactors[r.IntN(len(randomFactors))]
			if j > 0 && r.IntN(6) == 0 {
				factors[j] = -1 // a pod without a sample
			}
		}
		if primary.byReady {
			factors[0], current = readyFree(primary.base, factors[0], current, spec)
		}
		st := primary.set(factors)
		var more []step
		if second != nil {
			st2 := second.set([]float64{randomFactors[r.IntN(len(randomFactors))]})
			more = append(more, st2)
		}
		if i > 0 && strings.Contains(primary.kind, "cpu") && r.IntN(5) == 0 {
			more = append(more, step{name: "oldest pod unready", act: markFirstPodUnready})
		}
		sc.steps = append(sc.steps, changesOfStep(i, st, more)...)
	}
	return sc
}

// baseTolerance is the base profile's --horizontal-pod-autoscaler-tolerance,
// the profile random scenarios run on.
const baseTolerance = 0.1

// readyFree turns factor f of a byReady metric into one whose step ends the
// same whatever the new pods' readiness, and says where the step ends. The
// value is fixed while replicas change, so a step outside the tolerance
// goes on to an end of the range, a stage at a time, each proposal
// ceil(ratio * ready pods). The stages are then the same for every
// controller only if every proposal on the way is past that end: up, the
// ready count only grows from current, so ceil(ratio * current) >= max
// suffices; down, it only shrinks, so ceil(ratio * current) <= min. A
// factor that falls short is moved to the nearest value that does not (seed
// 379130730: 3x from 2 to a max of 8 went 4 6 8 where the next reconcile
// saw 2 ready pods and 4 8 where it saw 4). A direction whose policy is
// Disabled leaves the count.
func readyFree(base, f float64, current int32, spec autoscalingv2.HorizontalPodAutoscalerSpec) (float64, int32) {
	v := int64(base*f + 0.5)
	ratio := func(v int64) float64 { return float64(v) / base }
	proposal := func(v int64) int32 { return int32(math.Ceil(ratio(v) * float64(current))) }
	switch r := ratio(v); {
	case 1-baseTolerance <= r && r <= 1+baseTolerance:
		return f, current
	case r > 1:
		for proposal(v) < spec.MaxReplicas {
			v++
		}
		if disabled(spec.Behavior, true) {
			return float64(v) / base, current
		}
		return float64(v) / base, spec.MaxReplicas
	default:
		for v > 0 && proposal(v) > *spec.MinReplicas {
			v--
		}
		if disabled(spec.Behavior, false) {
			return float64(v) / base, current
		}
		return float64(v) / base, *spec.MinReplicas
	}
}

// disabled says whether a behavior turns scaling off in one direction.
func disabled(b *autoscalingv2.HorizontalPodAutoscalerBehavior, up bool) bool {
	if b == nil {
		return false
	}
	rules := b.ScaleDown
	if up {
		rules = b.ScaleUp
	}
	return rules != nil && rules.SelectPolicy != nil && *rules.SelectPolicy == autoscalingv2.DisabledPolicySelect
}

// changesOfStep is the steps that make one random step's changes. The
// first step's are all in place before the autoscalers exist, so they stay
// one step. After that each change is a step of its own: the controllers
// reconcile on their own clocks, and a reconcile between two changes of one
// step decides on a state the step never meant (new cpu values with the
// pod still ready, one metric new and the other old). Upstream then keeps
// what that reconcile set (a ScalingLimited reason, a recommendation) and
// whether Tidal saw the same moment was luck.
func changesOfStep(i int, st step, more []step) []step {
	if i > 0 {
		return append([]step{st}, more...)
	}
	// The first step only sets values (no pod is marked unready in it).
	sets := []func(twinMetrics){st.set}
	for _, m := range more {
		st.name += ", " + m.name
		sets = append(sets, m.set)
	}
	st.set = func(tm twinMetrics) {
		for _, set := range sets {
			set(tm)
		}
	}
	return []step{st}
}

// TestRandomStepsChangeOneThing: after the first step, every step makes
// one change (values of one metric, or a pod's readiness), so that no
// reconcile can fall between two changes of one step. Seed 787037452 set
// new cpu values and marked the oldest pod unready in one step; upstream
// reconciled between the two and Tidal did not.
func TestRandomStepsChangeOneThing(t *testing.T) {
	seeds := []uint64{787037452}
	for seed := range uint64(500) {
		seeds = append(seeds, seed)
	}
	for _, seed := range seeds {
		sc := randomScenario(seed)
		for i, st := range sc.steps {
			if i > 0 && st.set != nil && st.act != nil {
				t.Fatalf("seed %d, step %d (%s): sets values and acts", seed, i, st.name)
			}
			if i > 0 && strings.Contains(st.name, ", ") {
				t.Fatalf("seed %d, step %d (%s): more than one change", seed, i, st.name)
			}
			if i == 0 && st.act != nil {
				t.Fatalf("seed %d: the first step acts (%s)", seed, st.name)
			}
		}
	}
	got := describe(randomScenario(787037452))
	if !strings.HasSuffix(got, "steps [cpu 30m; cpu 51m,,54m; oldest pod unready]") {
		t.Errorf("seed 787037452: %s", got)
	}
}

// TestRandomWindowsAvoidTheSyncBeat: every window a random behavior sets is
// 0 or at least 2 s away from every multiple of the sync period.
func TestRandomWindowsAvoidTheSyncBeat(t *testing.T) {
	sync := int32(syncPeriod / time.Second)
	off := func(w int32) bool {
		d := w % sync
		return w == 0 || min(d, sync-d) >= 2
	}
	for seed := range uint64(500) {
		b := randomScenario(seed).spec.Behavior
		if b == nil {
			continue
		}
		for _, rules := range []*autoscalingv2.HPAScalingRules{b.ScaleUp, b.ScaleDown} {
			if rules == nil {
				continue
			}
			if w := *rules.StabilizationWindowSeconds; !off(w) {
				t.Errorf("seed %d: a stabilization window of %d s, near a multiple of the %d s sync period", seed, w, sync)
			}
			for _, p := range rules.Policies {
				if !off(p.PeriodSeconds) {
					t.Errorf("seed %d: a policy period of %d s, near a multiple of the %d s sync period", seed, p.PeriodSeconds, sync)
				}
			}
		}
	}
}

// TestRandomScenarioIsReplayable: a seed gives the same scenario every
// time, and seeds differ.
func TestRandomScenarioIsReplayable(t *testing.T) {
	for seed := range uint64(50) {
		a, b := describe(randomScenario(seed)), describe(randomScenario(seed))
		if a != b {
			t.Fatalf("seed %d gave two scenarios:\n%s\n%s", seed, a, b)
		}
	}
	if describe(randomScenario(1)) == describe(randomScenario(2)) {
		t.Error("seeds 1 and 2 gave the same scenario")
	}
	for _, tt := range []struct {
		name, count, seed string
		wantN             int
		wantSeed          uint64
		wantErr           bool
	}{
		{name: "defaults", wantN: 3, wantSeed: 123},
		{name: "given", count: "7", seed: "42", wantN: 7, wantSeed: 42},
		{name: "bad count", count: "x", wantErr: true},
		{name: "bad seed", seed: "-1", wantErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n, s, err := randomSettings(tt.count, tt.seed, time.Unix(0, 123))
			if (err != nil) != tt.wantErr || (!tt.wantErr && (n != tt.wantN || s != tt.wantSeed)) {
				t.Errorf("got %d %d %v", n, s, err)
			}
		})
	}
}

// TestReadyFree: a byReady metric's value ends its step at an end of the
// range (or within the tolerance) for every count of ready pods on the
// way.
func TestReadyFree(t *testing.T) {
	up := func(sel autoscalingv2.ScalingPolicySelect) autoscalingv2.HorizontalPodAutoscalerSpec {
		return withBehavior(hpaSpec(2, 8), autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: &autoscalingv2.HPAScalingRules{SelectPolicy: &sel}})
	}
	for _, tt := range []struct {
		name      string
		base, f   float64
		current   int32
		spec      autoscalingv2.HorizontalPodAutoscalerSpec
		wantValue int64
		wantEnd   int32
	}{
		{name: "seed 379130730: 3x from 2 to max 8 becomes 3.51x", base: 100, f: 3, current: 2, spec: hpaSpec(2, 8), wantValue: 351, wantEnd: 8},
		{name: "3x from 3 to max 8 already reaches it", base: 100, f: 3, current: 3, spec: hpaSpec(2, 8), wantValue: 300, wantEnd: 8},
		{name: "1.5x from 3 to max 7", base: 20, f: 1.5, current: 3, spec: hpaSpec(1, 7), wantValue: 41, wantEnd: 7},
		{name: "within the tolerance stays", base: 100, f: 1.05, current: 5, spec: hpaSpec(1, 8), wantValue: 105, wantEnd: 5},
		{name: "the tolerance's upper edge stays", base: 100, f: 1.1, current: 5, spec: hpaSpec(1, 8), wantValue: 110, wantEnd: 5},
		{name: "0.5x from 6 to min 2 becomes a third", base: 100, f: 0.5, current: 6, spec: hpaSpec(2, 8), wantValue: 33, wantEnd: 2},
		{name: "0.1x from 6 to min 1 already reaches it", base: 20, f: 0.1, current: 6, spec: hpaSpec(1, 8), wantValue: 2, wantEnd: 1},
		{name: "down from min stays at min", base: 100, f: 0.5, current: 2, spec: hpaSpec(2, 8), wantValue: 50, wantEnd: 2},
		{name: "up disabled leaves the count", base: 100, f: 3, current: 2, spec: up(autoscalingv2.DisabledPolicySelect), wantValue: 351, wantEnd: 2},
		{name: "up with a Max policy goes to max", base: 100, f: 3, current: 2, spec: up(autoscalingv2.MaxChangePolicySelect), wantValue: 351, wantEnd: 8},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, end := readyFree(tt.base, tt.f, tt.current, tt.spec)
			if v := int64(tt.base*f + 0.5); v != tt.wantValue || end != tt.wantEnd {
				t.Errorf("got value %d ending at %d, want %d ending at %d", v, end, tt.wantValue, tt.wantEnd)
			}
		})
	}
}

// TestRandomByReadyScenarios: the seed that failed in CI now asks for a
// value that reaches max from the first stage, and no byReady scenario has
// a second metric.
func TestRandomByReadyScenarios(t *testing.T) {
	if got := describe(randomScenario(379130730)); !strings.Contains(got, "steps [rps 351;") {
		t.Errorf("seed 379130730: %s", got)
	}
	for seed := range uint64(500) {
		sc := randomScenario(seed)
		kinds := 0
		for _, m := range sc.spec.Metrics {
			if (m.Object != nil && m.Object.Target.Type == autoscalingv2.ValueMetricType) || (m.External != nil && m.External.Target.Type == autoscalingv2.ValueMetricType) {
				kinds++
			}
		}
		if kinds > 0 && len(sc.spec.Metrics) > 1 {
			t.Errorf("seed %d: a Value metric beside another: %s", seed, describe(sc))
		}
	}
}
