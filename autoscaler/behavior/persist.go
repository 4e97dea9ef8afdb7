package behavior

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Retention says how long a recommendation can still change a decision:
// recommendations are read within the scale-up and scale-down
// stabilization windows. (Scale events are kept as they are: see Compact.)
type Retention struct {
	UpWindow, DownWindow time.Duration
}

// RetentionFor is the retention of an autoscaler with the defaulted
// behavior b; nil (legacy rules) keeps recommendations for the controller's
// downscale window only.
func RetentionFor(b *Behavior, downscaleWindow time.Duration) Retention {
	if b == nil {
		return Retention{DownWindow: downscaleWindow}
	}
	sec := func(s int32) time.Duration { return time.Duration(s) * time.Second }
	return Retention{UpWindow: sec(b.ScaleUp.StabilizationWindowSeconds), DownWindow: sec(b.ScaleDown.StabilizationWindowSeconds)}
}

// MaxPersistedEntries bounds each list of a compacted History, so that the
// encoding stays a few kilobytes at most (an entry takes about 25 bytes).
// Compaction leaves one recommendation per distinct replica count and
// direction of change in practice; the bound only cuts pathological
// histories (oldest entries first).
const MaxPersistedEntries = 64

// Compact returns the part of h that can still change a decision made at
// now or later, with the same windows and periods:
//
//   - recommendations older than both windows are dropped (a window
//     includes its cutoff, the legacy rules' convention, so nothing
//     relevant is dropped at the boundary);
//   - a recommendation is dropped when a newer one is at least as large
//     (it can no longer be the maximum of any window that contains it) and,
//     for the scale-up window, a newer one is at most as large (nor the
//     minimum); with a zero scale-up window only the first test applies,
//     since no past recommendation enters a zero window;
//   - scale events are kept as they are, in slot order with their Outdated
//     marks: upstream counts the events of both directions within each
//     policy period (a scale-down policy sums the recent scale-ups too), and
//     a new event reuses the last slot marked outdated (older than its own
//     direction's longest period), so which events still count depends on
//     slot order. Dropping or reordering any would change later decisions.
//     The lists stay short anyway: a slot is reused as soon as its event is
//     older than the longest period, so a list holds about one event per
//     rescale within that period.
//
// Recommendations are sorted by time. They are never nil: a
// compacted history says the object has been seen, so the initial
// recommendation (RecordInitial) is not recorded again when it is seeded.
func (h History) Compact(ret Retention, now time.Time) History {
	byTime := func(a, b Recommendation) int { return a.Time.Compare(b.Time) }
	// Recorded in time order, recommendations are sorted already but for
	// reused slots; only then are they copied to be sorted (this runs up
	// to three times a reconcile).
	recs := h.Recommendations
	if !slices.IsSortedFunc(recs, byTime) {
		recs = slices.Clone(recs)
		slices.SortStableFunc(recs, byTime)
	}
	upCutoff, downCutoff := now.Add(-ret.UpWindow), now.Add(-ret.DownWindow)
	kept := make([]Recommendation, 0, len(recs))
	var newerMax, newerMin int32
	for i := len(recs) - 1; i >= 0; i-- {
		r := recs[i]
		newer := i < len(recs)-1
		forDown := !r.Time.Before(downCutoff) && (!newer || r.Replicas > newerMax)
		forUp := ret.UpWindow > 0 && !r.Time.Before(upCutoff) && (!newer || r.Replicas < newerMin)
		if !newer {
			newerMax, newerMin = r.Replicas, r.Replicas
		} else {
			newerMax, newerMin = max(newerMax, r.Replicas), min(newerMin, r.Replicas)
		}
		if forDown || forUp {
			kept = append(kept, r)
		}
	}
	slices.Reverse(kept)
	return History{
		Recommendations: tail(kept),
		ScaleUpEvents:   tail(slices.Clone(h.ScaleUpEvents)),
		ScaleDownEvents: tail(slices.Clone(h.ScaleDownEvents)),
	}
}

func tail[T any](s []T) []T {
	if len(s) > MaxPersistedEntries {
		return s[len(s)-MaxPersistedEntries:]
	}
	return s
}

// persisted is the encoding of a History: each entry is [value, unix
// nanoseconds] (nanoseconds, so that window cutoffs compare exactly as in
// memory), with a third element 1 for an event marked outdated. Field
// names are short: the encoding is stored in an annotation.
type persisted struct {
	Version int       `json:"v"`
	Recs    [][]int64 `json:"r"`
	Up      [][]int64 `json:"u,omitempty"`
	Down    [][]int64 `json:"d,omitempty"`
}

const persistedVersion = 1

// Encode returns the compact encoding of h (use Compact first), e.g.
// {"v":1,"r":[[5,1763716000123456789]],"d":[[2,1763716010123456789]]}:
// what json.Marshal makes of persisted, written with strconv because the
// history is encoded on every status write and Marshal's reflection and
// slice per entry showed in profiles at 1,000 autoscalers.
func (h History) Encode() string {
	n := len(h.Recommendations) + len(h.ScaleUpEvents) + len(h.ScaleDownEvents)
	b := make([]byte, 0, 24+32*n)
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, persistedVersion, 10)
	b = append(b, `,"r":[`...)
	for i, r := range h.Recommendations {
		b = appendEntry(b, i, int64(r.Replicas), r.Time, false)
	}
	b = append(b, ']')
	b = appendEvents(b, `,"u":[`, h.ScaleUpEvents)
	b = appendEvents(b, `,"d":[`, h.ScaleDownEvents)
	return string(append(b, '}'))
}

// appendEvents appends a list of events as a member opened by open, or
// nothing for none (persisted's omitempty).
func appendEvents(b []byte, open string, events []ScaleEvent) []byte {
	if len(events) == 0 {
		return b
	}
	b = append(b, open...)
	for i, e := range events {
		b = appendEntry(b, i, int64(e.Change), e.Time, e.Outdated)
	}
	return append(b, ']')
}

// appendEntry appends the i-th entry of a list: [value,unix nanoseconds],
// with a third element 1 when outdated.
func appendEntry(b []byte, i int, value int64, t time.Time, outdated bool) []byte {
	if i > 0 {
		b = append(b, ',')
	}
	b = append(b, '[')
	b = strconv.AppendInt(b, value, 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, t.UnixNano(), 10)
	if outdated {
		b = append(b, ",1"...)
	}
	return append(b, ']')
}

// Decode parses an encoding made by Encode. The result's Recommendations
// are never nil. Entries beyond MaxPersistedEntries (oldest first) and
// values outside int32 are rejected.
func Decode(s string) (History, error) {
	var p persisted
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		return History{}, fmt.Errorf("decoding the autoscaler history: %w", err)
	}
	if p.Version != persistedVersion {
		return History{}, fmt.Errorf("decoding the autoscaler history: unknown version %d", p.Version)
	}
	for i, l := range [][][]int64{p.Recs, p.Up, p.Down} {
		if len(l) > MaxPersistedEntries {
			return History{}, fmt.Errorf("decoding the autoscaler history: %d entries, at most %d allowed", len(l), MaxPersistedEntries)
		}
		for _, e := range l {
			if n := len(e); n < 2 || n > 3 || (n == 3 && (i == 0 || e[2] != 1)) {
				return History{}, fmt.Errorf("decoding the autoscaler history: malformed entry %v", e)
			}
			if e[0] < 0 || e[0] > 1<<31-1 {
				return History{}, fmt.Errorf("decoding the autoscaler history: value %d out of range", e[0])
			}
		}
	}
	h := History{Recommendations: make([]Recommendation, 0, len(p.Recs))}
	for _, e := range p.Recs {
		h.Recommendations = append(h.Recommendations, Recommendation{Replicas: int32(e[0]), Time: time.Unix(0, e[1])})
	}
	dec := func(l [][]int64) []ScaleEvent {
		var out []ScaleEvent
		for _, e := range l {
			out = append(out, ScaleEvent{Change: int32(e[0]), Time: time.Unix(0, e[1]), Outdated: len(e) == 3})
		}
		return out
	}
	h.ScaleUpEvents, h.ScaleDownEvents = dec(p.Up), dec(p.Down)
	return h, nil
}

// Newest returns the latest time of any recommendation or scale event of
// h; zero when h is empty.
func (h History) Newest() time.Time {
	var newest time.Time
	for _, r := range h.Recommendations {
		if r.Time.After(newest) {
			newest = r.Time
		}
	}
	for _, e := range slices.Concat(h.ScaleUpEvents, h.ScaleDownEvents) {
		if e.Time.After(newest) {
			newest = e.Time
		}
	}
	return newest
}

// NotAfter returns a copy of h whose recommendations and scale events
// later than t are at t. A time in the future (a history written by a
// replica whose clock is ahead, or edited) would keep its entry inside
// every window and policy period until that time plus the window, and so
// hold off scaling down for as long; at t it counts as made now.
func (h History) NotAfter(t time.Time) History {
	out := h.Clone()
	for i := range out.Recommendations {
		if out.Recommendations[i].Time.After(t) {
			out.Recommendations[i].Time = t
		}
	}
	for _, events := range [][]ScaleEvent{out.ScaleUpEvents, out.ScaleDownEvents} {
		for i := range events {
			if events[i].Time.After(t) {
				events[i].Time = t
			}
		}
	}
	return out
}

// Equal reports whether h and o hold the same entries in the same order
// (times compared with Time.Equal).
func (h History) Equal(o History) bool {
	recEq := func(a, b Recommendation) bool { return a.Replicas == b.Replicas && a.Time.Equal(b.Time) }
	evEq := func(a, b ScaleEvent) bool {
		return a.Change == b.Change && a.Time.Equal(b.Time) && a.Outdated == b.Outdated
	}
	return slices.EqualFunc(h.Recommendations, o.Recommendations, recEq) &&
		slices.EqualFunc(h.ScaleUpEvents, o.ScaleUpEvents, evEq) &&
		slices.EqualFunc(h.ScaleDownEvents, o.ScaleDownEvents, evEq)
}
