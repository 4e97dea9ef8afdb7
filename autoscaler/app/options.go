package app

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	cliflag "k8s.io/component-base/cli/flag"
	componentbaseconfig "k8s.io/component-base/config"
	"k8s.io/component-base/config/options"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // makes --logging-format=json available
	netutils "k8s.io/utils/net"

	"github.com/tidal-autoscaler/tidal/autoscaler/source"
)

// Options are everything `tidal autoscaler` is configured with on its
// command line. Build them with NewOptions, then Validate, then Config.
type Options struct {
	// Kubeconfig is empty for the in-cluster configuration.
	Kubeconfig   string
	KubeAPIQPS   float32
	KubeAPIBurst int32
	// KubeAPITimeout bounds each request to the API server but watches;
	// 0: no bound (see DefaultKubeAPITimeout).
	KubeAPITimeout time.Duration
	Mode           string
	// Namespace restricts the autoscaler to one namespace's autoscalers,
	// pods and workloads; empty: the whole cluster.
	Namespace string
	// StatusMetricsMinInterval bounds status writes whose only change is
	// currentMetrics values to one per interval; 0: every change written.
	StatusMetricsMinInterval time.Duration
	// GuardOtherWriters stops acting on an autoscaler that another writer
	// also acts on (controller/guard.go).
	GuardOtherWriters bool

	HPA            HPAControllerOptions
	LeaderElection componentbaseconfig.LeaderElectionConfiguration
	// Sharding splits the autoscalers between every replica (see
	// autoscaler/shard) instead of electing one leader.
	Sharding bool

	// HealthProbeBindAddress is host:port for /healthz and /readyz over
	// plain HTTP; port 0 picks a free port.
	HealthProbeBindAddress string
	// SecureServing is --bind-address and --secure-port: /metrics and the
	// probes over HTTPS, as kube-controller-manager's secure port.
	SecureServing *genericoptions.SecureServingOptions
	// Authentication and Authorization of the secure port's requests are
	// delegated to the cluster (TokenReviews, SubjectAccessReviews).
	Authentication *genericoptions.DelegatingAuthenticationOptions
	Authorization  *genericoptions.DelegatingAuthorizationOptions
	// Profiling serves Go's pprof handlers on the secure port.
	Profiling bool

	Logs *logsapi.LoggingConfiguration
}

// HPAControllerOptions mirror kube-controller-manager's HPA controller
// flags, with its defaults, so moving a cluster over keeps its tuning.
type HPAControllerOptions struct {
	SyncPeriod                   time.Duration
	Tolerance                    float64
	DownscaleStabilizationWindow time.Duration
	InitialReadinessDelay        time.Duration
	CPUInitializationPeriod      time.Duration
	ConcurrentSyncs              int32
}

// DefaultKubeAPITimeout is --kube-api-timeout's default. kube-controller-
// manager bounds only its leader election client's requests; a request of
// its HPA controller on a connection that hangs (an API server gone
// behind a load balancer, a peer lost without a reset) holds a worker
// until TCP gives up, many minutes later. The API server itself ends a
// request that is not a watch after its --request-timeout, 60 s by
// default, so the client waits as long and no longer.
const DefaultKubeAPITimeout = 60 * time.Second

// NewOptions returns the options with tidal's defaults.
func NewOptions() *Options {
	serving, authn, authz := newServingOptions()
	return &Options{
		// Above kube-controller-manager's 20/30, which its HPA controller
		// shares with every other controller and which lets it visit only
		// about 300 autoscalers per 15 s period: this client serves one
		// controller, whose steady cost is one status write per autoscaler
		// per period when metrics move (1,000 autoscalers: about 70/s).
		KubeAPIQPS:        100,
		KubeAPIBurst:      200,
		KubeAPITimeout:    DefaultKubeAPITimeout,
		Mode:              string(source.ModeCRD),
		GuardOtherWriters: true,
		HPA: HPAControllerOptions{
			SyncPeriod:                   15 * time.Second,
			Tolerance:                    0.1,
			DownscaleStabilizationWindow: 5 * time.Minute,
			InitialReadinessDelay:        30 * time.Second,
			CPUInitializationPeriod:      5 * time.Minute,
			ConcurrentSyncs:              5,
		},
		// component-base's recommended timings.
		LeaderElection: componentbaseconfig.LeaderElectionConfiguration{
			LeaderElect:       true,
			LeaseDuration:     metav1.Duration{Duration: 15 * time.Second},
			RenewDeadline:     metav1.Duration{Duration: 10 * time.Second},
			RetryPeriod:       metav1.Duration{Duration: 2 * time.Second},
			ResourceLock:      resourcelock.LeasesResourceLock,
			ResourceName:      source.ComponentName,
			ResourceNamespace: "tidal-system",
		},
		HealthProbeBindAddress: "0.0.0.0:8081",
		SecureServing:          serving,
		Authentication:         authn,
		Authorization:          authz,
		Logs:                   logsapi.NewLoggingConfiguration(),
	}
}

// Flags returns the flags, grouped in the sections --help prints.
func (o *Options) Flags() cliflag.NamedFlagSets {
	var nfs cliflag.NamedFlagSets

	fs := nfs.FlagSet("generic")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig,
		"Path to a kubeconfig. Empty means the in-cluster configuration.")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS,
		"QPS to use while talking with the Kubernetes API server.")
	fs.Int32Var(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst,
		"Burst to use while talking with the Kubernetes API server.")
	fs.DurationVar(&o.KubeAPITimeout, "kube-api-timeout", o.KubeAPITimeout,
		"How long a request to the Kubernetes API server may take before it fails (watches excepted). 0 means no limit.")
	fs.StringVar(&o.Mode, "mode", o.Mode,
		"What to reconcile: 'crd' for tidal's own autoscaler resources, 'native' for autoscaling/v2 HorizontalPodAutoscalers "+
			"(disable kube-controller-manager's HPA controller first).")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace,
		"Reconcile the autoscalers of this namespace only, and list and watch pods and workloads there only, so that a Role "+
			"in that namespace is all the autoscaler needs (the chart's autoscaler.watchNamespace). Empty means every namespace.")

	o.HPA.AddFlags(nfs.FlagSet("horizontal pod autoscaler"))
	nfs.FlagSet("horizontal pod autoscaler").DurationVar(&o.StatusMetricsMinInterval, "status-metrics-min-interval", o.StatusMetricsMinInterval,
		"Write a status whose only change is the values of status.currentMetrics at most once per this interval (tidal's; not a "+
			"kube-controller-manager flag). Replicas, desired count and conditions are written at once. 0 writes every change, as "+
			"kube-controller-manager does.")
	nfs.FlagSet("horizontal pod autoscaler").BoolVar(&o.GuardOtherWriters, "guard-other-writers", o.GuardOtherWriters,
		"Stop acting on an autoscaler that another writer acts on, with condition Conflict and a Warning event: in crd mode a "+
			"HorizontalAutoscaler whose workload an autoscaling/v2 HPA also scales does not write /scale (in dry run it compares "+
			"its decisions with the HPA's instead; needs list and watch of horizontalpodautoscalers); in native mode an HPA whose "+
			"status another controller writes (kube-controller-manager's HPA controller left on) is not reconciled. false turns both off.")

	fs = nfs.FlagSet("leader election")
	options.BindLeaderElectionFlags(&o.LeaderElection, fs)
	fs.StringVar(&o.LeaderElection.ResourceNamespace, "leader-election-namespace", o.LeaderElection.ResourceNamespace,
		"Namespace of the Lease used for leader election. Same setting as --leader-elect-resource-namespace.")
	fs.BoolVar(&o.Sharding, "sharding", o.Sharding,
		"Instead of electing one leader, split the autoscalers between every replica: each keeps a Lease of its own, "+
			"<--leader-elect-resource-name>-shard-<hash> in --leader-election-namespace, and reconciles the autoscalers that rendezvous hashing of "+
			"their namespace/name gives it among the replicas whose Leases are live. A replica that joins waits two retry periods before it "+
			"reconciles its share; a replica that stops deletes its Lease, and one that dies loses its share when its Lease expires. "+
			"Uses the --leader-elect-lease-duration, -renew-deadline and -retry-period durations; --leader-elect is ignored.")

	nfs.FlagSet("health").StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress,
		"host:port to serve /healthz and /readyz on, over plain HTTP without authentication. Port 0 picks a free port. "+
			"/metrics is served on --secure-port only.")

	serving := nfs.FlagSet("secure serving")
	o.SecureServing.AddFlags(serving)
	serving.BoolVar(&o.Profiling, "profiling", o.Profiling,
		"Serve /debug/pprof/ on the secure port, to whom the cluster authorizes for it. Off by default.")
	o.Authentication.AddFlags(nfs.FlagSet("authentication"))
	o.Authorization.AddFlags(nfs.FlagSet("authorization"))

	logsapi.AddFlags(o.Logs, nfs.FlagSet("logs"))
	return nfs
}

// AddFlags adds the HPA flags, named as kube-controller-manager names them.
func (o *HPAControllerOptions) AddFlags(fs *pflag.FlagSet) {
	fs.Int32Var(&o.ConcurrentSyncs, "concurrent-horizontal-pod-autoscaler-syncs", o.ConcurrentSyncs,
		"The number of horizontal pod autoscaler objects that are allowed to sync concurrently. Larger number = more responsive horizontal pod autoscaler objects processing, but more CPU (and network) load.")
	fs.DurationVar(&o.SyncPeriod, "horizontal-pod-autoscaler-sync-period", o.SyncPeriod,
		"The period for syncing the number of pods in horizontal pod autoscaler.")
	fs.DurationVar(&o.DownscaleStabilizationWindow, "horizontal-pod-autoscaler-downscale-stabilization", o.DownscaleStabilizationWindow,
		"The period for which autoscaler will look backwards and not scale down below any recommendation it made during that period.")
	fs.Float64Var(&o.Tolerance, "horizontal-pod-autoscaler-tolerance", o.Tolerance,
		"The minimum change (from 1.0) in the desired-to-actual metrics ratio for the horizontal pod autoscaler to consider scaling.")
	fs.DurationVar(&o.CPUInitializationPeriod, "horizontal-pod-autoscaler-cpu-initialization-period", o.CPUInitializationPeriod,
		"The period after pod start when CPU samples might be skipped.")
	fs.DurationVar(&o.InitialReadinessDelay, "horizontal-pod-autoscaler-initial-readiness-delay", o.InitialReadinessDelay,
		"The period after pod start during which readiness changes will be treated as initial readiness.")
}

// Validate reports every problem with the options at once.
func (o *Options) Validate() []error {
	var errs []error
	if o.Kubeconfig != "" {
		if _, err := os.Stat(o.Kubeconfig); err != nil {
			errs = append(errs, fmt.Errorf("--kubeconfig: %w", err))
		}
	}
	if o.KubeAPIQPS <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps must be positive, got %v", o.KubeAPIQPS))
	}
	if o.KubeAPIBurst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-burst must be at least 1, got %d", o.KubeAPIBurst))
	}
	if o.KubeAPITimeout < 0 {
		errs = append(errs, fmt.Errorf("--kube-api-timeout must be 0 (no limit) or positive, got %s", o.KubeAPITimeout))
	}
	if !slices.Contains(source.Modes, source.Mode(o.Mode)) {
		errs = append(errs, fmt.Errorf("--mode must be %q or %q, got %q", source.ModeCRD, source.ModeNative, o.Mode))
	}
	if o.Namespace != "" {
		for _, msg := range validation.IsDNS1123Label(o.Namespace) {
			errs = append(errs, fmt.Errorf("--namespace %q: %s", o.Namespace, msg))
		}
	}
	errs = append(errs, o.HPA.Validate()...)
	if o.StatusMetricsMinInterval < 0 {
		errs = append(errs, fmt.Errorf("--status-metrics-min-interval must be 0 (every change written) or positive, got %s", o.StatusMetricsMinInterval))
	}
	le := o.LeaderElection
	le.LeaderElect = le.LeaderElect || o.Sharding // sharding uses the same durations and namespace
	errs = append(errs, validateLeaderElection(&le)...)
	if _, err := parseBindAddress(o.HealthProbeBindAddress); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, o.SecureServing.Validate()...)
	errs = append(errs, o.Authentication.Validate()...)
	errs = append(errs, o.Authorization.Validate()...)
	for _, e := range logsapi.Validate(o.Logs, nil, nil) {
		errs = append(errs, e)
	}
	return errs
}

// Validate checks the HPA options. Zero means zero, as in
// kube-controller-manager (its defaults are applied before its flags are
// parsed). Where kube-controller-manager rejects a value, the message is
// its own; where it accepts one that can only be a mistake, tidal refuses
// it and says why:
//   - a sync period of zero or less, which kube-controller-manager's queue
//     takes as "re-queue at once", reconciling every autoscaler in a busy loop;
//   - a negative tolerance or duration, which it uses as given (a negative
//     tolerance disables the band; spec.behavior's tolerance is refused
//     below zero by the API).
func (o *HPAControllerOptions) Validate() []error {
	var errs []error
	if o.SyncPeriod <= 0 {
		errs = append(errs, fmt.Errorf("--horizontal-pod-autoscaler-sync-period must be positive, got %s: kube-controller-manager would reconcile every autoscaler in a busy loop", o.SyncPeriod))
	}
	if o.Tolerance < 0 {
		errs = append(errs, fmt.Errorf("--horizontal-pod-autoscaler-tolerance must not be negative, got %v", o.Tolerance))
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{
		{"--horizontal-pod-autoscaler-downscale-stabilization", o.DownscaleStabilizationWindow},
		{"--horizontal-pod-autoscaler-initial-readiness-delay", o.InitialReadinessDelay},
		{"--horizontal-pod-autoscaler-cpu-initialization-period", o.CPUInitializationPeriod},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative, got %s", d.flag, d.v))
		}
	}
	if o.ConcurrentSyncs < 1 {
		// kube-controller-manager's own message, word for word.
		errs = append(errs, fmt.Errorf("concurrent-horizontal-pod-autoscaler-syncs must be greater than 0, but got %d", o.ConcurrentSyncs))
	}
	return errs
}

// validateLeaderElection checks what client-go's leader elector would
// otherwise reject at run time, naming the flags.
func validateLeaderElection(le *componentbaseconfig.LeaderElectionConfiguration) []error {
	if !le.LeaderElect {
		return nil
	}
	var errs []error
	lease, renew, retry := le.LeaseDuration.Duration, le.RenewDeadline.Duration, le.RetryPeriod.Duration
	if lease <= 0 || renew <= 0 || retry <= 0 {
		errs = append(errs, fmt.Errorf("--leader-elect-lease-duration (%s), --leader-elect-renew-deadline (%s) and --leader-elect-retry-period (%s) must all be positive", lease, renew, retry))
	} else {
		if lease <= renew {
			errs = append(errs, fmt.Errorf("--leader-elect-lease-duration (%s) must be greater than --leader-elect-renew-deadline (%s)", lease, renew))
		}
		// client-go's leader elector needs room for a jittered retry
		// inside the renew deadline.
		if renew <= time.Duration(leaderelection.JitterFactor*float64(retry)) {
			errs = append(errs, fmt.Errorf("--leader-elect-renew-deadline (%s) must be greater than %v x --leader-elect-retry-period (%s)", renew, leaderelection.JitterFactor, retry))
		}
	}
	if le.ResourceLock != resourcelock.LeasesResourceLock {
		errs = append(errs, fmt.Errorf("--leader-elect-resource-lock must be %q, the only lock client-go still supports; got %q", resourcelock.LeasesResourceLock, le.ResourceLock))
	}
	if le.ResourceName == "" {
		errs = append(errs, errors.New("--leader-elect-resource-name must not be empty"))
	}
	if le.ResourceNamespace == "" {
		errs = append(errs, errors.New("--leader-election-namespace must not be empty"))
	}
	return errs
}

// parseBindAddress checks a host:port listen address. The host may be
// empty (all interfaces), an IP or localhost; port 0 picks a free port.
func parseBindAddress(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--health-probe-bind-address %q must be host:port, e.g. 0.0.0.0:8081: %w", addr, err)
	}
	if host != "" && host != "localhost" && netutils.ParseIPSloppy(host) == nil {
		return "", fmt.Errorf("--health-probe-bind-address %q: host must be an IP address, localhost or empty", addr)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return "", fmt.Errorf("--health-probe-bind-address %q: port must be a number from 0 to 65535", addr)
	}
	return addr, nil
}
