package shard

import (
	"fmt"
	"math"
	"testing"
	"time"
)

func keys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("bench-%d/w-%04d", i%10, i)
	}
	return out
}

func TestOwnerSpreadsKeysEvenly(t *testing.T) {
	members := []string{"vm_1b2c", "vm_1b2d", "vm_9f00"}
	count := map[string]int{}
	for _, k := range keys(9000) {
		count[Owner(k, members)]++
	}
	for _, m := range members {
		if got := count[m]; math.Abs(float64(got)-3000) > 200 {
			t.Errorf("%s owns %d of 9000 keys, want about 3000: %v", m, got, count)
		}
	}
}

func TestOwnerMovesOnlyWhatItMust(t *testing.T) {
	three := []string{"a", "b", "c"}
	four := []string{"a", "b", "c", "d"}
	moved, toNew := 0, 0
	for _, k := range keys(4000) {
		before, after := Owner(k, three), Owner(k, four)
		if before != after {
			moved++
			if after == "d" {
				toNew++
			}
		}
		// A member leaving moves only its own keys.
		if lost := Owner(k, []string{"a", "c"}); before != "b" && lost != before {
			t.Fatalf("key %s moved from %s to %s when b left", k, before, lost)
		}
	}
	if moved != toNew {
		t.Errorf("%d keys moved when d joined, %d of them to d: only keys of the new member should move", moved, toNew)
	}
	if math.Abs(float64(toNew)-1000) > 150 {
		t.Errorf("d took %d of 4000 keys, want about 1000", toNew)
	}
}

func TestOwnerEdgeCases(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members []string
		want    string
	}{
		{"no members", nil, ""},
		{"one member owns everything", []string{"only"}, "only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Owner("ns/x", tc.members); got != tc.want {
				t.Errorf("Owner = %q, want %q", got, tc.want)
			}
		})
	}
	// The order of the member list does not matter.
	if Owner("ns/x", []string{"a", "b", "c"}) != Owner("ns/x", []string{"c", "a", "b"}) {
		t.Error("the owner depends on the member order")
	}
}

func TestMembers(t *testing.T) {
	now := time.Unix(1000, 0)
	d := 15 * time.Second
	for _, tc := range []struct {
		name    string
		records []Record
		want    string
	}{
		{"live records, sorted", []Record{{Holder: "b", Renewed: now, Duration: d}, {Holder: "a", Renewed: now.Add(-14 * time.Second), Duration: d}}, "[a b]"},
		{"an expired record is no member", []Record{{Holder: "a", Renewed: now.Add(-15 * time.Second), Duration: d}, {Holder: "b", Renewed: now, Duration: d}}, "[b]"},
		{"a released record (no holder) is no member", []Record{{Holder: "", Renewed: now, Duration: d}}, "[]"},
		{"a holder twice counts once", []Record{{Holder: "a", Renewed: now, Duration: d}, {Holder: "a", Renewed: now, Duration: d}}, "[a]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fmt.Sprint(Members(tc.records, now)); got != tc.want && !(got == "[]" && tc.want == "[]") {
				t.Errorf("Members = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestViewOwns(t *testing.T) {
	members := []string{"a", "b"}
	for _, k := range keys(50) {
		a := View{Members: members, Self: "a", Active: true}
		b := View{Members: members, Self: "b", Active: true}
		if a.Owns(k) == b.Owns(k) {
			t.Fatalf("key %s: owned by both or neither", k)
		}
		if (View{Members: members, Self: "a"}).Owns(k) {
			t.Fatalf("an inactive member owns %s", k)
		}
	}
}
