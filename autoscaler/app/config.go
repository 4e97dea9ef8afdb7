package app

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
	componentbaseconfig "k8s.io/component-base/config"

	"github.com/tidal-autoscaler/tidal/autoscaler/controller"
	"github.com/tidal-autoscaler/tidal/autoscaler/decision"
	"github.com/tidal-autoscaler/tidal/autoscaler/monitor"
	"github.com/tidal-autoscaler/tidal/autoscaler/replicas"
	"github.com/tidal-autoscaler/tidal/autoscaler/source"
	"github.com/tidal-autoscaler/tidal/internal/kubeconfig"
)

// Config is everything the autoscaler needs to run, built from validated
// Options.
type Config struct {
	Client kubernetes.Interface
	// LeaderElectionClient has its own timeout, shorter than the renew
	// deadline, so a hung request cannot cost the lease (as in
	// kube-controller-manager).
	LeaderElectionClient kubernetes.Interface

	Mode           source.Mode
	HPA            HPAControllerOptions
	LeaderElection componentbaseconfig.LeaderElectionConfiguration
	// Sharding: every replica reconciles its share (autoscaler/shard);
	// no leader is elected.
	Sharding bool
	// Identity names this replica in the Lease.
	Identity string
	// leading is true while lead runs, for /readyz.
	leading atomic.Bool

	// HealthListener is already bound, so a port 0 address is resolved by
	// the time Config returns. Run closes it. It serves the probes only.
	HealthListener net.Listener
	// SecureServing serves the probes, /metrics and /debug/pprof/ over
	// HTTPS, its listener already bound; nil with --secure-port=0.
	SecureServing *server.SecureServingInfo
	// Authentication and Authorization guard SecureServing.
	Authentication server.AuthenticationInfo
	Authorization  server.AuthorizationInfo

	// Reconciler is what the leader runs; building it contacted nothing.
	Reconciler Reconciler
	// Registry holds the controller's and the process's metrics, except
	// the per-autoscaler series, which ObjectSeries holds; /metrics serves
	// both.
	Registry     *prometheus.Registry
	ObjectSeries *monitor.ObjectSeries
	// Profiling serves /debug/pprof/ on the secure port.
	Profiling bool
	// handover observes the leader election records for the controller;
	// nil without leader election.
	handover *handover
}

// Reconciler is the controller with its informers and clients.
type Reconciler interface {
	// Run reconciles until ctx is done and returns once stopped.
	Run(ctx context.Context) error
	// HasSynced reports whether its caches have synced.
	HasSynced() bool
}

// Config builds the autoscaler's configuration. Call Validate first:
// Config reports the first problem it meets, Validate all of them. It
// does not contact the cluster; it binds the health probe address and the
// secure port.
func (o *Options) Config() (*Config, error) {
	kube, err := kubeconfig.Load(o.Kubeconfig, source.ComponentName)
	if err != nil {
		return nil, err
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("reading the hostname for the leader election identity: %w", err)
	}
	// The UUID keeps two processes on one host (or a restarted pod
	// whose old lease has not expired) from sharing an identity.
	identity := host + "_" + string(uuid.NewUUID())
	// The identity in the user agent tells replicas apart in the API
	// server's audit log (they share a service account).
	kube.UserAgent += " (" + identity + ")"
	kube.QPS, kube.Burst = o.KubeAPIQPS, int(o.KubeAPIBurst)
	// Not rest.Config.Timeout, which would also end the informers'
	// watches (it is the http.Client's, which counts reading the body).
	kube.Wrap(requestTimeout(o.KubeAPITimeout))
	// No gzip, as kube-controller-manager's clients: next to the API server
	// compressing lists and watch streams costs both sides more CPU than
	// the bytes it saves.
	kube.DisableCompression = true
	// Built-in types in protobuf, as kube-controller-manager's clients:
	// decoding the pod informer's lists and watches costs less.
	client, err := kubernetes.NewForConfig(withProtobuf(kube))
	if err != nil {
		return nil, fmt.Errorf("building the Kubernetes client: %w", err)
	}

	leKube := rest.AddUserAgent(rest.CopyConfig(kube), "leader-election")
	leKube.Timeout = o.LeaderElection.RenewDeadline.Duration / 2
	leClient, err := kubernetes.NewForConfig(leKube)
	if err != nil {
		return nil, fmt.Errorf("building the leader election client: %w", err)
	}

	// With leader election a new leader learns from the lease when the
	// previous one stopped (see handover); without, nothing tells it.
	var (
		h  *handover
		ho controller.Handover
	)
	if o.LeaderElection.LeaderElect && !o.Sharding {
		h = &handover{}
		ho = h
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	objects := monitor.NewObjectSeries()
	rec, err := newRunner(clusterConfig{
		REST: kube, Client: client, Mode: source.Mode(o.Mode),
		Decision:   o.HPA.decisionConfig(),
		SyncPeriod: o.HPA.SyncPeriod, Workers: int(o.HPA.ConcurrentSyncs),
		Registerer: reg, ObjectSeries: objects, Handover: ho, Namespace: o.Namespace,
		StatusMetricsMinInterval: o.StatusMetricsMinInterval,
		GuardOtherWriters:        o.GuardOtherWriters,
		Sharding:                 o.Sharding,
	})
	if err != nil {
		return nil, fmt.Errorf("building the controller: %w", err)
	}

	ln, err := net.Listen("tcp", o.HealthProbeBindAddress)
	if err != nil {
		return nil, fmt.Errorf("--health-probe-bind-address %q: %w", o.HealthProbeBindAddress, err)
	}

	cfg := &Config{
		Client:               client,
		LeaderElectionClient: leClient,
		Mode:                 source.Mode(o.Mode),
		HPA:                  o.HPA,
		LeaderElection:       o.LeaderElection,
		Sharding:             o.Sharding,
		Identity:             identity,
		HealthListener:       ln,
		Reconciler:           rec,
		handover:             h,
		Registry:             reg,
		ObjectSeries:         objects,
		Profiling:            o.Profiling,
	}
	if err := o.applyServing(cfg); err != nil {
		ln.Close()
		return nil, err
	}
	return cfg, nil
}

// decisionConfig is the decision core's configuration from the flags, with
// kube-controller-manager v1.37's feature gates (HPAScaleToZero and
// PodLevelResources on). Values pass through unchanged, zero included, as in
// kube-controller-manager.
func (o *HPAControllerOptions) decisionConfig() decision.Config {
	cfg := decision.DefaultConfig()
	cfg.Tolerance = o.Tolerance
	cfg.DownscaleStabilizationWindow = o.DownscaleStabilizationWindow
	cfg.Calculator = replicas.Config{
		CPUInitializationPeriod: o.CPUInitializationPeriod,
		InitialReadinessDelay:   o.InitialReadinessDelay,
		PodLevelResources:       true,
	}
	return cfg
}

// requestTimeout returns a transport wrapper that ends every request but
// watches after timeout (0: none), reading of the response included. A
// watch is a long-running request, by design longer than any bound here;
// the informers' reflectors end and restart theirs.
func requestTimeout(timeout time.Duration) transport.WrapperFunc {
	return func(rt http.RoundTripper) http.RoundTripper {
		if timeout <= 0 {
			return rt
		}
		return &timeoutRoundTripper{rt: rt, timeout: timeout}
	}
}

type timeoutRoundTripper struct {
	rt      http.RoundTripper
	timeout time.Duration
}

func (t *timeoutRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if isWatch(req) {
		return t.rt.RoundTrip(req)
	}
	ctx, cancel := context.WithTimeout(req.Context(), t.timeout)
	resp, err := t.rt.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// WrappedRoundTripper lets client-go's debugging wrappers see through.
func (t *timeoutRoundTripper) WrappedRoundTripper() http.RoundTripper { return t.rt }

// isWatch reports whether req is a watch: ?watch=true, or the legacy
// /watch/ path.
func isWatch(req *http.Request) bool {
	switch queryValue(req.URL.RawQuery, "watch") {
	case "true", "1":
		return true
	}
	return strings.Contains(req.URL.Path, "/watch/")
}

// queryValue is url.ParseQuery(query).Get(key) without building the map
// for every request the controller makes (1% of its allocated bytes): a
// query with nothing to unescape and no semicolon (all of client-go's
// queries) is scanned in place; any other is parsed.
func queryValue(query, key string) string {
	if strings.ContainsAny(query, "%+;") {
		v, _ := url.ParseQuery(query)
		return v.Get(key)
	}
	for query != "" {
		var pair string
		pair, query, _ = strings.Cut(query, "&")
		if k, v, _ := strings.Cut(pair, "="); k == key {
			return v
		}
	}
	return ""
}

// cancelOnClose ends a request's context when its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
