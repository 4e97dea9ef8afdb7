package clustercache

import (
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestSelectorTracker: the indexed overlap check finds exactly the
// autoscalers a test of every selector finds, after adds, selector changes
// and deletes.
func TestSelectorTracker(t *testing.T) {
	tr := NewSelectorTracker()
	sels := map[string]string{
		"web":       "app=web",
		"web-front": "app=web,tier=front",
		"set":       "app in (web,db)",
		"multi":     "tier in (front,back)",
		"exists":    "tier",
		"notin":     "app notin (db)",
		"all":       "",
		"db":        "app=db",
	}
	for key := range sels {
		tr.PutIfAbsent("a", key, labels.Nothing())
	}
	tr.PutIfAbsent("b", "other", labels.Everything())
	for key, s := range sels {
		if _, ok, err := tr.Parse("a", key, s); err != nil || !ok {
			t.Fatalf("%s: registered %v, error %v", key, ok, err)
		}
	}
	// web changes its selector; notin is deleted.
	if _, ok, err := tr.Parse("a", "web", "app=web,tier=back"); err != nil || !ok {
		t.Fatalf("web: registered %v, error %v", ok, err)
	}
	sels["web"] = "app=web,tier=back"
	tr.Delete("a", "notin")
	delete(sels, "notin")

	pod := func(l map[string]string) *corev1.Pod { return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: l}} }
	for _, tc := range []struct {
		name string
		pods []*corev1.Pod
	}{
		{name: "web front", pods: []*corev1.Pod{pod(map[string]string{"app": "web", "tier": "front"})}},
		{name: "web back", pods: []*corev1.Pod{pod(map[string]string{"app": "web", "tier": "back"})}},
		{name: "db", pods: []*corev1.Pod{pod(map[string]string{"app": "db"})}},
		{name: "no labels", pods: []*corev1.Pod{pod(nil)}},
		{name: "two pods", pods: []*corev1.Pod{pod(map[string]string{"app": "db"}), pod(map[string]string{"tier": "front"})}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want []string
			for key, s := range sels {
				sel, _ := labels.Parse(s)
				for _, p := range tc.pods {
					if sel.Matches(labels.Set(p.Labels)) {
						want = append(want, key)
						break
					}
				}
			}
			slices.Sort(want)
			if got := tr.Matching("a", tc.pods, 0); !slices.Equal(got, want) {
				t.Errorf("matching = %v, want %v", got, want)
			}
			if got := tr.Matching("a", tc.pods, 2); len(got) != min(2, len(want)) {
				t.Errorf("matching with limit 2 = %v, want 2 of %v", got, want)
			}
		})
	}
	if n := tr.Count("a"); n != len(sels) {
		t.Errorf("count = %d, want %d", n, len(sels))
	}
}

// TestParse: a key's selector is parsed and registered once per string;
// a changed string is parsed again and re-indexed; an invalid one keeps
// the last good selector; a key not registered, or deleted and added
// again, is told apart.
func TestParse(t *testing.T) {
	web := []*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}}}
	api := []*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "api"}}}}
	matching := func(tr *SelectorTracker, pods []*corev1.Pod) []string { return tr.Matching("ns", pods, 0) }
	tests := []struct {
		name string
		run  func(t *testing.T, tr *SelectorTracker)
	}{
		{"the same string is parsed once", func(t *testing.T, tr *SelectorTracker) {
			first, ok, err := tr.Parse("ns", "ns/a", "app=web")
			if err != nil || !ok {
				t.Fatalf("Parse: %v, registered %v", err, ok)
			}
			again, _, _ := tr.Parse("ns", "ns/a", "app=web")
			if reflect.ValueOf(again).UnsafePointer() != reflect.ValueOf(first).UnsafePointer() {
				t.Error("the same string was parsed again")
			}
			if n := testing.AllocsPerRun(100, func() { tr.Parse("ns", "ns/a", "app=web") }); n != 0 {
				t.Errorf("an unchanged selector cost %v allocations, want 0", n)
			}
			if got := matching(tr, web); !slices.Equal(got, []string{"ns/a"}) {
				t.Errorf("matching web pods: %v", got)
			}
		}},
		{"a changed string is parsed and indexed", func(t *testing.T, tr *SelectorTracker) {
			tr.Parse("ns", "ns/a", "app=web")
			sel, ok, err := tr.Parse("ns", "ns/a", "app=api")
			if err != nil || !ok || !sel.Matches(labels.Set{"app": "api"}) {
				t.Fatalf("Parse: %v, %v, registered %v", sel, err, ok)
			}
			if got := matching(tr, web); len(got) != 0 {
				t.Errorf("web pods still matched by %v", got)
			}
			if got := matching(tr, api); !slices.Equal(got, []string{"ns/a"}) {
				t.Errorf("matching api pods: %v", got)
			}
		}},
		{"an invalid string keeps the last good selector", func(t *testing.T, tr *SelectorTracker) {
			tr.Parse("ns", "ns/a", "app=web")
			if _, _, err := tr.Parse("ns", "ns/a", "app in (web"); err == nil {
				t.Fatal("no error for an invalid selector")
			}
			if got := matching(tr, web); !slices.Equal(got, []string{"ns/a"}) {
				t.Errorf("matching web pods after the invalid one: %v", got)
			}
		}},
		{"a key not registered", func(t *testing.T, tr *SelectorTracker) {
			if _, ok, err := tr.Parse("ns", "ns/gone", "app=web"); ok || err != nil {
				t.Errorf("registered %v, error %v; want false, nil", ok, err)
			}
			if _, ok, _ := tr.Parse("elsewhere", "elsewhere/x", "app=web"); ok {
				t.Error("a key of a namespace with none registered")
			}
		}},
		{"deleted, then added again", func(t *testing.T, tr *SelectorTracker) {
			tr.Parse("ns", "ns/a", "app=web")
			tr.Delete("ns", "ns/a")
			if _, ok, _ := tr.Parse("ns", "ns/a", "app=web"); ok {
				t.Error("a deleted key is registered")
			}
			tr.PutIfAbsent("ns", "ns/a", labels.Nothing())
			if got := matching(tr, web); len(got) != 0 {
				t.Errorf("re-added with Nothing, matched by %v", got)
			}
			if _, ok, _ := tr.Parse("ns", "ns/a", "app=web"); !ok {
				t.Error("re-added key not registered")
			}
			if got := matching(tr, web); !slices.Equal(got, []string{"ns/a"}) {
				t.Errorf("re-added and parsed: matching web pods %v", got)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewSelectorTracker()
			tr.PutIfAbsent("ns", "ns/a", labels.Nothing())
			tt.run(t, tr)
		})
	}
}
