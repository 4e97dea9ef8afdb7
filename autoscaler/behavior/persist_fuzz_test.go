package behavior

import (
	"strings"
	"testing"
	"time"
)

// FuzzDecode feeds arbitrary text to Decode, as a stored history annotation
// or status field may hold anything someone wrote: it must not panic; what
// it accepts has non-nil Recommendations, encodes back to text that decodes
// to the same history, and compacts, caps (NotAfter) and re-encodes
// without panicking into a history Decode accepts again.
func FuzzDecode(f *testing.F) {
	for _, h := range []History{
		{Recommendations: []Recommendation{}},
		{Recommendations: precs(5, 0, 3, 15, 1, 30)},
		{Recommendations: precs(2, 10), ScaleUpEvents: pevents(4, 0), ScaleDownEvents: pevents(1, 5, 2, 20)},
		{Recommendations: precs(2, 10), ScaleUpEvents: []ScaleEvent{{Change: 4, Time: at(0), Outdated: true}, {Change: 1, Time: at(9)}}},
		{Recommendations: []Recommendation{{Replicas: 1<<31 - 1, Time: time.Unix(0, 1763716000123456789)}}},
	} {
		f.Add(h.Encode(), int64(30), int64(300))
	}
	for _, s := range []string{
		"", "{", "null", `{"v":2,"r":[]}`, `{"r":[]}`, `{"v":1,"r":[[1]]}`, `{"v":1,"r":[[1,5,1]]}`,
		`{"v":1,"d":[[1,5,7]]}`, `{"v":1,"r":[[-1,5]]}`, `{"v":1,"u":[[2147483648,5]]}`,
		`{"v":1,"r":[` + strings.Repeat(`[1,1],`, MaxPersistedEntries) + `[1,1]]}`,
		`{"v":1,"r":[[1,9223372036854775807]],"u":[[1,-9223372036854775808,1]]}`,
		`{"v":1.5}`, `{"v":1,"r":null,"u":[[]]}`, `{"v":1,"r":[[1,1e3]]}`,
	} {
		f.Add(s, int64(0), int64(300))
	}

	f.Fuzz(func(t *testing.T, s string, upSeconds, downSeconds int64) {
		h, err := Decode(s)
		if err != nil {
			return
		}
		if h.Recommendations == nil {
			t.Fatalf("Decode(%q): nil Recommendations", s)
		}
		enc := h.Encode()
		again, err := Decode(enc)
		if err != nil {
			t.Fatalf("Decode(%q) = %+v, whose encoding %s does not decode: %v", s, h, enc, err)
		}
		if !again.Equal(h) {
			t.Fatalf("Decode(%q) = %+v, but its encoding %s decodes to %+v", s, h, enc, again)
		}

		// What the controller does with a seeded history.
		now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		window := func(s int64) time.Duration { return time.Duration(s%(7*24*3600)) * time.Second }
		ret := Retention{UpWindow: max(window(upSeconds), 0), DownWindow: max(window(downSeconds), 0)}
		capped := h.NotAfter(now)
		if n := capped.Newest(); n.After(now) {
			t.Fatalf("NotAfter(now) of %q has an entry at %v, after now", s, n)
		}
		compacted := capped.Compact(ret, now)
		if compacted.Recommendations == nil {
			t.Fatalf("Compact of %q: nil Recommendations", s)
		}
		if _, err := Decode(compacted.Encode()); err != nil {
			t.Fatalf("Compact of %q encodes to %s, which does not decode: %v", s, compacted.Encode(), err)
		}
	})
}
