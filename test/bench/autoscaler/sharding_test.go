package autoscaler

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/autoscaler/shard"
	"github.com/tidal-autoscaler/tidal/test/harness"
	"github.com/tidal-autoscaler/tidal/test/metricsserver"
)

// The sharded replicas' timing: a short lease, so the test sees a
// takeover in little time; the sync period is TIDAL_SHARDING_SYNC (5 s:
// at 600 autoscalers every object's status is written each period here;
// 3,000 need 15 s on 2 cores, where the API server carries about 150
// status writes a second beside everything else).
var shardSync = envDuration("TIDAL_SHARDING_SYNC", 5*time.Second)

const (
	shardLease   = 6 * time.Second
	shardRenew   = 4 * time.Second
	shardRetry   = 1 * time.Second
	shardPeriods = 3
	// maxShardPeriods bounds a stage's window: on a loaded machine (CI runs
	// another package beside this one) the API server carried fewer status
	// writes than 600 a period and a replica came round to part of its
	// share only after the third period (516 of 600 written, one replica
	// 112 of its 200). The window grows a period at a time until every
	// object was written; the one-writer check covers every period of it.
	maxShardPeriods = 12
)

// observeStage waits until every one of objects has been written since
// from, in at least shardPeriods and at most maxShardPeriods whole sync
// periods, and returns the writes of those periods and their count.
func observeStage(t *testing.T, auditLog string, agents map[string]string, from time.Time, objects int) (map[string][]write, int) {
	t.Helper()
	periods := shardPeriods
	for {
		end := from.Add(time.Duration(periods) * shardSync)
		time.Sleep(time.Until(end.Add(2 * time.Second))) // the audit log flushes every second
		writes := statusWrites(t, auditLog, agents, from, end)
		if len(writes) >= objects || periods >= maxShardPeriods {
			return writes, periods
		}
		periods++
	}
}

// TestShardedFleet is the e2e test of --sharding: three replicas split
// TIDAL_SHARDING_AUTOSCALERS (600 in make test; the 3,000 with
// TIDAL_SHARDING_SYNC=15s) HorizontalAutoscalers of one-pod kwok
// Deployments whose usage moves (every reconcile writes a status). From
// the API server's audit log (each replica's user agent names it): in no
// sync period is one object's status written by two replicas, each
// replica writes about a third, and every object is written within the
// three periods. Then one replica is killed: no survivor writes an object
// of its share before the dead replica's Lease expired, the survivors'
// views drop it within the lease duration and a read period of its last
// renewal, every object of its share is written by a survivor, and the
// two survivors again write with one writer per object and period.
func TestShardedFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and thousands of objects")
	}
	cfg := config{autoscalers: envInt("TIDAL_SHARDING_AUTOSCALERS", 600), pods: 1, namespaces: 10}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	apiArgs, auditLog, err := harness.AuditArgs(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := harness.StartT(t, harness.Options{
		ControllerManager: true, Kwok: true,
		ControllerManagerArgs: []string{"--kube-api-qps=500", "--kube-api-burst=1000", "--concurrent-replicaset-syncs=20", "--concurrent-deployment-syncs=20"},
		APIServerArgs:         apiArgs,
	})
	bin, err := harness.TidalBinary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := metricsserver.Start(ctx, h, metricsserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = metrics.Wait() })
	targets := cfg.targets()
	began := time.Now()
	if err := createWorkload(ctx, fastClient(t, h), h.NodeName, cfg, targets); err != nil {
		t.Fatal(err)
	}
	go jitterUsage(ctx, metrics, cfg)
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.ApplyCRDs(ctx, filepath.Join(root, "manifests", "crd")); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(h.Admin)
	if err != nil {
		t.Fatal(err)
	}
	if err := createAutoscalers(ctx, dyn, targets); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d Deployments and HorizontalAutoscalers in %s", len(targets), time.Since(began).Round(time.Second))

	replicas := map[string]*harness.Autoscaler{}
	for _, name := range []string{"tidal-shard-a", "tidal-shard-b", "tidal-shard-c"} {
		a, err := h.StartAutoscaler(ctx, harness.AutoscalerOptions{Binary: bin, Name: name, Sharding: true, Args: []string{
			"--horizontal-pod-autoscaler-sync-period=" + shardSync.String(),
			"--leader-elect-lease-duration=" + shardLease.String(), "--leader-elect-renew-deadline=" + shardRenew.String(),
			"--leader-elect-retry-period=" + shardRetry.String(), "--kube-api-qps=300", "--kube-api-burst=600",
		}})
		if err != nil {
			t.Fatal(err)
		}
		replicas[name] = a
	}
	agents := map[string]string{} // identity -> replica name
	for name, a := range replicas {
		agents[shardIdentity(t, a)] = name
	}
	if err := harness.WaitReady(ctx, nil, "every autoscaler reconciled", 5*time.Minute, func(ctx context.Context) error {
		n, err := withStatus(ctx, dyn)
		if err == nil && n < len(targets) {
			err = fmt.Errorf("%d of %d have a status", n, len(targets))
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}

	// Three replicas, three periods.
	time.Sleep(shardSync)
	from := time.Now()
	writes, periods := observeStage(t, auditLog, agents, from, len(targets))
	share := checkPeriods(t, "three replicas", writes, from, periods, len(targets), 3)

	// Kill c; its last renewal is its Lease's renewTime from then on.
	killed := replicas["tidal-shard-c"]
	if err := syscall.Kill(killed.Process.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	for done, _ := killed.Process.Exited(); !done; done, _ = killed.Process.Exited() {
		time.Sleep(10 * time.Millisecond)
	}
	killedID := shardIdentity(t, killed)
	lastRenewal := renewTime(ctx, t, h, killedID)
	cShare := share["tidal-shard-c"]
	var after map[string][]write
	if err := harness.WaitReady(ctx, nil, "every object of c's share written by a survivor", 3*time.Minute, func(context.Context) error {
		time.Sleep(time.Second) // the audit log flushes every second
		after = statusWrites(t, auditLog, agents, killedAt, time.Now())
		missing := 0
		for key := range cShare {
			if !slices.ContainsFunc(after[key], func(w write) bool { return w.replica != "tidal-shard-c" }) {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d of %d not yet", missing, len(cShare))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// A renewal c sent just before it died may have been stored after the
	// read above; read seconds later, the Lease has c's true last renewal.
	if later := renewTime(ctx, t, h, killedID); later.After(lastRenewal) {
		t.Logf("c's last renewal was stored after the Lease was first read: %s later", later.Sub(lastRenewal))
		lastRenewal = later
	}
	var firstTaken, lastTaken time.Duration
	for key := range cShare {
		var first time.Time
		for _, w := range after[key] {
			if w.replica == "tidal-shard-c" {
				continue
			}
			if w.at.Before(lastRenewal.Add(shardLease)) {
				t.Errorf("%s written by %s %s after c's last renewal, before c's Lease of %s expired", key, w.replica, w.at.Sub(lastRenewal), shardLease)
			}
			if first.IsZero() || w.at.Before(first) {
				first = w.at
			}
		}
		d := first.Sub(lastRenewal)
		if firstTaken == 0 || d < firstTaken {
			firstTaken = d
		}
		lastTaken = max(lastTaken, d)
	}
	for _, name := range []string{"tidal-shard-a", "tidal-shard-b"} {
		changed := viewChangedAfter(t, replicas[name], killedAt)
		if changed.IsZero() {
			t.Errorf("%s never logged a view without c", name)
			continue
		}
		// They own c's share from the instant its Lease expires (a view
		// is computed at the time it is asked), and hand it to their
		// controllers at their next read of the group, at most a read
		// period later; that read (a renewal and a list, on a loaded API
		// server) takes up to one more.
		bound := shardLease + 2*shardRetry
		t.Logf("%s dropped c from its view %s after c's last renewal (bound %s: lease + two read periods)", name, changed.Sub(lastRenewal).Round(10*time.Millisecond), bound)
		if changed.Sub(lastRenewal) > bound {
			t.Errorf("%s took over %s after c's last renewal, more than the lease %s and two read periods", name, changed.Sub(lastRenewal), shardLease)
		}
	}
	t.Logf("c (%d objects) killed %s after its last renewal; its objects were first written by a survivor %s to %s after it",
		len(cShare), killedAt.Sub(lastRenewal).Round(time.Millisecond), firstTaken.Round(time.Millisecond), lastTaken.Round(time.Millisecond))

	// Two replicas, three periods.
	from = time.Now()
	writes, periods = observeStage(t, auditLog, agents, from, len(targets))
	checkPeriods(t, "two replicas after the kill", writes, from, periods, len(targets), 2)
}

// write is one status write of an object by a replica.
type write struct {
	replica string
	at      time.Time
}

// statusWrites reads the HorizontalAutoscaler status writes received in
// [from, to) from the audit log, by object, naming the replica by the
// identity its user agent carries.
func statusWrites(t *testing.T, auditLog string, agents map[string]string, from, to time.Time) map[string][]write {
	t.Helper()
	out := map[string][]write{}
	err := harness.ReadAudit(auditLog, func(e *harness.AuditEvent) {
		if e.Received.Before(from) || !e.Received.Before(to) || e.Kind() != "update horizontalautoscalers.autoscaling.tidal.dev/status" {
			return
		}
		replica := "unknown"
		for id, name := range agents {
			if strings.Contains(e.UserAgent, "("+id+")") {
				replica = name
			}
		}
		key := e.ObjectRef.Namespace + "/" + e.ObjectRef.Name
		out[key] = append(out[key], write{replica, e.Received})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkPeriods checks that in each of periods sync periods from from, no
// object was written by two replicas, that every object was written, and
// returns each replica's objects.
func checkPeriods(t *testing.T, stage string, writes map[string][]write, from time.Time, periods, objects, replicas int) map[string]map[string]bool {
	t.Helper()
	share := map[string]map[string]bool{}
	perPeriod := make([]map[string]bool, periods)
	for i := range perPeriod {
		perPeriod[i] = map[string]bool{}
	}
	for key, ws := range writes {
		byPeriod := map[int]map[string]bool{}
		for _, w := range ws {
			p := int(w.at.Sub(from) / shardSync)
			if p < 0 || p >= periods {
				continue
			}
			if byPeriod[p] == nil {
				byPeriod[p] = map[string]bool{}
			}
			byPeriod[p][w.replica] = true
			perPeriod[p][key] = true
			if share[w.replica] == nil {
				share[w.replica] = map[string]bool{}
			}
			share[w.replica][key] = true
		}
		for p, by := range byPeriod {
			if len(by) > 1 {
				t.Errorf("%s: %s written by %v in period %d", stage, key, slices.Sorted(maps.Keys(by)), p)
			}
		}
	}
	var shares []string
	for name, objs := range share {
		shares = append(shares, fmt.Sprintf("%s %d", name, len(objs)))
	}
	slices.Sort(shares)
	t.Logf("%s: objects written per period %v of %d; shares %s", stage, lens(perPeriod), objects, strings.Join(shares, ", "))
	if len(share) != replicas {
		t.Errorf("%s: %d replicas wrote, want %d", stage, len(share), replicas)
	}
	written := map[string]bool{}
	for name, objs := range share {
		// Rendezvous hashing splits evenly: each about 1/replicas.
		if even := objects / replicas; len(objs) < even*3/4 || len(objs) > even*5/4 {
			t.Errorf("%s: %s wrote %d objects, want about %d", stage, name, len(objs), even)
		}
		for k := range objs {
			written[k] = true
		}
	}
	// Every object is reconciled each period, but a period's writes are
	// what the API server can carry (see shardSync and maxShardPeriods),
	// and a value that repeats (the usage steps cycle through 9) writes
	// nothing: over the window every object must have been written.
	if len(written) < objects {
		t.Errorf("%s: %d of %d objects written in %d periods", stage, len(written), objects, periods)
	}
	return share
}

// shardIdentity is the identity a replica logged when it joined.
func shardIdentity(t *testing.T, a *harness.Autoscaler) string {
	t.Helper()
	data, err := os.ReadFile(a.Process.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`"Joining the shard group".*identity="([^"]+)"`).FindSubmatch(data)
	if m == nil {
		t.Fatalf("%s did not log joining the shard group", a.Process.Name())
	}
	return string(m[1])
}

// viewChangedAfter is when the replica first logged a view of two members
// after t.
func viewChangedAfter(t *testing.T, a *harness.Autoscaler, after time.Time) time.Time {
	t.Helper()
	data, err := os.ReadFile(a.Process.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^I(\d{4} \d{2}:\d{2}:\d{2}\.\d{6}) .*"Shard view changed" members=\[("[^"]*"),("[^"]*")\] active=true`)
	for _, m := range re.FindAllSubmatch(data, -1) {
		at, err := time.ParseInLocation("0102 15:04:05.000000", string(m[1]), time.Local)
		if err != nil {
			continue
		}
		at = at.AddDate(after.Year(), 0, 0)
		if at.After(after) {
			return at
		}
	}
	return time.Time{}
}

func createAutoscalers(ctx context.Context, dyn dynamic.Interface, targets []target) error {
	return createAll(ctx, targets, func(ctx context.Context, t target) error {
		ha := &v1alpha1.HorizontalAutoscaler{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.Kind},
			ObjectMeta: metav1.ObjectMeta{Name: t.name, Namespace: t.namespace},
			Spec:       v1alpha1.HorizontalAutoscalerSpec{HorizontalPodAutoscalerSpec: spec(t)},
		}
		return harness.CreateHorizontalAutoscaler(ctx, dyn, ha)
	})
}

// withStatus counts the HorizontalAutoscalers whose status has metrics.
func withStatus(ctx context.Context, dyn dynamic.Interface) (int, error) {
	list, err := dyn.Resource(v1alpha1.GroupVersionResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, u := range list.Items {
		var ha v1alpha1.HorizontalAutoscaler
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ha); err != nil {
			return 0, err
		}
		if len(ha.Status.CurrentMetrics) > 0 {
			n++
		}
	}
	return n, nil
}

func lens(ms []map[string]bool) []int {
	out := make([]int, len(ms))
	for i, m := range ms {
		out[i] = len(m)
	}
	return out
}

// renewTime is the renewTime of the shard Lease of identity id.
func renewTime(ctx context.Context, t *testing.T, h *harness.Harness, id string) time.Time {
	t.Helper()
	l, err := h.Client.CoordinationV1().Leases("tidal-system").Get(ctx, shard.LeaseName("tidal-autoscaler-shard", id), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Spec.RenewTime.Time
}
