package clustercache

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

// TestSelections: an autoscaler's selection is reused while its selector,
// its namespace's pods and its namespace's selectors stay as they were,
// made again after any of them changed (a relist's dropped pod included),
// and is always what selecting afresh returns.
func TestSelections(t *testing.T) {
	pod := func(namespace, name string, l map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: l}}
	}
	web := map[string]string{"app": "web"}
	type world struct {
		index   *PodIndex
		pods    cache.Indexer
		tracker *SelectorTracker
	}
	must := func(t *testing.T, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name   string
		change func(t *testing.T, w world)
		// raw is the autoscaler's selector at the second Select; "" for
		// app=web.
		raw        string
		wantReused bool
	}{
		{name: "nothing changed", change: func(*testing.T, world) {}, wantReused: true},
		{name: "a pod of another namespace added", wantReused: true, change: func(t *testing.T, w world) {
			must(t, w.pods.Add(pod("b", "web-9", web)))
		}},
		{name: "a selector of another namespace registered", wantReused: true, change: func(t *testing.T, w world) {
			w.tracker.PutIfAbsent("b", "b/x", labels.Everything())
		}},
		{name: "the same selector parsed again", wantReused: true, change: func(t *testing.T, w world) {
			_, _, err := w.tracker.Parse("a", "a/web", "app=web")
			must(t, err)
		}},
		{name: "a pod added", change: func(t *testing.T, w world) {
			must(t, w.pods.Add(pod("a", "web-3", web)))
		}},
		{name: "a pod changed", change: func(t *testing.T, w world) {
			must(t, w.pods.Update(pod("a", "web-1", map[string]string{"app": "db"})))
		}},
		{name: "a pod deleted", change: func(t *testing.T, w world) {
			must(t, w.pods.Delete(pod("a", "web-2", web)))
		}},
		{name: "a relist dropped every pod of the namespace", change: func(t *testing.T, w world) {
			// Replacing the store calls the index function only for the
			// pods kept, none of this namespace's; the informer then
			// reports each dropped pod deleted.
			var kept []any
			for _, obj := range w.pods.List() {
				if obj.(*corev1.Pod).Namespace != "a" {
					kept = append(kept, obj)
				}
			}
			must(t, w.pods.Replace(kept, "2"))
			for _, name := range []string{"web-1", "web-2", "db-1"} {
				w.index.Handler().OnDelete(cache.DeletedFinalStateUnknown{Key: "a/" + name, Obj: pod("a", name, web)})
			}
		}},
		{name: "another autoscaler's selector now overlaps", change: func(t *testing.T, w world) {
			_, _, err := w.tracker.Parse("a", "a/other", "app in (web,db)")
			must(t, err)
		}},
		{name: "another autoscaler deleted", change: func(t *testing.T, w world) {
			w.tracker.Delete("a", "a/other")
		}},
		{name: "its own selector changed", raw: "app=db", change: func(t *testing.T, w world) {
			_, _, err := w.tracker.Parse("a", "a/web", "app=db")
			must(t, err)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			index := NewPodIndex()
			pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, index.Indexers())
			for _, p := range []*corev1.Pod{pod("a", "web-1", web), pod("a", "web-2", web), pod("a", "db-1", map[string]string{"app": "db"}), pod("b", "web-1", web)} {
				must(t, pods.Add(p))
			}
			tracker := NewSelectorTracker()
			for key, raw := range map[string]string{"a/web": "app=web", "a/other": "app=api"} {
				tracker.PutIfAbsent("a", key, labels.Nothing())
				_, _, err := tracker.Parse("a", key, raw)
				must(t, err)
			}
			w := world{index: index, pods: pods, tracker: tracker}
			s := NewSelections(index, pods, tracker, NewPodConversions())
			sel, _, _ := tracker.Parse("a", "a/web", "app=web")
			first, err := s.Select("a", "a/web", "app=web", sel)
			must(t, err)

			tt.change(t, w)
			raw := tt.raw
			if raw == "" {
				raw = "app=web"
			}
			sel, _, err = tracker.Parse("a", "a/web", raw)
			must(t, err)
			second, err := s.Select("a", "a/web", raw, sel)
			must(t, err)
			if reused := second == first; reused != tt.wantReused {
				t.Errorf("reused %v, want %v", reused, tt.wantReused)
			}
			fresh, err := SelectPods(pods, "a", sel)
			must(t, err)
			if got, want := podNames(second.Pods), podNames(fresh); !slices.Equal(got, want) {
				t.Errorf("pods %v, want %v", got, want)
			}
			if got, want := second.Matching, tracker.Matching("a", fresh, 2); !slices.Equal(got, want) {
				t.Errorf("matching %v, want %v", got, want)
			}
			if len(second.Converted) != len(second.Pods) {
				t.Errorf("%d conversions of %d pods", len(second.Converted), len(second.Pods))
			}
			s.Forget("a/web")
			if n := s.Len(); n != 0 {
				t.Errorf("%d selections after Forget", n)
			}
		})
	}
}

func podNames(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}
