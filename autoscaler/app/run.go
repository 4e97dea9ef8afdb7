package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/tidal-autoscaler/tidal/autoscaler/shard"
	"github.com/tidal-autoscaler/tidal/autoscaler/source"
	"github.com/tidal-autoscaler/tidal/internal/version"
)

// Run serves the health probes and, once this replica leads (or at once
// when leader election is off), runs the autoscaler until ctx is cancelled.
// A replica that loses the lease (the API server unreachable for longer
// than the renew deadline, say) stops its controller and campaigns again
// without restarting. Run returns nil after a clean shutdown, and an error
// when the controller or the probe server fails. Run may be called once
// per Config.
func (c *Config) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	logger.Info("Starting tidal autoscaler", "version", version.Get().Version, "mode", c.Mode,
		"leaderElection", c.LeaderElection.LeaderElect, "healthProbeAddress", c.HealthListener.Addr().String())

	var electionChecker *leaderelection.HealthzAdaptor
	healthChecks := []healthz.HealthChecker{healthz.PingHealthz}
	if c.LeaderElection.LeaderElect && !c.Sharding {
		// Fails /healthz when this replica believes it leads but has not
		// renewed the lease for a while, so a wedged leader is restarted.
		electionChecker = leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
		healthChecks = append(healthChecks, electionChecker)
	}
	readyChecks := []healthz.HealthChecker{healthz.PingHealthz, healthz.NamedCheck("controller", c.readyCheck)}
	// The plain HTTP listener answers the probes only: no credentials, and
	// nothing on it that needs them.
	mux := http.NewServeMux()
	installProbes(mux, healthChecks, readyChecks)
	probes := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	// The secure port: the probes for anyone, /metrics and /debug/pprof/
	// for whom the cluster authorizes.
	stopSecure := make(chan struct{})
	var secureStopped <-chan struct{}
	if c.SecureServing != nil {
		handler := secureHandler(c.secureMux(healthChecks, readyChecks), c.Authentication, c.Authorization)
		stopped, _, err := c.SecureServing.Serve(handler, 5*time.Second, stopSecure)
		if err != nil {
			close(stopSecure)
			c.SecureServing.Listener.Close()
			c.HealthListener.Close()
			return fmt.Errorf("serving on the secure port %s: %w", c.SecureServing.Listener.Addr(), err)
		}
		secureStopped = stopped
		logger.Info("Serving /metrics over HTTPS with delegated authentication and authorization", "address", c.SecureServing.Listener.Addr().String())
	}
	probeErr := make(chan error, 1)
	go func() { probeErr <- probes.Serve(c.HealthListener) }()

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	runErr := make(chan error, 1)
	go func() {
		switch {
		case c.Sharding:
			runErr <- c.runSharded(runCtx)
		case c.LeaderElection.LeaderElect:
			runErr <- c.runWithLeaderElection(runCtx, electionChecker)
		default:
			runErr <- c.lead(runCtx)
		}
	}()

	var err error
	select {
	case err = <-runErr:
	case err = <-probeErr:
		err = fmt.Errorf("health probe server on %s: %w", c.HealthListener.Addr(), err)
		cancel()
		<-runErr
	}

	if shutdownErr := stopProbes(probes); shutdownErr != nil && err == nil {
		err = fmt.Errorf("stopping the health probe server: %w", shutdownErr)
	}
	close(stopSecure)
	if secureStopped != nil {
		<-secureStopped
	}
	if err == nil {
		logger.Info("tidal autoscaler stopped")
	}
	return err
}

// probeShutdownGrace bounds the graceful stop of the probe server.
const probeShutdownGrace = 2 * time.Second

// stopProbes stops the probe server: gracefully while a probe is being
// answered, then by closing what is left. net/http's Shutdown counts a
// connection that has not sent its request as busy for its first 5
// seconds, and an HTTP client may dial a connection it then leaves unused
// (a second dial raced by a connection freed meanwhile); such a connection
// has nothing to finish, so it must not turn a clean stop into an error.
func stopProbes(probes *http.Server) error {
	ctx, cancel := context.WithTimeout(context.Background(), probeShutdownGrace)
	defer cancel()
	err := probes.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return probes.Close()
	}
	return err
}

// runWithLeaderElection runs lead only while this replica holds the
// Lease, for as many terms as it wins, until ctx is done.
//
// kube-controller-manager exits when it loses its lease and counts on a
// restart; Tidal campaigns again in-process instead, so that an API server
// outage longer than the renew deadline costs no restart (and no
// CrashLoopBackOff delay). That is safe because a lost term's controller
// has stopped before the next campaign starts, and the next term builds
// its controller anew from the cluster (see runner).
func (c *Config) runWithLeaderElection(ctx context.Context, checker *leaderelection.HealthzAdaptor) error {
	logger := klog.FromContext(ctx)
	le := c.LeaderElection
	for terms := 0; ; terms++ {
		lost, err := c.leadOneTerm(ctx, checker)
		if err != nil || !lost {
			return err
		}
		if c.handover != nil {
			// This replica's own lost term is the predecessor of the next
			// one unless another replica leads in between (its record,
			// read while campaigning, then says so).
			c.handover.selfStopped()
		}
		logger.Info("Lost the leader election lease: the controller stopped; campaigning again",
			"lease", klog.KRef(le.ResourceNamespace, le.ResourceName), "identity", c.Identity, "termsLost", terms+1)
	}
}

// leadOneTerm campaigns for the Lease and, once it holds it, runs lead
// until ctx is done (lost false) or the lease is lost (lost true).
//
// The lease is released (ReleaseOnCancel) only after lead has returned, so
// a successor never acts while this replica still does: lead runs under
// ctx and the election under its own context, cancelled afterwards.
func (c *Config) leadOneTerm(ctx context.Context, checker *leaderelection.HealthzAdaptor) (lost bool, err error) {
	logger := klog.FromContext(ctx)
	le := c.LeaderElection
	lock, err := resourcelock.New(le.ResourceLock, le.ResourceNamespace, le.ResourceName,
		c.LeaderElectionClient.CoreV1(), c.LeaderElectionClient.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: c.Identity})
	if err != nil {
		return false, fmt.Errorf("leader election lock: %w", err)
	}
	if c.handover != nil {
		lock = c.handover.observe(lock)
	}

	// Buffered: the elector calls OnStartedLeading at most once per Run,
	// from its own goroutine, and must not block if nobody listens anymore.
	leading := make(chan context.Context, 1)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   le.LeaseDuration.Duration,
		RenewDeadline:   le.RenewDeadline.Duration,
		RetryPeriod:     le.RetryPeriod.Duration,
		ReleaseOnCancel: true,
		Name:            source.ComponentName,
		WatchDog:        checker,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leaseCtx context.Context) { leading <- leaseCtx },
			OnStoppedLeading: func() { logger.Info("Stopped leading", "identity", c.Identity) },
			OnNewLeader: func(identity string) {
				if identity != c.Identity {
					logger.Info("Another replica leads", "leader", identity)
				}
			},
		},
	})
	if err != nil {
		return false, fmt.Errorf("leader election: %w", err)
	}
	if checker != nil {
		checker.SetLeaderElection(elector)
	}

	electionCtx, stopElection := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElection()
	electionDone := make(chan struct{})
	go func() {
		defer close(electionDone)
		elector.Run(electionCtx)
	}()
	logger.Info("Waiting to lead", "lease", klog.KRef(le.ResourceNamespace, le.ResourceName), "identity", c.Identity)

	select {
	case <-ctx.Done():
		// Not leading (or only just): stop campaigning. A late
		// OnStartedLeading gets an already cancelled context and is
		// ignored.
		stopElection()
		<-electionDone
		return false, nil

	case <-electionDone:
		// Run returns before leading only when its context is cancelled,
		// which only this function does.
		return false, errors.New("leader election ended before this replica could lead")

	case leaseCtx := <-leading:
		// Stop on shutdown or when the lease is lost, whichever is first.
		leadCtx, stopLeading := context.WithCancel(leaseCtx)
		defer stopLeading()
		stopOnShutdown := context.AfterFunc(ctx, stopLeading)
		defer stopOnShutdown()

		leadErr := c.lead(leadCtx)
		lost = ctx.Err() == nil
		stopElection() // releases the lease
		<-electionDone
		if leadErr != nil {
			return false, leadErr
		}
		return lost, nil
	}
}

// runSharded runs the controller on this replica's share of the
// autoscalers (--sharding, autoscaler/shard) until ctx is done; a replica
// whose shard Lease could not be renewed in time stops its controller and
// joins again, as a replica that lost the leader election lease campaigns
// again.
func (c *Config) runSharded(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	le := c.LeaderElection
	sharded, ok := c.Reconciler.(interface{ useMember(*shard.Member) })
	if !ok {
		return fmt.Errorf("the controller %T cannot be sharded", c.Reconciler)
	}
	for terms := 0; ; terms++ {
		m, err := shard.New(shard.Config{
			Leases: c.LeaderElectionClient.CoordinationV1(), Namespace: le.ResourceNamespace,
			Group: le.ResourceName + "-shard", Identity: c.Identity,
			LeaseDuration: le.LeaseDuration.Duration, RenewDeadline: le.RenewDeadline.Duration, RetryPeriod: le.RetryPeriod.Duration,
		})
		if err != nil {
			return fmt.Errorf("sharding: %w", err)
		}
		sharded.useMember(m)
		logger.Info("Joining the shard group", "group", le.ResourceName+"-shard", "namespace", le.ResourceNamespace, "identity", c.Identity)
		lost, err := c.shardTerm(ctx, m)
		if err != nil || !lost {
			return err
		}
		logger.Info("Could not renew this replica's shard Lease in time: the controller stopped; joining again", "identity", c.Identity, "termsLost", terms+1)
	}
}

// shardTerm runs the member and the controller until ctx is done (the
// Lease is then released, after the controller stopped, so the others
// take the share at once) or the member's Lease is lost (lost true).
func (c *Config) shardTerm(ctx context.Context, m *shard.Member) (lost bool, err error) {
	memberCtx, stopMember := context.WithCancel(context.WithoutCancel(ctx))
	defer stopMember()
	memberDone := make(chan error, 1)
	go func() { memberDone <- m.Run(memberCtx) }()
	leadCtx, stopLead := context.WithCancel(ctx)
	defer stopLead()
	leadDone := make(chan error, 1)
	go func() { leadDone <- c.lead(leadCtx) }()

	select {
	case memberErr := <-memberDone:
		stopLead()
		leadErr := <-leadDone
		if leadErr != nil {
			return false, leadErr
		}
		return errors.Is(memberErr, shard.ErrLost), nil
	case leadErr := <-leadDone:
		stopMember()
		<-memberDone
		if ctx.Err() != nil {
			releaseCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := m.Release(releaseCtx); err != nil {
				klog.FromContext(ctx).Error(err, "Releasing this replica's shard Lease failed; the others take its share when it expires")
			}
		}
		return false, leadErr
	}
}

// lead runs what only the leader may run, the controller, until ctx is
// done.
func (c *Config) lead(ctx context.Context) error {
	klog.FromContext(ctx).Info("Leading: starting the controller", "identity", c.Identity, "mode", c.Mode)
	c.leading.Store(true)
	defer c.leading.Store(false)
	return c.Reconciler.Run(ctx)
}

// readyCheck is /readyz: a leader is ready once its caches have synced. A
// replica waiting for the lease is ready too: it is a healthy standby, and
// reporting it unready would stall rolling updates of the Deployment. A
// sharded replica has no standby state: it is ready once it has joined the
// group and its controller's caches have synced, so that a rolling update
// waits for the new replica to take its share.
func (c *Config) readyCheck(*http.Request) error {
	if c.Sharding && !c.leading.Load() {
		return errors.New("sharded, but not yet running the controller on a share (joining the shard group)")
	}
	if c.leading.Load() && !c.Reconciler.HasSynced() {
		return errors.New("leading, but the controller's caches have not synced yet")
	}
	return nil
}
