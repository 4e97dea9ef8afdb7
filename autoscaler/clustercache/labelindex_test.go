package clustercache

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

// TestSelectPods: the indexed selection returns exactly what a scan of
// the namespace with the selector returns, for every kind of selector.
func TestSelectPods(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{
		cache.NamespaceIndex: cache.MetaNamespaceIndexFunc, podLabelIndex: podLabelIndexFunc,
	})
	pod := func(namespace, name string, l map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: l}}
	}
	for _, p := range []*corev1.Pod{
		pod("a", "web-1", map[string]string{"app": "web", "tier": "front"}),
		pod("a", "web-2", map[string]string{"app": "web", "tier": "back"}),
		pod("a", "db-1", map[string]string{"app": "db"}),
		pod("a", "bare", nil),
		pod("b", "web-1", map[string]string{"app": "web", "tier": "front"}),
	} {
		if err := indexer.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	for _, sel := range []string{
		"app=web", "app==web", "app in (web)", "app in (web,db)", "app=web,tier=front", "app=web,tier!=front",
		"app notin (web)", "tier", "!tier", "app=missing", "", "tier=front,app in (web,db)",
	} {
		t.Run(sel, func(t *testing.T) {
			s, err := labels.Parse(sel)
			if err != nil {
				t.Fatal(err)
			}
			got, err := SelectPods(indexer, "a", s)
			if err != nil {
				t.Fatal(err)
			}
			var want, names []string
			for _, obj := range indexer.List() {
				p := obj.(*corev1.Pod)
				if p.Namespace == "a" && s.Matches(labels.Set(p.Labels)) {
					want = append(want, p.Name)
				}
			}
			for _, p := range got {
				names = append(names, p.Name)
			}
			slices.Sort(want)
			slices.Sort(names)
			if !slices.Equal(names, want) {
				t.Errorf("SelectPods(%q) = %v, want %v", sel, names, want)
			}
		})
	}
	if got, _ := SelectPods(indexer, "a", labels.Nothing()); len(got) != 0 {
		t.Errorf("labels.Nothing() selected %d pods", len(got))
	}
}

// TestEqualityLabels: the labels every matching object carries, as the
// selector's single-valued equality requirements give them (a value
// repeated is one value), with no string made for a label (two
// allocations for one requirement: its values' list and the result).
func TestEqualityLabels(t *testing.T) {
	asSelector := func(ls *metav1.LabelSelector) labels.Selector {
		s, err := metav1.LabelSelectorAsSelector(ls)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	parse := func(s string) labels.Selector {
		sel, err := labels.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return sel
	}
	for _, tc := range []struct {
		name string
		sel  labels.Selector
		want []string
	}{
		{"equals", parse("app=web"), []string{"app=web"}},
		{"double equals", parse("app==web"), []string{"app=web"}},
		{"in one value", parse("app in (web)"), []string{"app=web"}},
		{"in one value repeated", asSelector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web", "web"}}}}), []string{"app=web"}},
		{"in two values", parse("app in (web,db)"), nil},
		{"in two values, one repeated", asSelector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web", "db", "web"}}}}), nil},
		{"not equals, notin, exists", parse("app!=web,tier notin (a),zone"), nil},
		{"several", parse("app=web,tier in (front),zone"), []string{"app=web", "tier=front"}},
		{"everything", labels.Everything(), nil},
		{"nothing", labels.Nothing(), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var keys []string
			for _, p := range EqualityLabels(tc.sel) {
				keys = append(keys, pairKey(p.Key, p.Value))
			}
			if !slices.Equal(keys, tc.want) {
				t.Errorf("EqualityLabels(%v) = %q, want %q", tc.sel, keys, tc.want)
			}
		})
	}
	sel := parse("app=web")
	if n := testing.AllocsPerRun(100, func() { EqualityLabels(sel) }); n > 2 {
		t.Errorf("EqualityLabels(%v) allocated %v times, want at most 2", sel, n)
	}
}
