package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
)

// newConfig builds a Config from flags, for a cluster address where
// nothing listens, with the probes on a free loopback port and the secure
// port on another.
func newConfig(t *testing.T, args ...string) *Config {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	return newConfigFor(t, "https://"+closed, args...)
}

// newConfigFor builds a Config from flags for the cluster at server.
func newConfigFor(t *testing.T, server string, args ...string) *Config {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: %q, insecure-skip-tls-verify: true}
contexts:
- name: ctx
  context: {cluster: c}
current-context: ctx
`, server)), 0o600); err != nil {
		t.Fatal(err)
	}

	o := parse(t, append([]string{"--kubeconfig=" + kubeconfig, "--health-probe-bind-address=127.0.0.1:0", "--bind-address=127.0.0.1"}, args...)...)
	if errs := o.Validate(); len(errs) > 0 {
		t.Fatalf("Validate() = %v", errs)
	}
	if o.SecureServing.BindPort != 0 {
		secure, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		o.SecureServing.Listener = secure
	}
	cfg, err := o.Config()
	if err != nil {
		t.Fatalf("Config() = %v", err)
	}
	return cfg
}

// fastElection keeps leader election tests short.
var fastElection = []string{"--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=200ms"}

// start runs cfg.Run in the background.
func start(t *testing.T, cfg *Config) (cancel func(), done <-chan error) {
	t.Helper()
	// Registered first, so it runs last: after the test's own cleanups.
	t.Cleanup(func() { goleak.VerifyNone(t) })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch := make(chan error, 1)
	go func() { ch <- cfg.Run(ctx) }()
	return cancel, ch
}

func wait(t *testing.T, done <-chan error, within time.Duration) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(within):
		t.Fatalf("Run did not return within %s", within)
		return nil
	}
}

func probe(t *testing.T, cfg *Config, path string) {
	t.Helper()
	url := "http://" + cfg.HealthListener.Addr().String() + path
	var (
		code int
		body []byte
		err  error
	)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var resp *http.Response
		resp, err = http.Get(url)
		if err != nil {
			continue
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if code = resp.StatusCode; code == http.StatusOK {
			return
		}
	}
	t.Fatalf("GET %s = %d %q, %v; want 200", url, code, body, err)
}

func lease(t *testing.T, cfg *Config) *coordinationv1.Lease {
	t.Helper()
	l, err := cfg.LeaderElectionClient.CoordinationV1().Leases("tidal-system").Get(context.Background(), "tidal-autoscaler", metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return l
}

func holder(l *coordinationv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func waitForHolder(t *testing.T, cfg *Config, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for holder(lease(t, cfg)) != want {
		if time.Now().After(deadline) {
			t.Fatalf("lease holder = %q after 10s, want %q", holder(lease(t, cfg)), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fakeReconciler stands for the controller: it runs until cancelled and
// reports synced once told.
type fakeReconciler struct {
	synced  atomic.Bool
	ran     atomic.Bool
	running atomic.Bool
	runs    atomic.Int32
}

func (f *fakeReconciler) Run(ctx context.Context) error {
	f.ran.Store(true)
	f.runs.Add(1)
	f.running.Store(true)
	defer f.running.Store(false)
	<-ctx.Done()
	return nil
}

func (f *fakeReconciler) HasSynced() bool { return f.synced.Load() }

func status(t *testing.T, cfg *Config, path string) int {
	t.Helper()
	resp, err := http.Get("http://" + cfg.HealthListener.Addr().String() + path)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestRunWithoutLeaderElection(t *testing.T) {
	cfg := newConfig(t, "--leader-elect=false")
	rec := &fakeReconciler{}
	cfg.Reconciler = rec
	cancel, done := start(t, cfg)
	probe(t, cfg, "/healthz")
	for deadline := time.Now().Add(10 * time.Second); !rec.ran.Load(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the controller did not start")
		}
	}
	if code := status(t, cfg, "/readyz"); code != http.StatusInternalServerError {
		t.Errorf("/readyz before the caches synced = %d, want 500", code)
	}
	rec.synced.Store(true)
	probe(t, cfg, "/readyz")
	if code := status(t, cfg, "/metrics"); code != http.StatusNotFound {
		t.Errorf("/metrics on the unauthenticated health port = %d, want 404 (it is served on the secure port)", code)
	}
	cancel()
	if err := wait(t, done, 10*time.Second); err != nil {
		t.Errorf("Run() = %v after cancel, want nil", err)
	}
	if _, err := http.Get("http://" + cfg.HealthListener.Addr().String() + "/healthz"); err == nil {
		t.Error("probes still served after Run returned")
	}
}

// TestRunStopsWithAnUnusedProbeConnection: a connection to the probe port
// that never sends a request (an HTTP client's spare dial) does not make a
// clean stop fail.
func TestRunStopsWithAnUnusedProbeConnection(t *testing.T) {
	cfg := newConfig(t, "--leader-elect=false")
	cfg.Reconciler = &fakeReconciler{}
	accepted := newAcceptRecorder(cfg.HealthListener)
	cfg.HealthListener = accepted
	cancel, done := start(t, cfg)
	probe(t, cfg, "/healthz")
	conn, err := net.Dial("tcp", cfg.HealthListener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Stop only once the server holds the connection: one still in the
	// listener's backlog is reset when the listener closes, which neither
	// tests the stop nor reads as EOF.
	accepted.waitFor(t, conn.LocalAddr().String())
	cancel()
	if err := wait(t, done, 20*time.Second); err != nil {
		t.Errorf("Run() = %v after cancel with an unused probe connection open, want nil", err)
	}
	// The server closed the unused connection: a read ends.
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if n, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("read on the unused probe connection after Run returned = %d, %v; want EOF (closed by the server)", n, err)
	}
}

// acceptRecorder records the remote address of every connection its
// listener accepts.
type acceptRecorder struct {
	net.Listener
	mu    sync.Mutex
	addrs map[string]bool
}

func newAcceptRecorder(l net.Listener) *acceptRecorder {
	return &acceptRecorder{Listener: l, addrs: map[string]bool{}}
}

func (l *acceptRecorder) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.addrs[c.RemoteAddr().String()] = true
		l.mu.Unlock()
	}
	return c, err
}

func (l *acceptRecorder) has(addr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.addrs[addr]
}

// waitFor returns once the connection from addr has been accepted.
func (l *acceptRecorder) waitFor(t *testing.T, addr string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !l.has(addr); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the probe server did not accept the connection from %s", addr)
		}
	}
}

func TestRunLeadsAndReleasesTheLease(t *testing.T) {
	cfg := newConfig(t, fastElection...)
	cfg.LeaderElectionClient = fake.NewClientset()
	cancel, done := start(t, cfg)

	waitForHolder(t, cfg, cfg.Identity)
	probe(t, cfg, "/healthz")
	// The Lease names the holder a moment before leader election calls
	// lead; until then the replica is a standby, and a standby is ready.
	for deadline := time.Now().Add(10 * time.Second); !cfg.leading.Load(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("holding the lease, but not leading")
		}
	}
	// The real controller runs against an unreachable API server: its
	// caches never sync, and it must still stop cleanly.
	if code := status(t, cfg, "/readyz"); code != http.StatusInternalServerError {
		t.Errorf("/readyz of a leader whose caches have not synced = %d, want 500", code)
	}
	cancel()
	if err := wait(t, done, 10*time.Second); err != nil {
		t.Errorf("Run() = %v after cancel, want nil", err)
	}
	if got := holder(lease(t, cfg)); got != "" {
		t.Errorf("lease still held by %q after Run returned; want it released", got)
	}
}

// TestRunCampaignsAgainWhenTheLeaseIsLost: a replica whose lease is taken
// over stops its controller but not the process, campaigns again, and
// leads a new term (a new controller run) once the lease is free; the
// new term learns the last leader's renewal from the Lease.
func TestRunCampaignsAgainWhenTheLeaseIsLost(t *testing.T) {
	cfg := newConfig(t, fastElection...)
	client := fake.NewClientset()
	cfg.LeaderElectionClient = client
	rec := &fakeReconciler{}
	cfg.Reconciler = rec
	// The fake does not check resourceVersions; while the lease is taken
	// over, refuse this replica's stale updates as the API server would.
	var takenOver atomic.Bool
	client.PrependReactor("update", "leases", func(action k8stesting.Action) (bool, runtime.Object, error) {
		l := action.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		if takenOver.Load() && holder(l) == cfg.Identity {
			return true, nil, apierrors.NewConflict(coordinationv1.Resource("leases"), l.Name, errors.New("the object has been modified"))
		}
		return false, nil, nil
	})
	cancel, done := start(t, cfg)
	waitForHolder(t, cfg, cfg.Identity)
	waitFor(t, "the first term", func() bool { return rec.running.Load() && rec.runs.Load() == 1 })

	// Another replica takes the lease over, and renews it for a while.
	takenOver.Store(true)
	othersRenewal := metav1.NewMicroTime(time.Now().Truncate(time.Microsecond))
	l := lease(t, cfg)
	l.Spec.HolderIdentity = ptr.To("other-replica")
	l.Spec.RenewTime = &othersRenewal
	l.Spec.LeaseDurationSeconds = ptr.To[int32](60)
	if _, err := client.CoordinationV1().Leases(l.Namespace).Update(context.Background(), l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the controller to stop with the lost lease", func() bool { return !rec.running.Load() })
	select {
	case err := <-done:
		t.Fatalf("Run() = %v after the lease was lost, want it to go on campaigning", err)
	case <-time.After(500 * time.Millisecond):
	}
	probe(t, cfg, "/readyz") // a standby again, and a standby is ready

	// The other replica releases the lease: this one leads a second term.
	takenOver.Store(false)
	l = lease(t, cfg)
	l.Spec.HolderIdentity = ptr.To("")
	if _, err := client.CoordinationV1().Leases(l.Namespace).Update(context.Background(), l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForHolder(t, cfg, cfg.Identity)
	waitFor(t, "a second term", func() bool { return rec.running.Load() && rec.runs.Load() == 2 })
	if got := cfg.handover.PredecessorAlive(); !got.Equal(othersRenewal.Time) {
		t.Errorf("PredecessorAlive() = %v in the second term, want the other replica's last renewal %v", got, othersRenewal.Time)
	}
	cancel()
	if err := wait(t, done, 10*time.Second); err != nil {
		t.Errorf("Run() = %v after cancel, want nil", err)
	}
	if got := holder(lease(t, cfg)); got != "" {
		t.Errorf("lease still held by %q after Run returned; want it released", got)
	}
}

// TestHandoverAfterOwnLostTerm: when nobody else led in between (the API
// server was unreachable, then this replica's own expired record is read
// back), the next term's predecessor is this replica's own last renewal.
func TestHandoverAfterOwnLostTerm(t *testing.T) {
	h := &handover{}
	earlier := time.Now().Add(-time.Hour)
	h.alive = earlier // from a leader before this replica's first term
	lock := h.observe(fakeLock{identity: "me"})
	renewal := time.Now().Truncate(time.Microsecond)
	if err := lock.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "me", RenewTime: metav1.NewTime(renewal)}); err != nil {
		t.Fatal(err)
	}
	// A record of another replica written by this lock (a release by
	// someone else's identity cannot happen, but a failed write can).
	_ = lock.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "me", RenewTime: metav1.NewTime(renewal.Add(time.Minute))})
	if got := h.PredecessorAlive(); !got.Equal(earlier) {
		t.Fatalf("PredecessorAlive() = %v while this replica leads, want the earlier leader's %v", got, earlier)
	}
	h.selfStopped()
	if got := h.PredecessorAlive(); !got.Equal(renewal) {
		t.Errorf("PredecessorAlive() = %v after the lost term, want its last successful renewal %v", got, renewal)
	}
}

// fakeLock is a resourcelock.Interface whose Update fails for renewals
// after the first, as writes to an unreachable API server do.
type fakeLock struct {
	resourcelock.Interface
	identity string
}

func (f fakeLock) Identity() string { return f.identity }

func (f fakeLock) Update(_ context.Context, r resourcelock.LeaderElectionRecord) error {
	if r.RenewTime.After(time.Now().Add(time.Second)) {
		return errors.New("the API server cannot be reached")
	}
	return nil
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 10s", what)
		}
	}
}

func TestRunCancelledWhileWaitingToLead(t *testing.T) {
	cfg := newConfig(t, fastElection...)
	now := metav1.NewMicroTime(time.Now())
	cfg.LeaderElectionClient = fake.NewClientset(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tidal-system", Name: "tidal-autoscaler"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To("other-replica"), LeaseDurationSeconds: ptr.To[int32](60),
			AcquireTime: &now, RenewTime: &now,
		},
	})
	cancel, done := start(t, cfg)
	probe(t, cfg, "/healthz")
	probe(t, cfg, "/readyz") // a standby is ready
	cancel()
	if err := wait(t, done, 10*time.Second); err != nil {
		t.Errorf("Run() = %v after cancel, want nil", err)
	}
	if got := holder(lease(t, cfg)); got != "other-replica" {
		t.Errorf("lease holder = %q, want other-replica left alone", got)
	}
}

// TestHandoverLearnsWhenThePredecessorStopped: a replica that takes over
// an expired lease (or a released one) tells its controller the previous
// holder's last renew time; a first leader has no predecessor.
func TestHandoverLearnsWhenThePredecessorStopped(t *testing.T) {
	lastRenewal := metav1.NewMicroTime(time.Now().Add(-time.Minute).Truncate(time.Microsecond))
	for _, tc := range []struct {
		name   string
		holder string // "" for a released lease
		lease  bool
		want   time.Time
	}{
		{"the previous leader's lease expired", "other-replica", true, lastRenewal.Time},
		{"the previous leader released the lease", "", true, lastRenewal.Time},
		{"no lease yet", "", false, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := newConfig(t, fastElection...)
			var objs []runtime.Object
			if tc.lease {
				objs = append(objs, &coordinationv1.Lease{
					ObjectMeta: metav1.ObjectMeta{Namespace: "tidal-system", Name: "tidal-autoscaler"},
					Spec: coordinationv1.LeaseSpec{
						HolderIdentity: ptr.To(tc.holder), LeaseDurationSeconds: ptr.To[int32](3),
						AcquireTime: &lastRenewal, RenewTime: &lastRenewal,
					},
				})
			}
			cfg.LeaderElectionClient = fake.NewClientset(objs...)
			rec := &fakeReconciler{}
			cfg.Reconciler = rec
			cancel, done := start(t, cfg)
			defer func() {
				cancel()
				_ = wait(t, done, 10*time.Second)
			}()
			waitForHolder(t, cfg, cfg.Identity)
			for deadline := time.Now().Add(10 * time.Second); !rec.ran.Load(); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the controller did not start")
				}
			}
			if got := cfg.handover.PredecessorAlive(); !got.Equal(tc.want) {
				t.Errorf("PredecessorAlive = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestNoHandoverWithoutLeaderElection: without a lease nothing can tell a
// restarted controller when its predecessor stopped, so the controller
// gets no handover (and refreshes the history on its own).
func TestNoHandoverWithoutLeaderElection(t *testing.T) {
	if cfg := newConfig(t, "--leader-elect=false"); cfg.handover != nil {
		t.Error("a handover without leader election")
	}
}

// TestProfilingFlag: pprof is served only when asked for, and then only
// on the secure port, to whom the cluster authorizes.
func TestProfilingFlag(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want int
	}{
		{name: "off by default", args: []string{"--leader-elect=false"}, want: http.StatusNotFound},
		{name: "--profiling", args: []string{"--leader-elect=false", "--profiling"}, want: http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cluster := newFakeCluster(t)
			cfg := newConfigFor(t, cluster.URL, tt.args...)
			cfg.Reconciler = &fakeReconciler{}
			cancel, done := start(t, cfg)
			t.Cleanup(cluster.Close) // before start's goroutine check
			probe(t, cfg, "/healthz")
			if code, _ := get(t, "https://"+cfg.SecureServing.Listener.Addr().String()+"/debug/pprof/", scraperToken); code != tt.want {
				t.Errorf("/debug/pprof/ on the secure port = %d, want %d", code, tt.want)
			}
			if code := status(t, cfg, "/debug/pprof/"); code != http.StatusNotFound {
				t.Errorf("/debug/pprof/ on the unauthenticated health port = %d, want 404", code)
			}
			cancel()
			if err := wait(t, done, 10*time.Second); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestReadyCheck: /readyz by mode. A sharded replica that has not yet
// joined its group is not ready (the e2e harness and a rolling update wait
// on it), where a leader-election standby is.
func TestReadyCheck(t *testing.T) {
	tests := []struct {
		name                      string
		sharding, leading, synced bool
		wantReady                 bool
	}{
		{name: "standby waiting for the lease", wantReady: true},
		{name: "leader before its caches synced", leading: true},
		{name: "leader with synced caches", leading: true, synced: true, wantReady: true},
		{name: "sharded replica joining its group", sharding: true},
		{name: "sharded replica joining its group, caches synced", sharding: true, synced: true},
		{name: "sharded replica running, caches not synced", sharding: true, leading: true},
		{name: "sharded replica running with synced caches", sharding: true, leading: true, synced: true, wantReady: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &fakeReconciler{}
			rec.synced.Store(tt.synced)
			cfg := &Config{Reconciler: rec, Sharding: tt.sharding}
			cfg.leading.Store(tt.leading)
			if err := cfg.readyCheck(nil); (err == nil) != tt.wantReady {
				t.Errorf("readyCheck() = %v, want ready %v", err, tt.wantReady)
			}
		})
	}
}
