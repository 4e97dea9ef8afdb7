package behavior

import (
	"testing"
	"time"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) time.Time { return now.Add(-d) }

// dur reads a duration argument; a literal 0 means now.
func dur(v any) time.Duration {
	if d, ok := v.(time.Duration); ok {
		return d
	}
	return time.Duration(v.(int))
}

// recs builds recommendations from (replicas, age) pairs.
func recs(kv ...any) []Recommendation {
	var out []Recommendation
	for i := 0; i < len(kv); i += 2 {
		out = append(out, Recommendation{Replicas: int32(kv[i].(int)), Time: ago(dur(kv[i+1]))})
	}
	return out
}

// events builds scale events from (change, age) pairs.
func events(kv ...any) []ScaleEvent {
	var out []ScaleEvent
	for i := 0; i < len(kv); i += 2 {
		out = append(out, ScaleEvent{Change: int32(kv[i].(int)), Time: ago(dur(kv[i+1]))})
	}
	return out
}

func TestLegacyLimits(t *testing.T) {
	tests := []struct {
		name                     string
		current, desired, mn, mx int32
		want                     int32
		wantReason               string
	}{
		// Worked example 15 (limits part): limit max(6,4) = 6 >= max 5.
		{name: "ex15 too many replicas", current: 3, desired: 21, mn: 2, mx: 5, want: 5, wantReason: ReasonTooManyReplicas},
		// Worked example 16: limit 6 < max 2000.
		{name: "ex16 scale up limit", current: 3, desired: 1000, mn: 1, mx: 2000, want: 6, wantReason: ReasonScaleUpLimit},
		{name: "limit is at least 4", current: 1, desired: 10, mn: 1, mx: 100, want: 4, wantReason: ReasonScaleUpLimit},
		{name: "limit from zero is 4", current: 0, desired: 10, mn: 1, mx: 100, want: 4, wantReason: ReasonScaleUpLimit},
		{name: "max equal to limit is TooManyReplicas", current: 3, desired: 7, mn: 1, mx: 6, want: 6, wantReason: ReasonTooManyReplicas},
		{name: "below min", current: 5, desired: 1, mn: 2, mx: 10, want: 2, wantReason: ReasonTooFewReplicas},
		{name: "within range", current: 5, desired: 8, mn: 2, mx: 10, want: 8, wantReason: ReasonDesiredWithinRange},
		{name: "exactly at limit", current: 5, desired: 10, mn: 2, mx: 100, want: 10, wantReason: ReasonDesiredWithinRange},
		{name: "large current", current: 1 << 29, desired: 1<<30 + 1, mn: 1, mx: 1<<30 + 2, want: 1 << 30, wantReason: ReasonScaleUpLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, reason, _ := LegacyLimits(tt.current, tt.desired, tt.mn, tt.mx)
			if got != tt.want || reason != tt.wantReason {
				t.Errorf("got %d/%s, want %d/%s", got, reason, tt.want, tt.wantReason)
			}
		})
	}
}

func TestNormalizeLegacy(t *testing.T) {
	tests := []struct {
		name           string
		history        []Recommendation
		initial        bool // RecordInitial(current) first, as after a restart
		current        int32
		desired        int32
		mn, mx         int32
		want           int32
		wantStabilized int32
		wantAbleReason string
		wantLimited    bool
		wantHistory    []Recommendation
	}{
		{name: "scale down held by the highest recent recommendation", history: recs(5, time.Minute, 3, 4*time.Minute),
			current: 5, desired: 2, mn: 1, mx: 10, want: 5, wantStabilized: 5, wantAbleReason: ReasonScaleDownStabilized,
			wantHistory: recs(5, time.Minute, 3, 4*time.Minute, 2, 0)},
		{name: "recommendation exactly at the cutoff counts", history: recs(7, 5*time.Minute),
			current: 7, desired: 2, mn: 1, mx: 10, want: 7, wantStabilized: 7, wantAbleReason: ReasonScaleDownStabilized,
			wantHistory: recs(7, 5*time.Minute, 2, 0)},
		{name: "older recommendation ignored and its slot reused", history: recs(7, 5*time.Minute+time.Nanosecond, 4, time.Minute),
			current: 7, desired: 2, mn: 1, mx: 10, want: 4, wantStabilized: 4, wantAbleReason: ReasonScaleDownStabilized,
			wantHistory: recs(2, 0, 4, time.Minute)},
		// limit max(2*4, 4) = 8.
		{name: "scale up is not stabilized", history: recs(2, time.Minute),
			current: 4, desired: 8, mn: 1, mx: 10, want: 8, wantStabilized: 8, wantAbleReason: ReasonReadyForNewScale,
			wantHistory: recs(2, time.Minute, 8, 0)},
		{name: "after a restart no scale down for one window", initial: true,
			current: 10, desired: 4, mn: 1, mx: 10, want: 10, wantStabilized: 10, wantAbleReason: ReasonScaleDownStabilized,
			wantHistory: recs(10, 0, 4, 0)},
		{name: "stabilized value still limited", history: recs(30, time.Minute),
			current: 10, desired: 2, mn: 1, mx: 100, want: 20, wantStabilized: 30, wantAbleReason: ReasonScaleDownStabilized, wantLimited: true,
			wantHistory: recs(30, time.Minute, 2, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := History{Recommendations: tt.history}
			if tt.initial {
				h.RecordInitial(tt.current, now)
			}
			res := h.NormalizeLegacy(Input{Current: tt.current, Desired: tt.desired, Min: tt.mn, Max: tt.mx, Now: now}, 5*time.Minute)
			if res.Replicas != tt.want || res.Stabilized != tt.wantStabilized || res.StabilizationReason != tt.wantAbleReason || res.Limited != tt.wantLimited {
				t.Errorf("got %+v, want replicas %d stabilized %d reason %s limited %v", res, tt.want, tt.wantStabilized, tt.wantAbleReason, tt.wantLimited)
			}
			if !sameRecs(h.Recommendations, tt.wantHistory) {
				t.Errorf("history = %v, want %v", h.Recommendations, tt.wantHistory)
			}
		})
	}
}

func sameRecs(a, b []Recommendation) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Replicas != b[i].Replicas || !a[i].Time.Equal(b[i].Time) {
			return false
		}
	}
	return true
}

func rules(window int32, sel SelectPolicy, policies ...Policy) Rules {
	return Rules{StabilizationWindowSeconds: window, SelectPolicy: sel, Policies: policies}
}

func TestNormalizeStabilization(t *testing.T) {
	defaults := Behavior{ScaleUp: DefaultScaleUpRules(), ScaleDown: DefaultScaleDownRules(5 * time.Minute)}
	upWindow := Behavior{ScaleUp: rules(120, SelectMax, Policy{PodsPolicy, 100, 15}), ScaleDown: DefaultScaleDownRules(5 * time.Minute)}
	both := Behavior{ScaleUp: rules(60, SelectMax, Policy{PodsPolicy, 100, 15}), ScaleDown: rules(300, SelectMax, Policy{PercentPolicy, 100, 15})}
	tests := []struct {
		name           string
		b              Behavior
		history        []Recommendation
		current        int32
		desired        int32
		want           int32
		wantAbleReason string
		wantHistoryLen int
	}{
		// downRec = max(4, 8, 6) = 8: current 10 lowered to 8.
		{name: "scale down takes the max over the down window", b: defaults, history: recs(8, 200*time.Second, 6, 100*time.Second),
			current: 10, desired: 4, want: 8, wantAbleReason: ReasonScaleDownStabilized, wantHistoryLen: 3},
		{name: "down window excludes older recommendations", b: defaults, history: recs(8, 301*time.Second, 6, 100*time.Second),
			current: 10, desired: 4, want: 6, wantAbleReason: ReasonScaleDownStabilized, wantHistoryLen: 2},
		// A recommendation exactly at now-window is not strictly newer.
		{name: "recommendation exactly at the down cutoff is excluded", b: defaults, history: recs(8, 300*time.Second),
			current: 10, desired: 4, want: 4, wantAbleReason: ReasonReadyForNewScale, wantHistoryLen: 2},
		// upRec = min(9, 5, 7) = 5: current 4 raised to 5.
		{name: "scale up takes the min over the up window", b: upWindow, history: recs(5, 60*time.Second, 7, 30*time.Second),
			current: 4, desired: 9, want: 5, wantAbleReason: ReasonScaleUpStabilized, wantHistoryLen: 3},
		// upRec = 3 (down to current), downRec = 10: current 5 stays.
		{name: "both windows hold the current count", b: both, history: recs(10, 200*time.Second, 3, 30*time.Second),
			current: 5, desired: 6, want: 5, wantAbleReason: ReasonScaleUpStabilized, wantHistoryLen: 3},
		{name: "no history: desired passes", b: defaults, current: 5, desired: 3, want: 3, wantAbleReason: ReasonReadyForNewScale, wantHistoryLen: 1},
		// older than both windows: the slot is reused.
		{name: "slot older than both windows is reused", b: both, history: recs(10, 400*time.Second),
			current: 5, desired: 3, want: 3, wantAbleReason: ReasonReadyForNewScale, wantHistoryLen: 1},
		// older than the up window only: kept.
		{name: "slot within the down window is kept", b: both, history: recs(2, 100*time.Second),
			current: 5, desired: 3, want: 3, wantAbleReason: ReasonReadyForNewScale, wantHistoryLen: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := History{Recommendations: tt.history}
			res := h.Normalize(tt.b, Input{Current: tt.current, Desired: tt.desired, Min: 1, Max: 100, Now: now})
			if res.Stabilized != tt.want || res.Replicas != tt.want || res.StabilizationReason != tt.wantAbleReason {
				t.Errorf("got %+v, want %d/%s", res, tt.want, tt.wantAbleReason)
			}
			if len(h.Recommendations) != tt.wantHistoryLen {
				t.Errorf("history length %d, want %d", len(h.Recommendations), tt.wantHistoryLen)
			}
			last := false
			for _, r := range h.Recommendations {
				last = last || (r.Replicas == tt.desired && r.Time.Equal(now))
			}
			if !last {
				t.Errorf("raw desired %d not recorded: %v", tt.desired, h.Recommendations)
			}
		})
	}
}

func TestNormalizeRateLimits(t *testing.T) {
	up := func(r Rules) Behavior { return Behavior{ScaleUp: r, ScaleDown: DefaultScaleDownRules(0)} }
	down := func(r Rules) Behavior { return Behavior{ScaleUp: DefaultScaleUpRules(), ScaleDown: r} }
	tests := []struct {
		name             string
		b                Behavior
		upEvents         []ScaleEvent
		downEvents       []ScaleEvent
		current, desired int32
		mn, mx           int32
		want             int32
		wantReason       string
	}{
		// Worked example 17 (limits part): ceil(3*(1+7)) = 24.
		{name: "ex17 percent 700 per 60s", b: up(rules(0, SelectMax, Policy{PercentPolicy, 700, 60})),
			current: 3, desired: 60, mn: 1, mx: 100, want: 24, wantReason: ReasonScaleUpLimit},
		// Worked example 18: periodStart = 100 + 12 = 112, trunc(112*0.5) = 56.
		{name: "ex18 down events within the period", b: down(rules(0, SelectMax, Policy{PercentPolicy, 50, 120})),
			downEvents: events(4, 100*time.Second, 8, 30*time.Second, 50, 121*time.Second),
			current:    100, desired: 0, mn: 1, mx: 200, want: 56, wantReason: ReasonScaleDownLimit},
		// float64(25)*(1+12/100) = 28.000000000000004, ceil 29.
		{name: "percent up float artefact ceil(25*1.12) = 29", b: up(rules(0, SelectMax, Policy{PercentPolicy, 12, 60})),
			current: 25, desired: 100, mn: 1, mx: 1000, want: 29, wantReason: ReasonScaleUpLimit},
		// float64(700)*(1+10/100) = 770.0000000000001, ceil 771.
		{name: "percent up float artefact at 700 replicas", b: up(rules(0, SelectMax, Policy{PercentPolicy, 10, 60})),
			current: 700, desired: 2000, mn: 1, mx: 5000, want: 771, wantReason: ReasonScaleUpLimit},
		// float64(10)*(1-80/100) = 1.9999999999999996, trunc 1.
		{name: "percent down float artefact trunc(10*0.2) = 1", b: down(rules(0, SelectMax, Policy{PercentPolicy, 80, 60})),
			current: 10, desired: 0, mn: 0, mx: 100, want: 1, wantReason: ReasonScaleDownLimit},
		// float64(1000)*(1-70/100) = 300.00000000000006, trunc 300.
		{name: "percent down at 1000 replicas", b: down(rules(0, SelectMax, Policy{PercentPolicy, 70, 60})),
			current: 1000, desired: 1, mn: 1, mx: 2000, want: 300, wantReason: ReasonScaleDownLimit},
		// periodStart = 10 - 3 = 7; 7 + 4 = 11.
		{name: "pods policy counts up events within the period", b: up(rules(0, SelectMax, Policy{PodsPolicy, 4, 60})),
			upEvents: events(3, 30*time.Second), current: 10, desired: 20, mn: 1, mx: 100, want: 11, wantReason: ReasonScaleUpLimit},
		// The outdated flag only marks a reusable slot; sums look at times.
		{name: "outdated event within the period still counts", b: up(rules(0, SelectMax, Policy{PodsPolicy, 4, 60})),
			upEvents: []ScaleEvent{{Change: 3, Time: ago(30 * time.Second), Outdated: true}}, current: 10, desired: 20, mn: 1, mx: 100, want: 11, wantReason: ReasonScaleUpLimit},
		// An event exactly at now-period is not strictly within it: 10 + 4.
		{name: "event exactly at the period start is outside", b: up(rules(0, SelectMax, Policy{PodsPolicy, 4, 60})),
			upEvents: events(3, 60*time.Second), current: 10, desired: 20, mn: 1, mx: 100, want: 14, wantReason: ReasonScaleUpLimit},
		// periodStart = 10 - 5 = 5; 5 - 2 = 3.
		{name: "events of both directions move the period start", b: down(rules(0, SelectMax, Policy{PodsPolicy, 2, 60})),
			upEvents: events(5, 10*time.Second), current: 10, desired: 1, mn: 1, mx: 100, want: 3, wantReason: ReasonScaleDownLimit},
		// periodStart 10-8 = 2, 2+2 = 4 < current: no scale up until events age.
		{name: "up limit never below current", b: up(rules(0, SelectMax, Policy{PodsPolicy, 2, 60})),
			upEvents: events(8, 10*time.Second), current: 10, desired: 15, mn: 1, mx: 20, want: 10, wantReason: ReasonScaleUpLimit},
		// periodStart 10+5 = 15, trunc(13.5) = 13 > current.
		{name: "down limit never above current", b: down(rules(0, SelectMax, Policy{PercentPolicy, 10, 60})),
			downEvents: events(5, 10*time.Second), current: 10, desired: 5, mn: 1, mx: 20, want: 10, wantReason: ReasonScaleDownLimit},
		// The up event of 20 at -100s is outside the Pods period (60s): 10+4 = 14;
		// inside the Percent period (300s): periodStart -10, ceil(-11.000000000000002)
		// = -11. Max picks 14.
		{name: "select max over policies with different periods", b: up(rules(0, SelectMax, Policy{PodsPolicy, 4, 60}, Policy{PercentPolicy, 10, 300})),
			upEvents: events(20, 100*time.Second), current: 10, desired: 50, mn: 1, mx: 100, want: 14, wantReason: ReasonScaleUpLimit},
		// Min up: Pods 1+2 = 3, Percent ceil(1.5) = 2: min 2.
		{name: "select min on scale up", b: up(rules(0, SelectMin, Policy{PodsPolicy, 2, 60}, Policy{PercentPolicy, 50, 60})),
			current: 1, desired: 10, mn: 1, mx: 100, want: 2, wantReason: ReasonScaleUpLimit},
		{name: "select max on scale up", b: up(rules(0, SelectMax, Policy{PodsPolicy, 2, 60}, Policy{PercentPolicy, 50, 60})),
			current: 1, desired: 10, mn: 1, mx: 100, want: 3, wantReason: ReasonScaleUpLimit},
		// Min down: Pods 5-2 = 3, Percent trunc(2.5) = 2: the smaller change is 3.
		{name: "select min on scale down", b: down(rules(0, SelectMin, Policy{PodsPolicy, 2, 60}, Policy{PercentPolicy, 50, 60})),
			current: 5, desired: 0, mn: 0, mx: 100, want: 3, wantReason: ReasonScaleDownLimit},
		{name: "select max on scale down", b: down(rules(0, SelectMax, Policy{PodsPolicy, 2, 60}, Policy{PercentPolicy, 50, 60})),
			current: 5, desired: 0, mn: 0, mx: 100, want: 2, wantReason: ReasonScaleDownLimit},
		{name: "disabled scale up", b: up(rules(0, SelectDisabled, Policy{PodsPolicy, 4, 15})),
			current: 5, desired: 10, mn: 1, mx: 20, want: 5, wantReason: ReasonScaleUpLimit},
		{name: "disabled scale down", b: down(rules(0, SelectDisabled, Policy{PercentPolicy, 100, 15})),
			current: 5, desired: 1, mn: 1, mx: 20, want: 5, wantReason: ReasonScaleDownLimit},
		{name: "disabled scale down does not block scale up", b: down(rules(0, SelectDisabled, Policy{PercentPolicy, 100, 15})),
			current: 5, desired: 7, mn: 1, mx: 20, want: 7, wantReason: ReasonDesiredWithinRange},
		// Default up rules: max(5+4, 5*2) = 10 >= max 8.
		{name: "max replicas below the rate limit", b: Behavior{ScaleUp: DefaultScaleUpRules(), ScaleDown: DefaultScaleDownRules(0)},
			current: 5, desired: 20, mn: 1, mx: 8, want: 8, wantReason: ReasonTooManyReplicas},
		// Default down rules: 100% -> 0 <= min 3.
		{name: "min replicas above the rate limit", b: Behavior{ScaleUp: DefaultScaleUpRules(), ScaleDown: DefaultScaleDownRules(0)},
			current: 5, desired: 1, mn: 3, mx: 8, want: 3, wantReason: ReasonTooFewReplicas},
		// Default up rules from 0 (scale from zero): Pods 0+4 = 4, Percent 0.
		{name: "default up rules from zero", b: Behavior{ScaleUp: DefaultScaleUpRules(), ScaleDown: DefaultScaleDownRules(0)},
			current: 0, desired: 10, mn: 0, mx: 20, want: 4, wantReason: ReasonScaleUpLimit},
		// Max is not enforced when there is no change.
		{name: "no change is within range", b: Behavior{ScaleUp: DefaultScaleUpRules(), ScaleDown: DefaultScaleDownRules(0)},
			current: 5, desired: 5, mn: 1, mx: 8, want: 5, wantReason: ReasonDesiredWithinRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := History{ScaleUpEvents: tt.upEvents, ScaleDownEvents: tt.downEvents}
			res := h.Normalize(tt.b, Input{Current: tt.current, Desired: tt.desired, Min: tt.mn, Max: tt.mx, Now: now})
			if res.Replicas != tt.want || res.LimitReason != tt.wantReason {
				t.Errorf("got %d/%s, want %d/%s", res.Replicas, res.LimitReason, tt.want, tt.wantReason)
			}
			if res.Limited != (res.Replicas != res.Stabilized) {
				t.Errorf("Limited = %v with stabilized %d and result %d", res.Limited, res.Stabilized, res.Replicas)
			}
		})
	}
}

func TestRecordScaleEvent(t *testing.T) {
	b := &Behavior{
		ScaleUp:   rules(0, SelectMax, Policy{PodsPolicy, 4, 15}, Policy{PercentPolicy, 100, 60}),
		ScaleDown: rules(300, SelectMax, Policy{PercentPolicy, 100, 15}),
	}
	tests := []struct {
		name       string
		b          *Behavior
		up, down   []ScaleEvent
		prev, next int32
		wantUp     []ScaleEvent
		wantDown   []ScaleEvent
	}{
		{name: "legacy keeps no events", b: nil, prev: 1, next: 5},
		{name: "scale up appends", b: b, up: events(2, 30*time.Second), prev: 3, next: 5,
			wantUp: []ScaleEvent{{Change: 2, Time: ago(30 * time.Second)}, {Change: 2, Time: now}}},
		// Longest up period is 60s: the 61s old event is outdated, its slot reused.
		{name: "outdated slot reused", b: b, up: events(2, 61*time.Second, 1, 30*time.Second), prev: 3, next: 7,
			wantUp: []ScaleEvent{{Change: 4, Time: now}, {Change: 1, Time: ago(30 * time.Second)}}},
		// Two outdated: both marked, the last one reused.
		{name: "last outdated slot reused", b: b, up: events(2, 90*time.Second, 1, 70*time.Second), prev: 3, next: 4,
			wantUp: []ScaleEvent{{Change: 2, Time: ago(90 * time.Second), Outdated: true}, {Change: 1, Time: now}}},
		{name: "scale down records the absolute change", b: b, down: events(1, 10*time.Second), prev: 9, next: 4,
			wantDown: []ScaleEvent{{Change: 1, Time: ago(10 * time.Second)}, {Change: 5, Time: now}}},
		{name: "scale down events use the down periods", b: b, down: events(1, 16*time.Second), prev: 9, next: 4,
			wantDown: []ScaleEvent{{Change: 5, Time: now}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := History{ScaleUpEvents: tt.up, ScaleDownEvents: tt.down}
			h.RecordScaleEvent(tt.b, tt.prev, tt.next, now)
			if !sameEvents(h.ScaleUpEvents, tt.wantUp) || !sameEvents(h.ScaleDownEvents, tt.wantDown) {
				t.Errorf("up %v down %v, want up %v down %v", h.ScaleUpEvents, h.ScaleDownEvents, tt.wantUp, tt.wantDown)
			}
		})
	}
}

func sameEvents(a, b []ScaleEvent) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Change != b[i].Change || !a[i].Time.Equal(b[i].Time) || a[i].Outdated != b[i].Outdated {
			return false
		}
	}
	return true
}

func TestHistoryClone(t *testing.T) {
	tests := []struct {
		name string
		h    History
	}{
		{name: "deep copy", h: History{Recommendations: recs(1, 0), ScaleUpEvents: events(1, 0), ScaleDownEvents: events(2, 0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.h.Clone()
			c.Recommendations[0].Replicas = 9
			c.ScaleUpEvents[0].Change = 9
			c.ScaleDownEvents[0].Change = 9
			if tt.h.Recommendations[0].Replicas == 9 || tt.h.ScaleUpEvents[0].Change == 9 || tt.h.ScaleDownEvents[0].Change == 9 {
				t.Errorf("clone shares memory with the original")
			}
		})
	}
}
