package behavior

import (
	"slices"
	"time"
)

// Recommendation is one unstabilized replica proposal and when it was made.
type Recommendation struct {
	Replicas int32
	Time     time.Time
}

// ScaleEvent is one successful rescale in one direction.
type ScaleEvent struct {
	// Change is the absolute replica change (positive).
	Change int32
	Time   time.Time
	// Outdated marks a slot older than its direction's longest policy period;
	// the next event of that direction reuses it. Outdated events still count
	// when their time falls within a policy period (upstream only looks at
	// times when summing).
	Outdated bool
}

// History is the in-memory state upstream keeps per autoscaler. The zero
// value is an empty history. Methods with a pointer receiver modify it in
// place (slots are reused as upstream does); use Clone to keep a copy.
type History struct {
	Recommendations []Recommendation
	ScaleUpEvents   []ScaleEvent
	ScaleDownEvents []ScaleEvent
}

// Clone returns a deep copy.
func (h History) Clone() History {
	return History{
		Recommendations: slices.Clone(h.Recommendations),
		ScaleUpEvents:   slices.Clone(h.ScaleUpEvents),
		ScaleDownEvents: slices.Clone(h.ScaleDownEvents),
	}
}

// RecordInitial records (current, now) when no recommendation has ever been
// recorded (nil slice), as upstream does right after reading the scale of an
// object. Consequence kept from upstream: after a restart the controller does
// not scale below the current count for one down-stabilization window.
func (h *History) RecordInitial(current int32, now time.Time) {
	if h.Recommendations == nil {
		h.Recommendations = []Recommendation{{Replicas: current, Time: now}}
	}
}

// record stores desired in slot idx when found, else appends.
func (h *History) record(desired int32, now time.Time, found bool, idx int) {
	r := Recommendation{Replicas: desired, Time: now}
	if found {
		h.Recommendations[idx] = r
	} else {
		h.Recommendations = append(h.Recommendations, r)
	}
}

// RecordScaleEvent records a successful rescale from prev to next replicas.
// It does nothing when b is nil (legacy normalization keeps no events). Events
// of the direction older than its longest policy period are marked outdated
// and the last outdated slot is reused; otherwise the event is appended.
func (h *History) RecordScaleEvent(b *Behavior, prev, next int32, now time.Time) {
	if b == nil {
		return
	}
	if next > prev {
		h.ScaleUpEvents = storeEvent(h.ScaleUpEvents, b.ScaleUp.longestPeriod(), next-prev, now)
	} else {
		h.ScaleDownEvents = storeEvent(h.ScaleDownEvents, b.ScaleDown.longestPeriod(), prev-next, now)
	}
}

func storeEvent(events []ScaleEvent, longestPeriodSeconds int32, change int32, now time.Time) []ScaleEvent {
	cutoff := now.Add(-time.Second * time.Duration(longestPeriodSeconds))
	found, idx := false, 0
	for i := range events {
		if events[i].Time.Before(cutoff) {
			events[i].Outdated = true
		}
		if events[i].Outdated {
			found, idx = true, i
		}
	}
	e := ScaleEvent{Change: change, Time: now}
	if found {
		events[idx] = e
		return events
	}
	return append(events, e)
}

// changeWithin sums the changes of events strictly newer than now-period.
func changeWithin(events []ScaleEvent, periodSeconds int32, now time.Time) int32 {
	cutoff := now.Add(-time.Second * time.Duration(periodSeconds))
	var sum int32
	for _, e := range events {
		if e.Time.After(cutoff) {
			sum += e.Change
		}
	}
	return sum
}
