package metricsserver

import (
	"cmp"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Rank orders pods the way the server assigns per-pod values: pods are
// grouped by their controller (the ReplicaSet of a Deployment; pods
// without one are grouped by their labels), and ranked within the group by creation
// time, then name. Pods being deleted come after all others. Twin
// Deployments therefore rank their pods alike: the oldest pod of each is
// rank 0. Rank returns, for each pod's UID, its rank.
func Rank(pods []*corev1.Pod) map[types.UID]int {
	groups := map[string][]*corev1.Pod{}
	for _, p := range pods {
		g := rankGroup(p)
		groups[g] = append(groups[g], p)
	}
	ranks := make(map[types.UID]int, len(pods))
	for _, group := range groups {
		rankInto(ranks, group)
	}
	return ranks
}

// rankGroup names the group a pod is ranked in (see Rank).
func rankGroup(p *corev1.Pod) string {
	if ref := metav1.GetControllerOf(p); ref != nil {
		return "owner:" + string(ref.UID)
	}
	return "labels:" + labels.Set(p.Labels).String()
}

// rankInto sorts group, the pods of one rank group, and records each pod's
// rank in ranks.
func rankInto(ranks map[types.UID]int, group []*corev1.Pod) {
	slices.SortFunc(group, func(a, b *corev1.Pod) int {
		if ad, bd := a.DeletionTimestamp != nil, b.DeletionTimestamp != nil; ad != bd {
			if ad {
				return 1
			}
			return -1
		}
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	for i, p := range group {
		ranks[p.UID] = i
	}
}

// rankGroupIndex indexes pods by namespace and rank group, so that a list
// ranks only the groups of the pods it selects: ranking a whole namespace
// per list (a map and a sort over 5,000 pods in the 10k benchmark) made the
// test server, not the autoscaler under test, the cost of a selective list.
const rankGroupIndex = "rankGroup"

// labelIndex indexes pods by namespace and each of their labels, so that a
// list whose selector requires a label value (app=web, app in (web,api):
// every list the autoscalers under test make) reads only the pods carrying
// it. A lister's scan of the namespace (matching the selector against 5,000
// pods per list in the 10k benchmark) was most of this server's CPU there.
const labelIndex = "label"

// podIndexers are the pod informer's indexes: rank groups and labels.
var podIndexers = cache.Indexers{
	rankGroupIndex: func(obj any) ([]string, error) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return nil, fmt.Errorf("rank group index: %T is not a pod", obj)
		}
		return []string{p.Namespace + "/" + rankGroup(p)}, nil
	},
	labelIndex: func(obj any) ([]string, error) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return nil, fmt.Errorf("label index: %T is not a pod", obj)
		}
		keys := make([]string, 0, len(p.Labels))
		for k, v := range p.Labels {
			keys = append(keys, labelIndexKey(p.Namespace, k, v))
		}
		return keys, nil
	},
}

func labelIndexKey(namespace, key, value string) string {
	return namespace + "/" + key + "=" + value
}

// indexedRequirement returns the key and values of the first requirement of
// selector that a pod must meet by carrying one of the values (=, ==, in);
// false when there is none (only !=, notin, exists, !exists, or nothing).
func indexedRequirement(selector labels.Selector) (string, []string, bool) {
	reqs, selectable := selector.Requirements()
	if !selectable {
		return "", nil, false
	}
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			return r.Key(), r.Values().List(), true
		}
	}
	return "", nil, false
}

// ranker selects pods from the informer's cache (with podIndexers)
// and ranks them among their group, as Rank over the whole namespace would.
type ranker struct {
	pods    corelisters.PodLister
	indexer cache.Indexer // holds podIndexers
}

// selected returns the pods of namespace that match selector, in no
// particular order, and the rank of each (see Rank).
func (r ranker) selected(namespace string, selector labels.Selector) ([]*corev1.Pod, map[types.UID]int, error) {
	pods, err := r.list(namespace, selector)
	if err != nil {
		return nil, nil, err
	}
	ranks, err := r.ranks(pods)
	return pods, ranks, err
}

// list returns the pods of namespace (every namespace: "") that match
// selector, reading only the pods that carry a required label value when
// the selector has one.
func (r ranker) list(namespace string, selector labels.Selector) ([]*corev1.Pod, error) {
	key, values, ok := indexedRequirement(selector)
	if !ok || namespace == metav1.NamespaceAll { // the index is per namespace
		return r.pods.Pods(namespace).List(selector)
	}
	var out []*corev1.Pod
	for _, v := range values { // distinct: a pod carries one value per key
		objs, err := r.indexer.ByIndex(labelIndex, labelIndexKey(namespace, key, v))
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if p := o.(*corev1.Pod); selector.Matches(labels.Set(p.Labels)) {
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// named returns the named pod of namespace and its rank; nil when there is
// no such pod.
func (r ranker) named(namespace, name string) (*corev1.Pod, int, error) {
	p, err := r.pods.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	ranks, err := r.ranks([]*corev1.Pod{p})
	return p, ranks[p.UID], err
}

// ranks ranks the groups of pods, each once.
func (r ranker) ranks(pods []*corev1.Pod) (map[types.UID]int, error) {
	ranks := make(map[types.UID]int, len(pods))
	done := map[string]bool{}
	for _, p := range pods {
		key := p.Namespace + "/" + rankGroup(p)
		if done[key] {
			continue
		}
		done[key] = true
		objs, err := r.indexer.ByIndex(rankGroupIndex, key)
		if err != nil {
			return nil, err
		}
		group := make([]*corev1.Pod, 0, len(objs))
		for _, o := range objs {
			group = append(group, o.(*corev1.Pod))
		}
		rankInto(ranks, group)
	}
	return ranks, nil
}
