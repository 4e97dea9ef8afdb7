package metricsserver

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// TestRankerMatchesRank checks that ranking only the groups of the selected
// pods gives each selected pod the rank Rank over its whole namespace gives,
// and that a selective list ranks no other group.
func TestRankerMatchesRank(t *testing.T) {
	base := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	pod := func(ns, name string, lbls map[string]string, owner string, age int, deleting bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name, UID: types.UID(ns + "/" + name), Labels: lbls,
			CreationTimestamp: metav1.NewTime(base.Add(time.Duration(-age) * time.Second)),
		}}
		if owner != "" {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: owner, UID: types.UID(owner), Controller: ptr.To(true)}}
		}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{Time: base}
		}
		return p
	}
	web, api, bare := map[string]string{"app": "web"}, map[string]string{"app": "api"}, map[string]string{"app": "bare"}
	pods := []*corev1.Pod{
		pod("a", "web-1", web, "rs-web-a", 30, false),
		pod("a", "web-2", web, "rs-web-a", 20, true),
		pod("a", "web-3", web, "rs-web-a", 10, false),
		pod("a", "web-old", web, "rs-web-old", 90, false), // a second ReplicaSet, same labels
		pod("a", "api-1", api, "rs-api-a", 10, false),
		pod("a", "api-2", api, "rs-api-a", 10, false), // same age: ranked by name
		pod("a", "bare-1", bare, "", 5, false),
		pod("a", "bare-2", bare, "", 50, false),
		pod("b", "web-1", web, "rs-web-b", 10, false),
		pod("b", "bare-1", bare, "", 60, false), // same labels as a's bare pods, other namespace
	}
	indexers := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	for k, f := range podIndexers {
		indexers[k] = f
	}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, indexers)
	for _, p := range pods {
		if err := indexer.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	r := ranker{pods: corelisters.NewPodLister(indexer), indexer: indexer}

	for _, tc := range []struct {
		name      string
		namespace string
		selector  labels.Selector
		want      []string // selected pods
		ranked    int      // pods of the selected pods' groups
	}{
		{"one deployment's pods", "a", labels.SelectorFromSet(api), []string{"api-1", "api-2"}, 2},
		{"two replica sets behind one selector", "a", labels.SelectorFromSet(web), []string{"web-1", "web-2", "web-3", "web-old"}, 4},
		{"pods without a controller", "a", labels.SelectorFromSet(bare), []string{"bare-1", "bare-2"}, 2},
		{"the whole namespace", "a", labels.Everything(), []string{"api-1", "api-2", "bare-1", "bare-2", "web-1", "web-2", "web-3", "web-old"}, 8},
		{"the other namespace", "b", labels.Everything(), []string{"bare-1", "web-1"}, 2},
		{"nothing selected", "a", labels.SelectorFromSet(map[string]string{"app": "none"}), nil, 0},
		{"app in a set", "a", mustParse(t, "app in (api,bare)"), []string{"api-1", "api-2", "bare-1", "bare-2"}, 4},
		{"an indexed value and a not-equals", "a", mustParse(t, "app=web,tier!=x"), []string{"web-1", "web-2", "web-3", "web-old"}, 4},
		{"not in: a scan of the namespace", "a", mustParse(t, "app notin (web)"), []string{"api-1", "api-2", "bare-1", "bare-2"}, 4},
		{"every namespace", "", labels.SelectorFromSet(bare), []string{"bare-1", "bare-2", "bare-1"}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ranks, err := r.selected(tc.namespace, tc.selector)
			if err != nil {
				t.Fatal(err)
			}
			byNamespace := map[string][]*corev1.Pod{}
			for _, p := range pods {
				byNamespace[p.Namespace] = append(byNamespace[p.Namespace], p)
			}
			var names []string
			for _, p := range got {
				names = append(names, p.Name)
				if want := Rank(byNamespace[p.Namespace])[p.UID]; ranks[p.UID] != want {
					t.Errorf("%s/%s: rank %d, Rank over the namespace gives %d", p.Namespace, p.Name, ranks[p.UID], want)
				}
			}
			slices.Sort(names)
			slices.Sort(tc.want)
			if !slices.Equal(names, tc.want) {
				t.Errorf("selected %v, want %v", names, tc.want)
			}
			if len(ranks) != tc.ranked {
				t.Errorf("ranked %d pods, want only the selected pods' groups (%d)", len(ranks), tc.ranked)
			}
		})
	}

	t.Run("one pod by name", func(t *testing.T) {
		p, rank, err := r.named("a", "web-3")
		if err != nil || p == nil {
			t.Fatalf("named: %v, %v", p, err)
		}
		// rs-web-a: web-1 (oldest), web-3, then web-2 (being deleted).
		if rank != 1 {
			t.Errorf("web-3 rank %d, want 1", rank)
		}
		if p, _, err := r.named("a", "gone"); p != nil || err != nil {
			t.Errorf("a missing pod: %v, %v; want nil, nil", p, err)
		}
	})
}

func mustParse(t *testing.T, s string) labels.Selector {
	t.Helper()
	sel, err := labels.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

// TestIndexedRequirement checks which selectors read the label index: those
// with a requirement a pod meets only by carrying one of its values.
func TestIndexedRequirement(t *testing.T) {
	for _, tc := range []struct {
		selector string
		key      string
		values   []string
		indexed  bool
	}{
		{"app=web", "app", []string{"web"}, true},
		{"app==web", "app", []string{"web"}, true},
		{"app in (web,api)", "app", []string{"api", "web"}, true},
		{"tier!=x,app=web", "app", []string{"web"}, true},
		{"app!=web", "", nil, false},
		{"app notin (web)", "", nil, false},
		{"app", "", nil, false},
		{"!app", "", nil, false},
		{"", "", nil, false},
	} {
		t.Run(tc.selector, func(t *testing.T) {
			key, values, ok := indexedRequirement(mustParse(t, tc.selector))
			if key != tc.key || !slices.Equal(values, tc.values) || ok != tc.indexed {
				t.Errorf("got %q %v %v, want %q %v %v", key, values, ok, tc.key, tc.values, tc.indexed)
			}
		})
	}
}
