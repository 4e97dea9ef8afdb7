package controller

import (
	"context"
	"errors"
	"sync"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/util/retry"

	"github.com/tidal-autoscaler/tidal/autoscaler/clustercache"
	"github.com/tidal-autoscaler/tidal/autoscaler/source"
)

// generational is a mapper that counts its resets (CountedMapper).
type generational interface{ Generation() uint64 }

// scaler reads and writes the /scale subresource of any scale target.
type scaler struct {
	scales scale.ScalesGetter
	mapper meta.RESTMapper
	// cache answers the scale of built-in kinds; nil: always GET.
	cache *clustercache.ScaleCache

	// known holds each kind's mappings until the mapper's next reset (its
	// generation), when mapper is generational: asking the mapper took
	// 5 KB of allocations a reconcile (a mapper per API group, a NoMatch
	// error from each that lacks the kind), 7% of all.
	mu    sync.Mutex
	gen   uint64
	known map[schema.GroupKind][]*meta.RESTMapping
}

// mappings maps a group and kind to its resources. A kind unknown to the
// cached discovery refreshes it once, so targets of a CRD installed after
// start are found. The mappings are shared: callers must not change them.
func (s *scaler) mappings(gk schema.GroupKind) ([]*meta.RESTMapping, error) {
	g, counted := s.mapper.(generational)
	var gen uint64
	if counted {
		gen = g.Generation() // read before asking: a reset after it drops m
		if m, ok := s.kept(gen, gk); ok {
			return m, nil
		}
	}
	m, err := s.mapper.RESTMappings(gk)
	if meta.IsNoMatchError(err) {
		if r, ok := s.mapper.(ResettableMapper); ok {
			r.Reset()
			if counted {
				gen = g.Generation()
			}
			m, err = s.mapper.RESTMappings(gk)
		}
	}
	if err != nil {
		return nil, err
	}
	if counted {
		s.keep(gen, gk, m)
	}
	return m, nil
}

// kept returns gk's mappings if they were kept in generation gen.
func (s *scaler) kept(gen uint64, gk schema.GroupKind) ([]*meta.RESTMapping, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != gen {
		return nil, false
	}
	m, ok := s.known[gk]
	return m, ok
}

// keep keeps gk's mappings, asked of the mapper in generation gen: a newer
// generation drops what the older ones kept, an older one is not kept.
func (s *scaler) keep(gen uint64, gk schema.GroupKind, m []*meta.RESTMapping) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if gen < s.gen {
		return
	}
	if gen > s.gen || s.known == nil {
		s.gen, s.known = gen, map[schema.GroupKind][]*meta.RESTMapping{}
	}
	s.known[gk] = m
}

var errUnrecognizedResource = errors.New("unrecognized resource")

// get returns the scale of the first mapping that has one, from the cache
// when it can answer; the error is the first mapping's.
func (s *scaler) get(ctx context.Context, namespace, name string, mappings []*meta.RESTMapping) (*autoscalingv1.Scale, schema.GroupResource, error) {
	if len(mappings) > 0 {
		gr := mappings[0].Resource.GroupResource()
		if sc, ok := s.cache.Get(gr, namespace, name); ok {
			return sc, gr, nil
		}
	}
	var firstErr error
	for i, m := range mappings {
		gr := m.Resource.GroupResource()
		sc, err := s.scales.Scales(namespace).Get(ctx, gr, name, metav1.GetOptions{})
		if err == nil {
			return sc, gr, nil
		}
		if i == 0 {
			firstErr = err
		}
	}
	if firstErr == nil {
		firstErr = errUnrecognizedResource
	}
	return nil, schema.GroupResource{}, firstErr
}

// update sets the scale's spec.replicas to replicas. A Conflict means
// the target was written after sc was read. When its count or selector
// changed (`kubectl scale`, another controller), replicas was decided from
// a stale read: it is not written, which would overwrite their write with
// that decision. The error goes back to the reconcile, which records the
// failed rescale as upstream does and is requeued; the next reconcile
// reads the new count and decides again. When neither changed (the
// workload controller wrote its status, which the cache had not seen yet:
// upstream reads /scale with a GET and rarely meets this), the decision
// stands, and it is written again on a fresh read, as client-go's
// RetryOnConflict retries (5 tries, 10 ms apart): while a scale-up's pods
// become ready their controller writes the status often, and a single
// fresh read met a second conflict in a conformance run.
func (s *scaler) update(ctx context.Context, namespace string, gr schema.GroupResource, sc *autoscalingv1.Scale, replicas int32) error {
	from, selector := sc.Spec.Replicas, sc.Status.Selector
	sc.Spec.Replicas = replicas
	opts := metav1.UpdateOptions{FieldManager: source.FieldManager}
	written, err := s.scales.Scales(namespace).Update(ctx, gr, sc, opts)
	if apierrors.IsConflict(err) {
		conflict, stale := err, false
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			fresh, gerr := s.scales.Scales(namespace).Get(ctx, gr, sc.Name, metav1.GetOptions{})
			if gerr != nil || fresh.Spec.Replicas != from || fresh.Status.Selector != selector {
				stale = true
				return nil
			}
			fresh.Spec.Replicas = replicas
			var uerr error
			written, uerr = s.scales.Scales(namespace).Update(ctx, gr, fresh, opts)
			return uerr
		})
		if stale {
			err = conflict
		}
	}
	if err != nil {
		return err
	}
	s.cache.Wrote(gr, namespace, sc.Name, written.ResourceVersion)
	return nil
}
