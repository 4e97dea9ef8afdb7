package app

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/tidal-autoscaler/tidal/autoscaler/shard"
)

// shardedReconciler is fakeReconciler that takes a shard member.
type shardedReconciler struct {
	fakeReconciler
	member atomic.Pointer[shard.Member]
}

func (s *shardedReconciler) useMember(m *shard.Member) { s.member.Store(m) }

// TestRunShardedJoinsAndReleases: with --sharding a replica keeps a Lease
// of its own in the group (no leader election Lease), becomes active
// after settling, joins again when its Lease cannot be renewed, and
// deletes its Lease on shutdown after its controller stopped.
func TestRunShardedJoinsAndReleases(t *testing.T) {
	cfg := newConfig(t, append([]string{"--sharding"}, fastElection...)...)
	client := fake.NewClientset()
	cfg.LeaderElectionClient = client
	rec := &shardedReconciler{}
	cfg.Reconciler = rec
	// Registered before Run: the fake's reactor chain is not safe to
	// change while it serves.
	var refuse atomic.Bool
	client.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if refuse.Load() {
			return true, nil, errors.New("the API server cannot be reached")
		}
		return false, nil, nil
	})
	cancel, done := start(t, cfg)

	name := shard.LeaseName("tidal-autoscaler-shard", cfg.Identity)
	waitFor(t, "the shard Lease", func() bool {
		_, err := client.CoordinationV1().Leases("tidal-system").Get(context.Background(), name, metav1.GetOptions{})
		return err == nil
	})
	waitFor(t, "an active member and a running controller", func() bool {
		m := rec.member.Load()
		return m != nil && m.View().Active && rec.running.Load()
	})
	if _, err := client.CoordinationV1().Leases("tidal-system").Get(context.Background(), "tidal-autoscaler", metav1.GetOptions{}); err == nil {
		t.Error("a leader election Lease was taken with --sharding")
	}
	if !rec.member.Load().Owns("ns/anything") {
		t.Error("the only member does not own every key")
	}

	// The API server refuses the renewals: the term ends, a new one joins.
	first := rec.member.Load()
	refuse.Store(true)
	// The first term's controller stops and a second term starts, whose
	// member owns nothing until it has renewed its Lease and settled.
	waitFor(t, "a second term after the lost Lease", func() bool { return rec.runs.Load() == 2 && rec.member.Load() != first })
	if first.Owns("ns/anything") {
		t.Error("the member whose Lease was lost still owns keys")
	}
	if rec.member.Load().View().Active {
		t.Error("the new member is active before it renewed its Lease")
	}
	refuse.Store(false)
	waitFor(t, "the new member active", func() bool { return rec.member.Load().View().Active && rec.running.Load() })

	cancel()
	if err := wait(t, done, 10*time.Second); err != nil {
		t.Errorf("Run() = %v after cancel, want nil", err)
	}
	if _, err := client.CoordinationV1().Leases("tidal-system").Get(context.Background(), name, metav1.GetOptions{}); err == nil {
		t.Error("the shard Lease is still there after shutdown; want it deleted so the others take the share at once")
	}
}
