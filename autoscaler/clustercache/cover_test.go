package clustercache

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

func mustParse(t *testing.T, s string) labels.Selector {
	t.Helper()
	sel, err := labels.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

// TestCoverOf: the cover is a key every selector pins to a few values,
// with the union of those values; none when a selector could match a pod
// without that key.
func TestCoverOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		sels []string // "" stands for labels.Nothing()
		want string   // the cover's selector; "" for none
	}{
		{"one equality", []string{"app=web"}, "app in (web)"},
		{"two autoscalers of one key", []string{"app=web", "app=db"}, "app in (db,web)"},
		{"set-based and equality", []string{"app in (a,b)", "app==c"}, "app in (a,b,c)"},
		{"extra requirements kept out", []string{"app=web,tier=front", "app=db,tier!=x"}, "app in (db,web)"},
		{"fewest values of two common keys", []string{"app=web,team=x", "app=db,team=x"}, "team in (x)"},
		{"two requirements on one key intersect", []string{"app in (a,b),app=a", "app=c"}, "app in (a,c)"},
		{"not reconciled yet needs no cover", []string{"", "app=web"}, "app in (web)"},
		{"no key in common", []string{"app=web", "tier=front"}, ""},
		{"a selector without equality", []string{"app=web", "app"}, ""},
		{"everything", []string{"app=web", ","}, ""},
		{"only not reconciled", []string{""}, ""},
		{"none", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sels []labels.Selector
			for _, s := range tc.sels {
				if s == "" {
					sels = append(sels, labels.Nothing())
					continue
				}
				if s == "," {
					sels = append(sels, labels.Everything())
					continue
				}
				sels = append(sels, mustParse(t, s))
			}
			c, ok := CoverOf(sels)
			got := ""
			if ok {
				got = c.String()
			}
			if got != tc.want {
				t.Errorf("CoverOf(%q) = %q, want %q", tc.sels, got, tc.want)
			}
			if !ok {
				return
			}
			if fresh := (Cover{Key: c.Key, Values: c.Values}).String(); got != fresh {
				t.Errorf("CoverOf's kept selector %q, want %q, as String computes it", got, fresh)
			}
			// What the cover promises: each selector's matches are the cover's.
			for _, sel := range sels {
				if !c.Covers(sel) {
					t.Errorf("cover %q does not cover %q", got, sel)
				}
			}
		})
	}
}

// TestCoverOfTooLong: a cover longer than MaxCoverLength is none (the
// namespace is listed whole).
func TestCoverOfTooLong(t *testing.T) {
	var sels []labels.Selector
	for i := 0; len(sels)*len("app-0000,") <= MaxCoverLength; i++ {
		sels = append(sels, mustParse(t, fmt.Sprintf("app=app-%04d", i)))
	}
	if c, ok := CoverOf(sels); ok {
		t.Errorf("cover of %d selectors, %d bytes, want none", len(sels), len(c.String()))
	}
	if c, ok := CoverOf(sels[:len(sels)/2]); !ok || !strings.HasPrefix(c.String(), "app in (app-0000,") {
		t.Errorf("cover of half of them: %q, %v", c.String(), ok)
	}
}

// TestCoverCovers: a list made with the cover holds a selector's pods only
// when the selector pins the cover's key to its values.
func TestCoverCovers(t *testing.T) {
	c, ok := CoverOf([]labels.Selector{mustParse(t, "app=a"), mustParse(t, "app=b")})
	if !ok {
		t.Fatal("no cover")
	}
	for _, tc := range []struct {
		sel  string
		want bool
	}{
		{"app=a", true},
		{"app=a,tier=x", true},
		{"app in (a,b)", true},
		{"app=c", false},
		{"app in (a,c)", false},
		{"tier=x", false},
		{"app!=c", false},
		{"", false}, // everything
	} {
		t.Run(tc.sel, func(t *testing.T) {
			if got := c.Covers(mustParse(t, tc.sel)); got != tc.want {
				t.Errorf("Covers(%q) = %v, want %v", tc.sel, got, tc.want)
			}
		})
	}
	if !c.Covers(labels.Nothing()) {
		t.Error("a selector that matches nothing is covered")
	}
}

// TestSelectorTrackerSelectors: the tracker hands out a namespace's
// selectors, all and those of the keys asked for, as they follow puts and
// deletes; their cover is what a shared list selects.
func TestSelectorTrackerSelectors(t *testing.T) {
	tr := NewSelectorTracker()
	everyKey := func(string) bool { return true }
	cover := func(sels []labels.Selector) string {
		c, ok := CoverOf(sels)
		if !ok {
			return "none"
		}
		return c.String()
	}
	if kept, all := tr.Selectors("ns", everyKey); kept != nil || all != nil {
		t.Errorf("selectors of an unknown namespace: %v, %v", kept, all)
	}
	tr.PutIfAbsent("ns", "ns/a", labels.Nothing())
	tr.PutIfAbsent("ns", "ns/b", labels.Nothing())
	if _, all := tr.Selectors("ns", everyKey); cover(all) != "none" {
		t.Errorf("cover %q while no autoscaler is reconciled, want none", cover(all))
	}
	for key, raw := range map[string]string{"ns/a": "app=a", "ns/b": "app=b"} {
		if _, ok, err := tr.Parse("ns", key, raw); err != nil || !ok {
			t.Fatalf("%s: registered %v, error %v", key, ok, err)
		}
	}
	tr.PutIfAbsent("ns", "ns/c", mustParse(t, "app=c"))
	tr.PutIfAbsent("other", "other/d", mustParse(t, "app=d"))
	kept, all := tr.Selectors("ns", func(key string) bool { return key != "ns/b" })
	if cover(kept) != "app in (a,c)" || cover(all) != "app in (a,b,c)" {
		t.Errorf("covers of the kept and all selectors %q, %q; want app in (a,c), app in (a,b,c)", cover(kept), cover(all))
	}
	tr.Delete("ns", "ns/b")
	if _, all := tr.Selectors("ns", everyKey); cover(all) != "app in (a,c)" {
		t.Errorf("after a delete: cover %q; want app in (a,c)", cover(all))
	}
}

// BenchmarkCoverOf: the cover of a namespace's 1,000 autoscalers, as a
// shared PodMetrics list computes it.
func BenchmarkCoverOf(b *testing.B) {
	sels := make([]labels.Selector, 1000)
	for i := range sels {
		sels[i] = labels.SelectorFromSet(labels.Set{"app": fmt.Sprintf("w-%04d", i)})
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := CoverOf(sels); !ok {
			b.Fatal("no cover")
		}
	}
}
