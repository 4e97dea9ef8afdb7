package clustercache

import (
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
		sel, err := labels.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		if !tr.PutIfPresent("a", key, sel) {
			t.Fatalf("%s not registered", key)
		}
	}
	// web changes its selector; notin is deleted.
	tr.PutIfPresent("a", "web", labels.SelectorFromSet(labels.Set{"app": "web", "tier": "back"}))
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
