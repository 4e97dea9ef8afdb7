package metrics

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"golang.org/x/sync/singleflight"
)

// sharedReads answers identical custom and external metrics requests of
// one namespace's autoscalers from one request, as podMetricsLister does
// for PodMetrics. An answer, success or error, serves every identical
// request made within podMetricsMaxAge of the time it was asked for;
// concurrent identical requests wait for the one in flight. Only the raw
// answer is kept: each caller converts it (and wraps an error) itself, so
// it gets exactly what its own request would have returned at that time.
//
// Like the PodMetrics list, it applies only where several autoscalers
// use the namespace (shared): an autoscaler alone in its namespace reads
// for itself every time, as upstream does. And only within one sync round
// (WithRound): the autoscalers of a namespace come due together, and none
// ever gets an answer read for its previous round, however close two of
// its reconciles come (a short sync period, a queue catching up).
type sharedReads struct {
	clock clock.PassiveClock
	// shared reports whether several autoscalers use the namespace; nil:
	// never.
	shared func(namespace string) bool

	group   singleflight.Group
	mu      sync.Mutex
	answers map[string]answer
	// swept is when stale answers were last dropped: once per max age,
	// not on every store, as there may be one answer per autoscaler.
	swept time.Time
}

// answer is one request's raw result and when it was asked for.
type answer struct {
	value any
	err   error
	at    time.Time
}

func newSharedReads(clk clock.PassiveClock) *sharedReads {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &sharedReads{clock: clk, answers: map[string]answer{}}
}

// requestKey names a request by every argument that goes into it, so two
// requests with the same key are the same HTTP request. Selectors are
// given as their String(), which is what the clients send.
func requestKey(parts ...string) string {
	return strings.Join(parts, "\x00")
}

type roundKey struct{}

// WithRound says that the reads made with ctx belong to the sync round due
// at due (the time the reconcile was due): only reads of the same round
// share an answer. Without it, reads share within the max age alone.
func WithRound(ctx context.Context, due time.Time) context.Context {
	return context.WithValue(ctx, roundKey{}, due)
}

// roundDue is the due time of the round ctx names; false when none.
func roundDue(ctx context.Context) (time.Time, bool) {
	due, ok := ctx.Value(roundKey{}).(time.Time)
	return due, ok
}

// roundOf is the round ctx names, "" when none.
func roundOf(ctx context.Context) string {
	if due, ok := roundDue(ctx); ok {
		return strconv.FormatInt(due.UnixNano(), 10)
	}
	return ""
}

// read returns the answer to the request named key in namespace, in the
// round of ctx: a stored one at most podMetricsMaxAge old, or read's,
// which is stored.
func (s *sharedReads) read(ctx context.Context, namespace, key string, read func() (any, error)) (any, error) {
	if s == nil || s.shared == nil || !s.shared(namespace) {
		return read()
	}
	key = requestKey(roundOf(ctx), key)
	if a, ok := s.fresh(key); ok {
		return a.value, a.err
	}
	v, err, _ := s.group.Do(key, func() (any, error) {
		// A caller that missed the store just as another call filled it
		// starts a new call: it finds that answer here.
		if a, ok := s.fresh(key); ok {
			return a.value, a.err
		}
		at := s.clock.Now()
		value, err := read()
		s.store(key, answer{value: value, err: err, at: at})
		return value, err
	})
	return v, err
}

// fresh returns the stored answer to key if it is younger than
// podMetricsMaxAge.
func (s *sharedReads) fresh(key string) (answer, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.answers[key]
	if !ok || !young(s.clock.Since(a.at)) {
		return answer{}, false
	}
	return a, true
}

// store keeps a, dropping stale answers at most once per max age so that
// requests no autoscaler makes any more hold no memory.
func (s *sharedReads) store(key string, a answer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !young(s.clock.Since(s.swept)) {
		for k, old := range s.answers {
			if !young(s.clock.Since(old.at)) {
				delete(s.answers, k)
			}
		}
		s.swept = s.clock.Now()
	}
	s.answers[key] = a
}

// young reports whether an answer of this age may still be shared: the
// bound the PodMetrics lists use.
func young(age time.Duration) bool { return age < podMetricsMaxAge }
