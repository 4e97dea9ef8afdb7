package shard

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

const (
	retry = 2 * time.Second
	renew = 10 * time.Second
	lease = 15 * time.Second
)

// settle is how long a member that joined waits before it reconciles.
var settle = Config{RetryPeriod: retry}.Settle()

// group is members sharing one fake API server and one fake clock.
type group struct {
	t       testing.TB
	client  *fake.Clientset
	clock   *clocktesting.FakeClock
	members map[string]*Member
}

func newGroup(t testing.TB) *group {
	return &group{t: t, client: fake.NewClientset(), clock: clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0)), members: map[string]*Member{}}
}

func (g *group) join(id string) *Member {
	m, err := New(Config{Leases: g.client.CoordinationV1(), Namespace: "tidal-system", Group: "tidal-autoscaler-shard", Identity: id,
		LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry, Clock: g.clock})
	if err != nil {
		g.t.Fatal(err)
	}
	g.members[id] = m
	return m
}

// step runs one Step of the named members (all when none are named).
func (g *group) step(ids ...string) {
	if len(ids) == 0 {
		for id := range g.members {
			ids = append(ids, id)
		}
	}
	for _, id := range ids {
		if err := g.members[id].Step(context.Background()); err != nil && !errors.Is(err, ErrLost) {
			g.t.Fatal(err)
		}
	}
}

// owners counts, for keys, how many members own each, and checks that
// none is owned twice; it returns how many are owned by each member.
func (g *group) owners(stage string) map[string]int {
	g.t.Helper()
	count := map[string]int{}
	for _, k := range keys(300) {
		var by []string
		for id, m := range g.members {
			if m.Owns(k) {
				by = append(by, id)
			}
		}
		if len(by) > 1 {
			g.t.Fatalf("%s: key %s owned by %v at once", stage, k, by)
		}
		if len(by) == 1 {
			count[by[0]]++
		}
	}
	return count
}

func TestMembersSplitJoinAndLeave(t *testing.T) {
	g := newGroup(t)
	g.join("a")
	g.join("b")
	g.step()
	g.step() // both have read both Leases
	if c := g.owners("just joined"); len(c) != 0 {
		t.Fatalf("members reconcile before they settled: %v", c)
	}
	g.clock.Step(settle)
	g.step()
	if c := g.owners("settled"); c["a"]+c["b"] != 300 || c["a"] < 100 || c["b"] < 100 {
		t.Fatalf("two settled members own %v of 300 keys, want all, split", c)
	}

	// c joins: a and b leave it its share at their next read, before c
	// reconciles any of it.
	g.join("c")
	g.step("c")
	g.clock.Step(retry)
	g.step("a")
	g.owners("c joined, a has read it, b not yet") // b still owns its old share, c nothing yet
	g.step("b", "c")
	g.clock.Step(retry)
	g.step()
	if c := g.owners("c settled"); c["a"]+c["b"]+c["c"] != 300 || c["c"] < 60 {
		t.Fatalf("after c settled: %v, want all 300 keys split three ways", c)
	}

	// c stops and releases its Lease: the others take its share at their
	// next read.
	if err := g.members["c"].Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	g.clock.Step(retry)
	g.step("a", "b")
	delete(g.members, "c")
	if c := g.owners("c released"); c["a"]+c["b"] != 300 {
		t.Fatalf("after c released: %v, want a and b to own all 300 keys", c)
	}
}

func TestDeadMemberShareMovesAfterItsLease(t *testing.T) {
	g := newGroup(t)
	g.join("a")
	g.join("b")
	g.step()
	g.clock.Step(settle)
	g.step()
	before := g.owners("settled")
	// b dies: it renews no more. It stops owning at its renew deadline,
	// a takes b's share once b's Lease expired.
	var takenAt time.Duration
	for elapsed := time.Duration(0); elapsed <= 2*lease; elapsed += retry {
		g.clock.Step(retry)
		g.step("a")
		c := g.owners(fmt.Sprintf("%s after b's last renewal", elapsed+retry))
		if c["a"] == 300 && takenAt == 0 {
			takenAt = elapsed + retry
		}
		if elapsed+retry < lease && c["a"] != before["a"] {
			t.Fatalf("a took keys %s after b's last renewal, before b's Lease of %s expired", elapsed+retry, lease)
		}
	}
	if takenAt == 0 || takenAt > lease+retry {
		t.Errorf("a took b's share %s after b's last renewal, want within the lease (%s) and a read period (%s)", takenAt, lease, retry)
	}
}

func TestRenewalOverdueIsLost(t *testing.T) {
	g := newGroup(t)
	m := g.join("a")
	g.step()
	g.clock.Step(settle)
	g.step()
	if !m.View().Active {
		t.Fatal("not active after settling")
	}
	changes := 0
	m.OnChange(func() { changes++ })
	g.client.PrependReactor("*", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("the API server cannot be reached")
	})
	var err error
	for i := 0; i < 10 && err == nil; i++ {
		g.clock.Step(retry)
		err = m.Step(context.Background())
		if m.View().Active && g.clock.Since(m.renewed) >= renew {
			t.Fatal("active past the renew deadline")
		}
	}
	if !errors.Is(err, ErrLost) {
		t.Fatalf("Step = %v after renewals failed past the deadline, want ErrLost", err)
	}
	if m.Owns("ns/x") || changes == 0 {
		t.Errorf("after the loss: owns %v, listeners told %d times; want nothing owned and the change told", m.Owns("ns/x"), changes)
	}
}

func TestLongExpiredLeasesAreDeleted(t *testing.T) {
	g := newGroup(t)
	g.join("old")
	g.step()
	delete(g.members, "old")
	g.clock.Step(11 * lease)
	g.join("new")
	g.step()
	l, err := g.client.CoordinationV1().Leases("tidal-system").List(context.Background(), metav1ListAll())
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 1 || l.Items[0].Name != LeaseName("tidal-autoscaler-shard", "new") {
		t.Errorf("leases %v, want only the new member's", l.Items)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"ordered", Config{Identity: "a", Group: "g", Namespace: "n", RetryPeriod: retry, RenewDeadline: renew, LeaseDuration: lease}, true},
		{"renew deadline not below the lease", Config{Identity: "a", Group: "g", Namespace: "n", RetryPeriod: retry, RenewDeadline: lease, LeaseDuration: lease}, false},
		{"no identity", Config{Group: "g", Namespace: "n", RetryPeriod: retry, RenewDeadline: renew, LeaseDuration: lease}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Validate(); (err == nil) != tc.ok {
				t.Errorf("Validate() = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

func metav1ListAll() metav1.ListOptions { return metav1.ListOptions{} }

// TestViewHoldsUntilItsEnd checks the span viewOf gives a view: at every
// time in it (and just before its end) the view made afresh is the same,
// for random records and member times around now, and at its end a
// threshold has been crossed.
func TestViewHoldsUntilItsEnd(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	now := time.Unix(1_700_000_000, 0)
	at := func() time.Time {
		if rng.IntN(8) == 0 {
			return time.Time{}
		}
		return now.Add(time.Duration(rng.IntN(40_000)-30_000) * time.Millisecond)
	}
	for i := range 2000 {
		var records []Record
		for j := range rng.IntN(4) {
			records = append(records, Record{Holder: fmt.Sprintf("m%d", j), Renewed: at(), Duration: lease})
		}
		renewed, acquired, read := at(), at(), at()
		v, until := viewOf(records, "m0", renewed, acquired, read, renew, settle, now)
		if !until.After(now) {
			t.Fatalf("case %d: the view ends at %s, not after now", i, until.Sub(now))
		}
		for _, d := range []time.Duration{0, until.Sub(now) / 2, until.Sub(now) - time.Nanosecond} {
			if w, _ := viewOf(records, "m0", renewed, acquired, read, renew, settle, now.Add(d)); !w.Equal(v) {
				t.Fatalf("case %d: view %+v at now, %+v %s later, before its end (%s)", i, v, w, d, until.Sub(now))
			}
		}
	}
}

// TestOwnsFollowsTheClock: a member's cached view ends when the clock
// passes a threshold, without a Step: a member whose Lease expires is
// gone for the others at once.
func TestOwnsFollowsTheClock(t *testing.T) {
	g := newGroup(t)
	g.join("a")
	g.join("b")
	g.step()
	g.clock.Step(settle)
	g.step()
	if c := g.owners("both active"); c["a"] == 0 || c["b"] == 0 {
		t.Fatalf("both members should own keys: %v", c)
	}
	// b stops renewing; a reads the group every period, the last time
	// 1 s before b's Lease expires.
	for range 7 {
		g.clock.Step(retry)
		g.step("a")
	}
	if c := g.owners("b about to expire"); c["a"] == 300 {
		t.Fatalf("b's Lease is still live: a should not own every key: %v", c)
	}
	g.clock.Step(time.Second)
	if c := g.owners("b expired"); c["a"] != 300 {
		t.Fatalf("a should own every key once b's Lease expired: %v", c)
	}
	// a's own renewal deadline passes without a Step: it owns nothing.
	g.clock.Step(renew)
	if c := g.owners("a overdue"); c["a"] != 0 {
		t.Fatalf("a should own nothing past its renew deadline: %v", c)
	}
}

func BenchmarkMemberOwns(b *testing.B) {
	g := newGroup(b)
	for _, id := range []string{"tidal-autoscaler-0", "tidal-autoscaler-1", "tidal-autoscaler-2"} {
		g.join(id)
	}
	g.step()
	g.clock.Step(settle)
	g.step()
	m := g.members["tidal-autoscaler-0"]
	ks := keys(1000)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		m.Owns(ks[i%len(ks)])
	}
}
