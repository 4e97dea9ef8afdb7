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
	if c.LeaderElection.LeaderElect {
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
		if c.LeaderElection.LeaderElect {
			runErr <- c.runWithLeaderElection(runCtx, electionChecker)
		} else {
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

	shutdownCtx, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	if shutdownErr := probes.Shutdown(shutdownCtx); shutdownErr != nil && err == nil {
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
// reporting it unready would stall rolling updates of the Deployment.
func (c *Config) readyCheck(*http.Request) error {
	if c.leading.Load() && !c.Reconciler.HasSynced() {
		return errors.New("leading, but the controller's caches have not synced yet")
	}
	return nil
}
