package behavior

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func precs(pairs ...any) []Recommendation {
	var out []Recommendation
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, Recommendation{Replicas: int32(pairs[i].(int)), Time: at(float64(pairs[i+1].(int)))})
	}
	return out
}

func pevents(pairs ...any) []ScaleEvent {
	var out []ScaleEvent
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, ScaleEvent{Change: int32(pairs[i].(int)), Time: at(float64(pairs[i+1].(int)))})
	}
	return out
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		h    History
	}{
		{name: "empty", h: History{Recommendations: []Recommendation{}}},
		{name: "recommendations only", h: History{Recommendations: precs(5, 0, 3, 15, 1, 30)}},
		{name: "with events", h: History{Recommendations: precs(2, 10), ScaleUpEvents: pevents(4, 0), ScaleDownEvents: pevents(1, 5, 2, 20)}},
		{name: "outdated events", h: History{Recommendations: precs(2, 10), ScaleUpEvents: []ScaleEvent{{Change: 4, Time: at(0), Outdated: true}, {Change: 1, Time: at(9)}}}},
		{name: "nanosecond times and large counts", h: History{Recommendations: []Recommendation{{Replicas: 1<<31 - 1, Time: time.Unix(0, 1763716000123456789)}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc := tt.h.Encode()
			got, err := Decode(enc)
			if err != nil {
				t.Fatalf("Decode(%s): %v", enc, err)
			}
			if !got.Equal(tt.h) {
				t.Errorf("round trip of %s: got %+v, want %+v", enc, got, tt.h)
			}
			if got.Recommendations == nil {
				t.Error("decoded Recommendations are nil: a seeded object would record its initial recommendation again")
			}
		})
	}
}

// marshalPersisted is the encoding as json.Marshal makes it of
// persisted, the reference Encode must equal byte for byte.
func marshalPersisted(t *testing.T, h History) string {
	t.Helper()
	entry := func(v int32, at time.Time, outdated bool) []int64 {
		if outdated {
			return []int64{int64(v), at.UnixNano(), 1}
		}
		return []int64{int64(v), at.UnixNano()}
	}
	p := persisted{Version: persistedVersion, Recs: [][]int64{}}
	for _, r := range h.Recommendations {
		p.Recs = append(p.Recs, entry(r.Replicas, r.Time, false))
	}
	for _, e := range h.ScaleUpEvents {
		p.Up = append(p.Up, entry(e.Change, e.Time, e.Outdated))
	}
	for _, e := range h.ScaleDownEvents {
		p.Down = append(p.Down, entry(e.Change, e.Time, e.Outdated))
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestEncodeMatchesMarshal: Encode writes what json.Marshal writes of
// persisted, for named shapes and for random histories; a history takes
// two allocations (the buffer and the string).
func TestEncodeMatchesMarshal(t *testing.T) {
	tests := []struct {
		name string
		h    History
	}{
		{name: "nil recommendations", h: History{}},
		{name: "empty events kept empty", h: History{Recommendations: precs(3, 0), ScaleUpEvents: []ScaleEvent{}, ScaleDownEvents: []ScaleEvent{}}},
		{name: "both event lists", h: History{Recommendations: precs(2, 10, 4, 20), ScaleUpEvents: pevents(4, 0), ScaleDownEvents: pevents(1, 5, 2, 20)}},
		{name: "outdated events", h: History{ScaleDownEvents: []ScaleEvent{{Change: 4, Time: at(0), Outdated: true}, {Change: 1, Time: at(9)}}}},
		{name: "extremes", h: History{Recommendations: []Recommendation{{Replicas: 1<<31 - 1, Time: time.Unix(0, 1<<62)}, {Replicas: 0, Time: time.Unix(-5, 0)}}}},
	}
	rng := rand.New(rand.NewPCG(7, 21))
	for i := range 200 {
		var h History
		for range rng.IntN(MaxPersistedEntries + 1) {
			h.Recommendations = append(h.Recommendations, Recommendation{Replicas: rng.Int32(), Time: time.Unix(0, rng.Int64())})
		}
		for _, events := range []*[]ScaleEvent{&h.ScaleUpEvents, &h.ScaleDownEvents} {
			for range rng.IntN(4) {
				*events = append(*events, ScaleEvent{Change: rng.Int32N(100), Time: time.Unix(0, rng.Int64()), Outdated: rng.IntN(2) == 0})
			}
		}
		tests = append(tests, struct {
			name string
			h    History
		}{name: fmt.Sprintf("random %d", i), h: h})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := tt.h.Encode(), marshalPersisted(t, tt.h); got != want {
				t.Errorf("Encode = %s\nwant     %s", got, want)
			}
		})
	}
	h := History{Recommendations: precs(5, 0, 3, 15, 1, 30), ScaleDownEvents: pevents(2, 20)}
	if n := testing.AllocsPerRun(100, func() { _ = h.Encode() }); n > 2 {
		t.Errorf("Encode allocated %v times, want at most 2", n)
	}
}

func TestEncodingIsCompact(t *testing.T) {
	h := History{Recommendations: precs(5, 0, 1, 15), ScaleDownEvents: pevents(3, 20)}
	enc := h.Encode()
	if len(enc) > 100 {
		t.Errorf("encoding of 3 entries is %d bytes: %s", len(enc), enc)
	}
	if strings.Contains(enc, `"u"`) {
		t.Errorf("empty scale-up events encoded: %s", enc)
	}
}

func TestDecodeRejects(t *testing.T) {
	long := `{"v":1,"r":[` + strings.Repeat(`[1,1],`, MaxPersistedEntries) + `[1,1]]}`
	for _, tt := range []struct{ name, in, wantErr string }{
		{"not json", "{", "decoding"},
		{"unknown version", `{"v":2,"r":[]}`, "unknown version 2"},
		{"missing version", `{"r":[]}`, "unknown version 0"},
		{"too many entries", long, "at most"},
		{"entry too short", `{"v":1,"r":[[1]]}`, "malformed"},
		{"outdated recommendation", `{"v":1,"r":[[1,5,1]]}`, "malformed"},
		{"bad outdated mark", `{"v":1,"d":[[1,5,7]]}`, "malformed"},
		{"negative count", `{"v":1,"r":[[-1,5]]}`, "out of range"},
		{"count above int32", `{"v":1,"u":[[2147483648,5]]}`, "out of range"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Decode(%q) = %v, want an error containing %q", tt.in, err, tt.wantErr)
			}
		})
	}
}

func TestCompact(t *testing.T) {
	now := at(100)
	tests := []struct {
		name string
		h    History
		ret  Retention
		want History
	}{{
		name: "drops recommendations older than the window, keeps the one at the cutoff",
		h:    History{Recommendations: precs(9, 0, 8, 10, 7, 20)},
		ret:  Retention{DownWindow: 90 * time.Second},
		want: History{Recommendations: precs(8, 10, 7, 20)},
	}, {
		name: "drops a recommendation a newer one at least as large hides",
		h:    History{Recommendations: precs(3, 50, 5, 60, 5, 70, 2, 80)},
		ret:  Retention{DownWindow: 300 * time.Second},
		want: History{Recommendations: precs(5, 70, 2, 80)},
	}, {
		name: "slots out of order are sorted",
		h:    History{Recommendations: precs(2, 80, 5, 70, 3, 50)},
		ret:  Retention{DownWindow: 300 * time.Second},
		want: History{Recommendations: precs(5, 70, 2, 80)},
	}, {
		name: "a scale-up window keeps the minima too",
		h:    History{Recommendations: precs(3, 50, 5, 60, 1, 70, 4, 80)},
		ret:  Retention{UpWindow: 60 * time.Second, DownWindow: 60 * time.Second},
		want: History{Recommendations: precs(5, 60, 1, 70, 4, 80)},
	}, {
		name: "windows of different lengths",
		h:    History{Recommendations: precs(1, 10, 9, 30, 2, 95)},
		ret:  Retention{UpWindow: 95 * time.Second, DownWindow: 30 * time.Second},
		want: History{Recommendations: precs(1, 10, 2, 95)},
	}, {
		name: "everything expired leaves an empty, non-nil list",
		h:    History{Recommendations: precs(4, 0)},
		ret:  Retention{DownWindow: 10 * time.Second},
		want: History{Recommendations: []Recommendation{}},
	}, {
		name: "events kept as they are: slot order and outdated marks decide later sums",
		h: History{
			Recommendations: precs(1, 100),
			ScaleUpEvents:   []ScaleEvent{{Change: 2, Time: at(90)}, {Change: 1, Time: at(10), Outdated: true}},
			ScaleDownEvents: pevents(3, 40, 4, 41),
		},
		ret: Retention{DownWindow: time.Second},
		want: History{
			Recommendations: precs(1, 100),
			ScaleUpEvents:   []ScaleEvent{{Change: 2, Time: at(90)}, {Change: 1, Time: at(10), Outdated: true}},
			ScaleDownEvents: pevents(3, 40, 4, 41),
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := slices.Clone(tt.h.Recommendations)
			got := tt.h.Compact(tt.ret, now)
			if !got.Equal(tt.want) || got.Recommendations == nil {
				t.Errorf("Compact:\n got  %+v\n want %+v", got, tt.want)
			}
			if !slices.Equal(tt.h.Recommendations, before) {
				t.Errorf("Compact changed its input: %+v, was %+v", tt.h.Recommendations, before)
			}
		})
	}
	// Sorted (as recorded), the recommendations are not copied to be
	// sorted: the kept list is the one allocation.
	var sorted History
	for i := range 20 {
		sorted.Recommendations = append(sorted.Recommendations, Recommendation{Replicas: int32(20 - i), Time: at(float64(i))})
	}
	if n := testing.AllocsPerRun(100, func() { sorted.Compact(Retention{DownWindow: time.Hour}, now) }); n != 1 {
		t.Errorf("Compact of a sorted history allocated %v times, want 1", n)
	}
}

func TestCompactSizeBound(t *testing.T) {
	// Strictly decreasing recommendations are all kept by the down window:
	// the bound keeps the newest.
	var h History
	for i := range 3 * MaxPersistedEntries {
		h.Recommendations = append(h.Recommendations, Recommendation{Replicas: int32(1000 - i), Time: at(float64(i))})
		h.ScaleDownEvents = append(h.ScaleDownEvents, ScaleEvent{Change: 1, Time: at(float64(i))})
	}
	got := h.Compact(Retention{DownWindow: time.Hour}, at(200))
	if len(got.Recommendations) != MaxPersistedEntries || len(got.ScaleDownEvents) != MaxPersistedEntries {
		t.Fatalf("kept %d recommendations and %d events, want %d each", len(got.Recommendations), len(got.ScaleDownEvents), MaxPersistedEntries)
	}
	if last := got.Recommendations[MaxPersistedEntries-1]; last.Replicas != int32(1000-3*MaxPersistedEntries+1) {
		t.Errorf("newest kept recommendation %+v, want the newest of all", last)
	}
	enc := got.Encode()
	if len(enc) > 5000 {
		t.Errorf("bounded encoding is %d bytes", len(enc))
	}
	if _, err := Decode(enc); err != nil {
		t.Errorf("bounded encoding does not decode: %v", err)
	}
}

// TestSeededHistoryDecidesAlike is the property persistence rests on: for
// random histories and behaviors, a history compacted, encoded, decoded and
// compacted again at a later time (a new leader seeding itself) makes the
// same decisions as the original, over a random sequence of reconciles.
func TestSeededHistoryDecidesAlike(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 2000 {
		b := Behavior{
			ScaleUp: Rules{StabilizationWindowSeconds: int32(rng.IntN(3) * 30), SelectPolicy: SelectMax,
				Policies: []Policy{{Type: PodsPolicy, Value: int32(1 + rng.IntN(4)), PeriodSeconds: int32(15 + rng.IntN(60))}}},
			ScaleDown: Rules{StabilizationWindowSeconds: int32(rng.IntN(4) * 30), SelectPolicy: SelectMax,
				Policies: []Policy{{Type: PercentPolicy, Value: int32(10 + rng.IntN(90)), PeriodSeconds: int32(15 + rng.IntN(60))}}},
		}
		legacy := rng.IntN(3) == 0
		var bp *Behavior
		if !legacy {
			bp = &b
		}
		window := time.Duration(rng.IntN(5)*15) * time.Second
		ret := RetentionFor(bp, window)
		var orig History
		current := int32(1 + rng.IntN(10))
		now := t0
		step := func(h *History, cur int32, desired int32, now time.Time) int32 {
			h.RecordInitial(cur, now)
			in := Input{Current: cur, Desired: desired, Min: 1, Max: 20, Now: now}
			var res Result
			if legacy {
				res = h.NormalizeLegacy(in, window)
			} else {
				res = h.Normalize(b, in)
			}
			if res.Replicas != cur {
				h.RecordScaleEvent(bp, cur, res.Replicas, now)
			}
			return res.Replicas
		}
		desired := func() int32 { return int32(1 + rng.IntN(20)) }
		for range 1 + rng.IntN(20) {
			now = now.Add(time.Duration(1+rng.IntN(20)) * time.Second)
			current = step(&orig, current, desired(), now)
		}
		seededAt := now.Add(time.Duration(rng.IntN(10)) * time.Second)
		seed, err := Decode(orig.Compact(ret, now).Encode())
		if err != nil {
			t.Fatal(err)
		}
		seeded := seed.Compact(ret, seededAt)
		curA, curB := current, current
		for i := range 30 {
			now = now.Add(time.Duration(1+rng.IntN(20)) * time.Second)
			if now.Before(seededAt) {
				now = seededAt
			}
			d := desired()
			curA, curB = step(&orig, curA, d, now), step(&seeded, curB, d, now)
			if curA != curB {
				t.Fatalf("iteration %d, reconcile %d (legacy %v, window %s, behavior %+v): seeded history decided %d, original %d",
					iter, i, legacy, window, b, curB, curA)
			}
		}
	}
}
