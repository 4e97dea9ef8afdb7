// Package authzcache remembers the delegated authorizer's "allow"
// decisions for a second.
//
// k8s.io/apiserver's webhook authorizer (delegated authorization) already
// remembers SubjectAccessReview answers, 10 s by default, but it finds
// them by converting the request's attributes to a SubjectAccessReview
// spec and JSON-encoding that on every request: 7% of the adapter's CPU
// for a pods/* request with a label selector. This cache keys every
// attribute directly and keeps only allow decisions, for TTL, so a revoked
// permission takes effect at most TTL later than it would without it.
// Denials and errors always go to the wrapped authorizer. The entries live
// in apimachinery's LRUExpireCache, which bounds their number and drops the
// least recently used first.
package authzcache

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

const (
	// TTL is how long an allow decision is reused.
	TTL = time.Second
	// maxEntries bounds the memory: identities and attributes come from
	// requests.
	maxEntries = 4096
)

// Authorizer answers from remembered allow decisions of next.
type Authorizer struct {
	next authorizer.Authorizer
	ttl  time.Duration
	// allowed maps a request's key to the reason next gave for allowing
	// it (audited with the decision).
	allowed *cache.LRUExpireCache
}

var _ authorizer.Authorizer = (*Authorizer)(nil)

// New wraps next.
func New(next authorizer.Authorizer) *Authorizer {
	return newWithClock(next, TTL, time.Now)
}

func newWithClock(next authorizer.Authorizer, ttl time.Duration, now func() time.Time) *Authorizer {
	return &Authorizer{next: next, ttl: ttl, allowed: cache.NewLRUExpireCacheWithClock(maxEntries, clockFunc(now))}
}

// clockFunc adapts a time source to the cache's clock.
type clockFunc func() time.Time

func (f clockFunc) Now() time.Time { return f() }

// Authorize implements authorizer.Authorizer.
func (a *Authorizer) Authorize(ctx context.Context, attr authorizer.Attributes) (authorizer.Decision, string, error) {
	k, ok := key(attr)
	if ok {
		if reason, hit := a.allowed.Get(k); hit {
			return authorizer.DecisionAllow, reason.(string), nil
		}
	}
	d, reason, err := a.next.Authorize(ctx, attr)
	if ok && d == authorizer.DecisionAllow && err == nil {
		a.allowed.Add(k, reason, a.ttl)
	}
	return d, reason, err
}

// ConditionsAwareAuthorize passes through: conditional decisions are not
// remembered (the request filter calls Authorize).
func (a *Authorizer) ConditionsAwareAuthorize(ctx context.Context, attr authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return a.next.ConditionsAwareAuthorize(ctx, attr)
}

// EvaluateConditions passes through.
func (a *Authorizer) EvaluateConditions(ctx context.Context, d authorizer.ConditionsAwareDecision, data authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return a.next.EvaluateConditions(ctx, d, data)
}

// key encodes every attribute, each length-prefixed so that no two
// different sets of attributes share a key. ok is false when a selector
// does not parse (the decision then depends on the partial requirements
// the authorizer keeps): such requests are not remembered.
func key(attr authorizer.Attributes) (string, bool) {
	u := attr.GetUser()
	if u == nil {
		return "", false
	}
	fieldReqs, err := attr.GetFieldSelector()
	if err != nil {
		return "", false
	}
	labelReqs, err := attr.GetLabelSelector()
	if err != nil {
		return "", false
	}
	var b strings.Builder
	b.Grow(256)
	str := func(s string) {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	count := func(n int) {
		b.WriteString(strconv.Itoa(n))
		b.WriteByte('#')
	}
	str(u.GetName())
	str(u.GetUID())
	count(len(u.GetGroups()))
	for _, g := range u.GetGroups() {
		str(g)
	}
	extra := u.GetExtra()
	count(len(extra))
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		str(k)
		count(len(extra[k]))
		for _, v := range extra[k] {
			str(v)
		}
	}
	if attr.IsResourceRequest() {
		b.WriteByte('R')
	} else {
		b.WriteByte('N')
	}
	for _, s := range []string{attr.GetVerb(), attr.GetNamespace(), attr.GetAPIGroup(), attr.GetAPIVersion(),
		attr.GetResource(), attr.GetSubresource(), attr.GetName(), attr.GetPath()} {
		str(s)
	}
	count(len(fieldReqs))
	for _, r := range fieldReqs {
		str(string(r.Operator))
		str(r.Field)
		str(r.Value)
	}
	count(len(labelReqs))
	for _, r := range labelReqs {
		str(r.Key())
		str(string(r.Operator()))
		values := r.ValuesUnsorted()
		count(len(values))
		for _, v := range values {
			str(v)
		}
	}
	return b.String(), true
}
