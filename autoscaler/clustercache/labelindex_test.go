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
