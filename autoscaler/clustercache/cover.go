package clustercache

import (
	"slices"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/sets"
)

// MaxCoverLength bounds a Cover's selector string: it travels in the
// list's URL, through kube-apiserver's proxy to the metrics server. A
// namespace whose autoscalers need a longer one is listed whole.
const MaxCoverLength = 8 << 10

// A Cover is one label selector, "key in (values)", that matches every pod
// that any of a namespace's autoscaler selectors matches: a namespace's
// PodMetrics listed with it hold every autoscaler's pods and not the
// namespace's others. With two autoscalers over a few pods of a large
// namespace, or a replica owning a third of a namespace's autoscalers,
// the whole namespace was listed and decoded.
type Cover struct {
	Key    string
	Values sets.Set[string]
	// selector is String's result, kept by CoverOf, which computes it to
	// check the length: the lister sends it again.
	selector string
}

// String is the cover as a label selector.
func (c Cover) String() string {
	if c.selector != "" {
		return c.selector
	}
	vals := sets.List(c.Values)
	req, err := labels.NewRequirement(c.Key, selection.In, vals)
	if err != nil { // keys and values come from parsed selectors
		return ""
	}
	return labels.NewSelector().Add(*req).String()
}

// Covers reports whether every object sel matches is one the cover
// matches: sel requires the cover's key to equal one of its values.
func (c Cover) Covers(sel labels.Selector) bool {
	reqs, selectable := sel.Requirements()
	if !selectable {
		return true // matches nothing
	}
	for _, r := range reqs {
		if r.Key() != c.Key {
			continue
		}
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			if vals := sets.Set[string](r.Values()); vals.Len() > 0 && c.Values.IsSuperset(vals) {
				return true
			}
		}
	}
	return false
}

// CoverOf returns a Cover of sels: a label key that every selector
// requires to be one of a few values (equality or "in"), and the union of
// those values. Selectors that match nothing (an autoscaler not reconciled
// yet) need no covering. False when some selector has no such key in
// common with the others (it may match pods without it), when none needs
// covering, or when the cover's selector would exceed MaxCoverLength. Of
// several common keys, the one with the fewest values wins.
func CoverOf(sels []labels.Selector) (Cover, bool) {
	var common map[string]sets.Set[string] // key -> union of its values
	for _, sel := range sels {
		reqs, selectable := sel.Requirements()
		if !selectable {
			continue
		}
		own := map[string]sets.Set[string]{}
		for _, r := range reqs {
			switch r.Operator() {
			case selection.Equals, selection.DoubleEquals, selection.In:
				vals := sets.Set[string](r.Values())
				if vals.Len() == 0 {
					continue
				}
				if prev, ok := own[r.Key()]; ok { // two requirements on one key: both hold
					vals = prev.Intersection(vals)
				}
				own[r.Key()] = vals
			}
		}
		if common == nil {
			common = own
			continue
		}
		for k, vals := range common {
			mine, ok := own[k]
			if !ok {
				delete(common, k)
				continue
			}
			for v := range mine { // in place: a Union per selector would copy the set each time
				vals.Insert(v)
			}
		}
		if len(common) == 0 {
			return Cover{}, false
		}
	}
	keys := make([]string, 0, len(common))
	for k := range common {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var best Cover
	for _, k := range keys {
		if best.Values == nil || common[k].Len() < best.Values.Len() {
			best = Cover{Key: k, Values: common[k]}
		}
	}
	if best.Values == nil {
		return Cover{}, false
	}
	if best.selector = best.String(); len(best.selector) > MaxCoverLength {
		return Cover{}, false
	}
	return best, true
}
