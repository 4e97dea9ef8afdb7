package authzcache

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// counting answers decide(attr) and counts the calls.
type counting struct {
	mu     sync.Mutex
	calls  int
	decide func(authorizer.Attributes) (authorizer.Decision, string, error)
}

func (c *counting) Authorize(_ context.Context, attr authorizer.Attributes) (authorizer.Decision, string, error) {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	return c.decide(attr)
}

func (c *counting) ConditionsAwareAuthorize(ctx context.Context, attr authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(c.Authorize(ctx, attr))
}

func (c *counting) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

func allowAll(authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionAllow, "RBAC: allowed by ClusterRoleBinding", nil
}

// hpaRequest is a pods/* custom metric request as the HPA makes it.
func hpaRequest() *authorizer.AttributesRecord {
	sel, err := labels.Parse("app=web,tier in (a,b)")
	if err != nil {
		panic(err)
	}
	reqs, _ := sel.Requirements()
	return &authorizer.AttributesRecord{
		User: &user.DefaultInfo{
			Name: "system:serviceaccount:kube-system:horizontal-pod-autoscaler", UID: "u-1",
			Groups: []string{"system:serviceaccounts", "system:authenticated"},
			Extra:  map[string][]string{"authentication.kubernetes.io/pod-name": {"kcm-0"}},
		},
		Verb: "list", Namespace: "default", APIGroup: "custom.metrics.k8s.io", APIVersion: "v1beta2",
		Resource: "pods", Subresource: "http_requests", Name: "", ResourceRequest: true,
		Path:                      "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/http_requests",
		LabelSelectorRequirements: reqs,
	}
}

func TestRemembersAllow(t *testing.T) {
	next := &counting{decide: allowAll}
	now := time.Unix(1000, 0)
	a := newWithClock(next, TTL, func() time.Time { return now })
	ctx := context.Background()
	for i := range 3 {
		d, reason, err := a.Authorize(ctx, hpaRequest())
		if d != authorizer.DecisionAllow || err != nil || reason != "RBAC: allowed by ClusterRoleBinding" {
			t.Fatalf("request %d: %v %q %v", i, d, reason, err)
		}
	}
	if next.calls != 1 {
		t.Errorf("3 identical requests: %d calls, want 1", next.calls)
	}
	now = now.Add(TTL + time.Nanosecond)
	if _, _, err := a.Authorize(ctx, hpaRequest()); err != nil {
		t.Fatal(err)
	}
	if next.calls != 2 {
		t.Errorf("after the TTL: %d calls, want 2", next.calls)
	}
}

// TestEveryAttributeCounts: a request that differs from a remembered one
// in any attribute is decided by the wrapped authorizer, which here
// allows only the original request.
func TestEveryAttributeCounts(t *testing.T) {
	original := hpaRequest()
	origKey, ok := key(original)
	if !ok {
		t.Fatal("the original request has no key")
	}
	next := &counting{decide: func(attr authorizer.Attributes) (authorizer.Decision, string, error) {
		if k, _ := key(attr); k == origKey {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionDeny, "not the original", nil
	}}
	a := newWithClock(next, TTL, time.Now)
	ctx := context.Background()
	if d, _, _ := a.Authorize(ctx, original); d != authorizer.DecisionAllow {
		t.Fatal("the original request was not allowed")
	}
	requirements := func(s string) labels.Requirements {
		sel, err := labels.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := sel.Requirements()
		return r
	}
	userWith := func(f func(u *user.DefaultInfo)) func(r *authorizer.AttributesRecord) {
		return func(r *authorizer.AttributesRecord) {
			u := *r.User.(*user.DefaultInfo)
			f(&u)
			r.User = &u
		}
	}
	tests := []struct {
		name   string
		change func(r *authorizer.AttributesRecord)
	}{
		{"user name", userWith(func(u *user.DefaultInfo) { u.Name = "system:anonymous" })},
		{"user uid", userWith(func(u *user.DefaultInfo) { u.UID = "u-2" })},
		{"a group more", userWith(func(u *user.DefaultInfo) { u.Groups = append(u.Groups, "system:masters") })},
		{"a group less", userWith(func(u *user.DefaultInfo) { u.Groups = u.Groups[:1] })},
		{"groups joined differently", userWith(func(u *user.DefaultInfo) { u.Groups = []string{"system:serviceaccountssystem:authenticated"} })},
		{"extra value", userWith(func(u *user.DefaultInfo) {
			u.Extra = map[string][]string{"authentication.kubernetes.io/pod-name": {"kcm-1"}}
		})},
		{"extra key", userWith(func(u *user.DefaultInfo) { u.Extra = map[string][]string{"scopes": {"kcm-0"}} })},
		{"no extra", userWith(func(u *user.DefaultInfo) { u.Extra = nil })},
		{"verb", func(r *authorizer.AttributesRecord) { r.Verb = "get" }},
		{"namespace", func(r *authorizer.AttributesRecord) { r.Namespace = "kube-system" }},
		{"api group", func(r *authorizer.AttributesRecord) { r.APIGroup = "external.metrics.k8s.io" }},
		{"api version", func(r *authorizer.AttributesRecord) { r.APIVersion = "v1beta1" }},
		{"resource", func(r *authorizer.AttributesRecord) { r.Resource = "services" }},
		{"subresource", func(r *authorizer.AttributesRecord) { r.Subresource = "other_metric" }},
		{"name", func(r *authorizer.AttributesRecord) { r.Name = "web-1" }},
		{"path", func(r *authorizer.AttributesRecord) { r.Path = "/apis/custom.metrics.k8s.io/v1beta2" }},
		{"non-resource request", func(r *authorizer.AttributesRecord) { r.ResourceRequest = false }},
		{"label selector value", func(r *authorizer.AttributesRecord) {
			r.LabelSelectorRequirements = requirements("app=db,tier in (a,b)")
		}},
		{"label selector operator", func(r *authorizer.AttributesRecord) {
			r.LabelSelectorRequirements = requirements("app!=web,tier in (a,b)")
		}},
		{"label selector requirement less", func(r *authorizer.AttributesRecord) { r.LabelSelectorRequirements = requirements("app=web") }},
		{"field selector", func(r *authorizer.AttributesRecord) {
			r.FieldSelectorRequirements = fields.Requirements{{Field: "metadata.name", Operator: "=", Value: "web-1"}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := hpaRequest()
			tt.change(r)
			if d, reason, _ := a.Authorize(ctx, r); d != authorizer.DecisionDeny {
				t.Errorf("decision %v (%q), want the wrapped authorizer's deny", d, reason)
			}
		})
	}
}

func TestDenialsAndErrorsNotRemembered(t *testing.T) {
	tests := []struct {
		name   string
		decide func(authorizer.Attributes) (authorizer.Decision, string, error)
	}{
		{"deny", func(authorizer.Attributes) (authorizer.Decision, string, error) {
			return authorizer.DecisionDeny, "no", nil
		}},
		{"no opinion", func(authorizer.Attributes) (authorizer.Decision, string, error) {
			return authorizer.DecisionNoOpinion, "", nil
		}},
		{"allow with an error", func(authorizer.Attributes) (authorizer.Decision, string, error) {
			return authorizer.DecisionAllow, "", errors.New("webhook: partial")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next := &counting{decide: tt.decide}
			a := newWithClock(next, TTL, time.Now)
			for range 3 {
				_, _, _ = a.Authorize(context.Background(), hpaRequest())
			}
			if next.calls != 3 {
				t.Errorf("%d calls for 3 requests, want 3", next.calls)
			}
		})
	}
}

// TestUnparsedSelectorNotRemembered: with a selector error the wrapped
// authorizer decides on the requirements it could read; such requests
// always go to it.
func TestUnparsedSelectorNotRemembered(t *testing.T) {
	next := &counting{decide: allowAll}
	a := newWithClock(next, TTL, time.Now)
	r := hpaRequest()
	r.LabelSelectorParsingErr = errors.New("bad selector")
	for range 2 {
		_, _, _ = a.Authorize(context.Background(), r)
	}
	r = hpaRequest()
	r.FieldSelectorParsingErr = errors.New("bad selector")
	_, _, _ = a.Authorize(context.Background(), r)
	if next.calls != 3 {
		t.Errorf("%d calls for 3 requests with selector errors, want 3", next.calls)
	}
}

func TestBounded(t *testing.T) {
	next := &counting{decide: allowAll}
	a := newWithClock(next, TTL, time.Now)
	for i := range maxEntries + 10 {
		r := hpaRequest()
		r.Name = "pod-" + string(rune('a'+i%26)) + time.Duration(i).String()
		_, _, _ = a.Authorize(context.Background(), r)
	}
	if n := len(a.allowed.Keys()); n > maxEntries {
		t.Errorf("%d entries, want at most %d", n, maxEntries)
	}
}

func TestConcurrent(t *testing.T) {
	next := &counting{decide: allowAll}
	a := New(next)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if d, _, err := a.Authorize(context.Background(), hpaRequest()); d != authorizer.DecisionAllow || err != nil {
					t.Errorf("%v %v", d, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if next.calls >= 800 {
		t.Errorf("%d calls for 800 requests: nothing was remembered", next.calls)
	}
}

func TestConditionsAwarePassesThrough(t *testing.T) {
	next := &counting{decide: allowAll}
	a := newWithClock(next, TTL, time.Now)
	for range 2 {
		if d := a.ConditionsAwareAuthorize(context.Background(), hpaRequest()); !d.IsAllow() {
			t.Fatalf("decision %v", d)
		}
	}
	if next.calls != 2 {
		t.Errorf("%d calls for 2 conditions-aware requests, want 2", next.calls)
	}
}

// BenchmarkRemembered is the cost of a remembered decision for 32
// concurrent clients, as the adapter serves the HPA.
func BenchmarkRemembered(b *testing.B) {
	a := New(&counting{decide: allowAll})
	req := hpaRequest()
	if _, _, err := a.Authorize(context.Background(), req); err != nil {
		b.Fatal(err)
	}
	b.SetParallelism(16)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if d, _, _ := a.Authorize(context.Background(), req); d != authorizer.DecisionAllow {
				b.Fatal("not allowed")
			}
		}
	})
}
