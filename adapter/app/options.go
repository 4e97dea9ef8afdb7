package app

import (
	"errors"
	"fmt"
	"k8s.io/apimachinery/pkg/util/validation"
	"time"

	"github.com/spf13/pflag"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/rest"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // makes --logging-format=json available

	"github.com/tidal-autoscaler/tidal/adapter/prom"
	"github.com/tidal-autoscaler/tidal/internal/cmdutil"
)

// Options are everything `tidal adapter` is configured with on its
// command line. Build them with NewOptions, then Validate, then Config.
type Options struct {
	// The generic API server options, as custom-metrics-apiserver's own
	// CustomMetricsAdapterServerOptions has them.
	SecureServing  *genericoptions.SecureServingOptionsWithLoopback
	Authentication *genericoptions.DelegatingAuthenticationOptions
	Authorization  *genericoptions.DelegatingAuthorizationOptions
	Audit          *genericoptions.AuditOptions
	Features       *genericoptions.FeatureOptions
	Logs           *logsapi.LoggingConfiguration

	// Kubeconfig points at the cluster the adapter maps metrics onto; empty
	// means the in-cluster configuration.
	Kubeconfig string
	// ListerKubeconfig is prometheus-adapter's --lister-kubeconfig: the
	// cluster the metrics describe, without becoming the kubeconfig of
	// delegated authentication and authorization as Kubeconfig does.
	ListerKubeconfig string
	// ClientQPS and ClientBurst throttle the client of that cluster; 0
	// keeps client-go's defaults.
	ClientQPS   float32
	ClientBurst int
	// Namespace, when set, restricts the adapter's object reads to one
	// namespace (a Role there is enough RBAC); empty: the whole cluster.
	Namespace string

	Prometheus prom.FlagOptions
	Rules      RulesOptions
	APIs       APIOptions

	// refused are prometheus-adapter flags Tidal has no use for; setting
	// one stops the start with what to do instead.
	refused []*refusedFlag
}

// RulesOptions say where the rules come from and how often the metrics
// they describe are rediscovered.
type RulesOptions struct {
	// File is the rule file. The rule loader that reads it belongs to the
	// rules work; until it lands only its presence is checked.
	File           string
	RelistInterval time.Duration
	// MaxAge is how far back discovery looks for series; 0 means
	// RelistInterval.
	MaxAge time.Duration
	// CheckInterval is how often the rule file is checked for changes; 0
	// disables hot reload.
	CheckInterval time.Duration
}

// APIOptions switch each served API group on or off.
type APIOptions struct {
	CustomMetrics   bool
	ExternalMetrics bool
	ResourceMetrics bool
	// DelegateExternal is the https URL of the server that owned
	// external.metrics.k8s.io before Tidal (KEDA's metrics server, ...):
	// metrics no rule serves are asked there (adapter/delegate).
	// DelegateCAFile verifies it.
	DelegateExternal string
	DelegateCAFile   string
	// DelegateCustom is the same for custom.metrics.k8s.io.
	DelegateCustom string
}

// NewOptions returns the options with tidal's defaults.
func NewOptions() *Options {
	o := &Options{
		SecureServing:  genericoptions.NewSecureServingOptions().WithLoopback(),
		Authentication: genericoptions.NewDelegatingAuthenticationOptions(),
		Authorization:  genericoptions.NewDelegatingAuthorizationOptions(),
		Audit:          genericoptions.NewAuditOptions(),
		Features:       genericoptions.NewFeatureOptions(),
		Logs:           logsapi.NewLoggingConfiguration(),
		Prometheus:     prom.NewFlagOptions(),
		Rules:          RulesOptions{RelistInterval: time.Minute, CheckInterval: 10 * time.Second},
		APIs:           APIOptions{CustomMetrics: true, ExternalMetrics: true, ResourceMetrics: true},
	}
	o.SecureServing.BindPort = 6443
	o.SecureServing.ServerCert.PairName = "tidal-adapter"
	// An empty --cert-dir keeps the generated self-signed certificate in
	// memory, which works on a read-only root filesystem; set --cert-dir to
	// keep it across restarts.
	o.SecureServing.ServerCert.CertDirectory = ""
	// Probes must work without credentials; everything else is authorized
	// by the cluster through SubjectAccessReviews.
	o.Authorization.AlwaysAllowPaths = []string{"/healthz", "/livez", "/readyz"}
	// The metrics APIs are called by the aggregator and the HPA, not by a
	// crowd of clients, so they do not need priority and fairness (which
	// also needs a watch on the cluster's flow schemas). Same default as
	// custom-metrics-apiserver.
	o.Features.EnablePriorityAndFairness = false
	// k8s.io/apiserver serves /debug/pprof/ by default, to anyone the
	// cluster authorizes for that path; profiles show the queries and the
	// rule file's contents in memory and cost CPU, so it is off unless
	// --profiling asks for it (prometheus-adapter leaves it on).
	o.Features.EnableProfiling = false
	return o
}

// Flags returns the flags, grouped in the sections --help prints.
func (o *Options) Flags() cliflag.NamedFlagSets {
	var nfs cliflag.NamedFlagSets

	fs := nfs.FlagSet("generic")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig,
		"Path to a kubeconfig for the cluster the metrics describe. Empty means the in-cluster configuration. "+
			"Also used for delegated authentication and authorization unless --authentication-kubeconfig or --authorization-kubeconfig are set.")
	fs.StringVar(&o.ListerKubeconfig, "lister-kubeconfig", o.ListerKubeconfig,
		"prometheus-adapter's name for a kubeconfig of the cluster the metrics describe: like --kubeconfig, but delegated authentication and authorization keep the in-cluster configuration unless --authentication-kubeconfig or --authorization-kubeconfig are set.")
	fs.Float32Var(&o.ClientQPS, "client-qps", rest.DefaultQPS, "Maximum QPS of the client of the cluster the metrics describe.")
	fs.IntVar(&o.ClientBurst, "client-burst", rest.DefaultBurst, "Maximum burst of the client of the cluster the metrics describe.")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace,
		"Read objects (pods and the objects rules map series onto) in this namespace only, so that a Role there is all the RBAC object reads need. "+
			"Requests for other namespaces, for cluster-scoped objects and for lists across namespaces are refused with 403, and metrics.k8s.io serves PodMetrics only (no NodeMetrics). "+
			"Empty (the default): the whole cluster.")
	o.Features.AddFlags(fs)

	serving := nfs.FlagSet("secure serving")
	o.SecureServing.AddFlags(serving)
	serving.BoolVar(&o.SecureServing.DisableHTTP2Serving, "disable-http2", o.SecureServing.DisableHTTP2Serving,
		"prometheus-adapter's name for --disable-http2-serving.")
	o.refused = addRefusedFlags(nfs.FlagSet("generic"))

	o.Authentication.AddFlags(nfs.FlagSet("authentication"))
	o.Authorization.AddFlags(nfs.FlagSet("authorization"))
	o.Audit.AddFlags(nfs.FlagSet("audit"))
	o.Prometheus.AddFlags(nfs.FlagSet("prometheus"))
	o.Rules.AddFlags(nfs.FlagSet("rules"))
	o.APIs.AddFlags(nfs.FlagSet("apis"))
	logsapi.AddFlags(o.Logs, nfs.FlagSet("logs"))
	return nfs
}

// AddFlags adds the rule flags to fs.
func (o *RulesOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.File, "config", o.File,
		"Path to the rule file that says which Prometheus series become which metrics.")
	fs.DurationVar(&o.RelistInterval, "metrics-relist-interval", o.RelistInterval,
		"How often to rediscover the available metrics from Prometheus.")
	fs.DurationVar(&o.MaxAge, "metrics-max-age", o.MaxAge,
		"How far back to look for series when rediscovering metrics. 0 means the value of --metrics-relist-interval.")
	fs.DurationVar(&o.CheckInterval, "config-check-interval", o.CheckInterval,
		"How often to check --config for changes and reload it. A file that does not load is rejected (logged, counted in tidal_adapter_config_reloads_total, and recorded as an Event on the adapter's pod when POD_NAME and POD_NAMESPACE are set) and the last good rules keep serving. 0 disables reloading.")
}

// AddFlags adds the API switches to fs.
func (o *APIOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.CustomMetrics, "enable-custom-metrics", o.CustomMetrics,
		"Serve custom.metrics.k8s.io (v1beta1 and v1beta2).")
	fs.BoolVar(&o.ExternalMetrics, "enable-external-metrics", o.ExternalMetrics,
		"Serve external.metrics.k8s.io (v1beta1).")
	fs.StringVar(&o.DelegateExternal, "delegate-external-metrics", o.DelegateExternal,
		"https URL of the server that owned external.metrics.k8s.io before Tidal (e.g. https://keda-operator-metrics-apiserver.keda.svc:443). "+
			"External metrics no rule serves are forwarded there unchanged (namespace, name, selector), with the adapter's own credentials, and API discovery lists both sides' metrics; "+
			"a metric both serve is answered by Tidal's rule. The delegate not answering is a 503 for its metrics only.")
	fs.StringVar(&o.DelegateCustom, "delegate-custom-metrics", o.DelegateCustom,
		"https URL of the server that owned custom.metrics.k8s.io before Tidal (another adapter): as --delegate-external-metrics, for custom metrics (asked as v1beta2); a metric of a resource both serve is answered by Tidal's rule.")
	fs.StringVar(&o.DelegateCAFile, "delegate-ca-file", o.DelegateCAFile,
		"CA bundle that verifies the delegates' serving certificates (the caBundle of the APIServices they owned). Empty: the system's roots.")
	fs.BoolVar(&o.ResourceMetrics, "enable-resource-metrics", o.ResourceMetrics,
		"Serve metrics.k8s.io (v1 and v1beta1: PodMetrics, NodeMetrics, for kubectl top and CPU/memory HPAs) from the rule file's resourceRules. Only when the rule file has resourceRules at start: without them the group is not installed, so a metrics-server can own it. Set false to leave metrics.k8s.io to metrics-server even when the rule file has resourceRules.")
}

// Validate reports every problem with the options at once.
func (o *Options) Validate() []error {
	var errs []error
	errs = append(errs, o.SecureServing.Validate()...)
	errs = append(errs, o.Authentication.Validate()...)
	errs = append(errs, o.Authorization.Validate()...)
	errs = append(errs, o.Audit.Validate()...)
	errs = append(errs, o.Features.Validate()...)
	for _, e := range logsapi.Validate(o.Logs, nil, nil) {
		errs = append(errs, e)
	}
	errs = append(errs, cmdutil.CheckFile("--kubeconfig", o.Kubeconfig)...)
	errs = append(errs, cmdutil.CheckFile("--lister-kubeconfig", o.ListerKubeconfig)...)
	if o.Kubeconfig != "" && o.ListerKubeconfig != "" {
		errs = append(errs, errors.New("--kubeconfig and --lister-kubeconfig both name the cluster the metrics describe: set one (--kubeconfig also serves delegated authentication and authorization)"))
	}
	if o.Namespace != "" {
		for _, msg := range validation.IsDNS1123Label(o.Namespace) {
			errs = append(errs, fmt.Errorf("--namespace %q is not a namespace name: %s", o.Namespace, msg))
		}
	}
	if o.ClientQPS < 0 || o.ClientBurst < 0 {
		errs = append(errs, fmt.Errorf("--client-qps (%v) and --client-burst (%d) must not be negative", o.ClientQPS, o.ClientBurst))
	}
	for _, f := range o.refused {
		if f.set {
			errs = append(errs, f.err())
		}
	}
	errs = append(errs, o.Prometheus.Validate()...)
	errs = append(errs, o.Rules.Validate()...)
	errs = append(errs, o.APIs.Validate()...)
	return errs
}

// Validate checks the rule options and reports every problem, not only
// the first.
func (o *RulesOptions) Validate() []error {
	errs := cmdutil.CheckFile("--config", o.File)
	if o.RelistInterval <= 0 {
		errs = append(errs, fmt.Errorf("--metrics-relist-interval must be positive, got %s", o.RelistInterval))
	}
	if o.MaxAge < 0 {
		errs = append(errs, fmt.Errorf("--metrics-max-age must not be negative, got %s", o.MaxAge))
	}
	if o.CheckInterval < 0 {
		errs = append(errs, fmt.Errorf("--config-check-interval must not be negative, got %s", o.CheckInterval))
	}
	if o.MaxAge > 0 && o.MaxAge < o.RelistInterval {
		errs = append(errs, fmt.Errorf("--metrics-max-age (%s) must not be less than --metrics-relist-interval (%s), or series would drop out between relists; raise it or leave it unset", o.MaxAge, o.RelistInterval))
	}
	return errs
}

// Validate checks the API switches.
func (o *APIOptions) Validate() []error {
	var errs []error
	if !o.CustomMetrics && !o.ExternalMetrics && !o.ResourceMetrics {
		errs = append(errs, errors.New("--enable-custom-metrics, --enable-external-metrics and --enable-resource-metrics are all false: enable at least one API"))
	}
	if o.DelegateExternal != "" && !o.ExternalMetrics {
		errs = append(errs, errors.New("--delegate-external-metrics is set but --enable-external-metrics is false: the delegate's metrics are served through Tidal's external.metrics.k8s.io; enable it or drop the delegate"))
	}
	if o.DelegateCustom != "" && !o.CustomMetrics {
		errs = append(errs, errors.New("--delegate-custom-metrics is set but --enable-custom-metrics is false: the delegate's metrics are served through Tidal's custom.metrics.k8s.io; enable it or drop the delegate"))
	}
	if o.DelegateExternal == "" && o.DelegateCustom == "" && o.DelegateCAFile != "" {
		errs = append(errs, errors.New("--delegate-ca-file is set without --delegate-external-metrics or --delegate-custom-metrics: name the delegate or drop the CA file"))
	}
	return append(errs, cmdutil.CheckFile("--delegate-ca-file", o.DelegateCAFile)...)
}

// effectiveMaxAge applies the --metrics-max-age default.
func (o *RulesOptions) effectiveMaxAge() time.Duration {
	if o.MaxAge == 0 {
		return o.RelistInterval
	}
	return o.MaxAge
}
