package app

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"

	"k8s.io/apimachinery/pkg/util/sets"
	genericapifilters "k8s.io/apiserver/pkg/endpoints/filters"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/server"
	genericfilters "k8s.io/apiserver/pkg/server/filters"
	"k8s.io/apiserver/pkg/server/healthz"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/kubernetes/scheme"
	netutils "k8s.io/utils/net"

	"github.com/tidal-autoscaler/tidal/autoscaler/monitor"
)

// DefaultSecurePort is --secure-port's default: /metrics (and, with
// --profiling, /debug/pprof/) over HTTPS with delegated authentication and
// authorization, as kube-controller-manager serves them on its 10257.
const DefaultSecurePort = 8443

// probePaths are answered without credentials on the secure port, as on
// kube-controller-manager's: the kubelet probes without any.
var probePaths = []string{"/healthz", "/livez", "/readyz"}

// newServingOptions returns the secure serving, authentication and
// authorization options with the autoscaler's defaults.
func newServingOptions() (*genericoptions.SecureServingOptions, *genericoptions.DelegatingAuthenticationOptions, *genericoptions.DelegatingAuthorizationOptions) {
	serving := genericoptions.NewSecureServingOptions()
	serving.BindPort = DefaultSecurePort
	serving.ServerCert.PairName = "tidal-autoscaler"
	// An empty --cert-dir keeps the generated self-signed certificate in
	// memory, which works on a read-only root filesystem.
	serving.ServerCert.CertDirectory = ""

	authn := genericoptions.NewDelegatingAuthenticationOptions()
	// Scrapers present a bearer token (a TokenReview) or, with
	// --client-ca-file, a client certificate. Looking the client CA up in
	// kube-system's extension-apiserver-authentication ConfigMap would
	// make Config contact the cluster and need another Role; turn it on
	// with --authentication-skip-lookup=false.
	authn.SkipInClusterLookup = true

	authz := genericoptions.NewDelegatingAuthorizationOptions()
	authz.AlwaysAllowPaths = probePaths
	return serving, authn, authz
}

// applyServing fills the secure serving, authentication and authorization
// of cfg from o, binding the secure port. With --secure-port=0 nothing is
// served over HTTPS and cfg.SecureServing stays nil.
func (o *Options) applyServing(cfg *Config) error {
	// One kubeconfig for everything when run outside the cluster, as the
	// adapter does.
	if o.Authentication.RemoteKubeConfigFile == "" {
		o.Authentication.RemoteKubeConfigFile = o.Kubeconfig
	}
	if o.Authorization.RemoteKubeConfigFile == "" {
		o.Authorization.RemoteKubeConfigFile = o.Kubeconfig
	}
	if err := o.SecureServing.MaybeDefaultWithSelfSignedCerts("localhost", nil, []net.IP{netutils.ParseIPSloppy("127.0.0.1")}); err != nil {
		return fmt.Errorf("creating the self-signed serving certificate (see --cert-dir, --tls-cert-file): %w", err)
	}
	if err := o.SecureServing.ApplyTo(&cfg.SecureServing); err != nil {
		return fmt.Errorf("secure serving (--bind-address, --secure-port): %w", err)
	}
	if cfg.SecureServing == nil {
		return nil
	}
	if err := o.Authentication.ApplyTo(&cfg.Authentication, cfg.SecureServing, nil); err != nil {
		cfg.SecureServing.Listener.Close()
		return fmt.Errorf("delegated authentication (see --authentication-kubeconfig): %w", err)
	}
	if err := o.Authorization.ApplyTo(&cfg.Authorization); err != nil {
		cfg.SecureServing.Listener.Close()
		return fmt.Errorf("delegated authorization (see --authorization-kubeconfig): %w", err)
	}
	return nil
}

// secureHandler is kube-controller-manager's handler chain (its
// BuildHandlerChain) around mux: every request is authenticated (a client
// certificate, a bearer token through a TokenReview, or anonymous) and
// authorized (the probe paths always; anything else by a
// SubjectAccessReview, e.g. get on the non-resource URL /metrics).
func secureHandler(mux http.Handler, authn server.AuthenticationInfo, authz server.AuthorizationInfo) http.Handler {
	resolver := &apirequest.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")}
	h := genericapifilters.WithAuthorization(mux, authz.Authorizer, scheme.Codecs)
	h = genericapifilters.WithAuthentication(h, authn.Authenticator, genericapifilters.Unauthorized(scheme.Codecs), nil, nil)
	h = genericapifilters.WithRequestInfo(h, resolver)
	h = genericapifilters.WithCacheControl(h)
	return genericfilters.WithPanicRecovery(h, resolver)
}

// installProbes installs /healthz and /readyz.
func installProbes(mux *http.ServeMux, health []healthz.HealthChecker, ready []healthz.HealthChecker) {
	healthz.InstallHandler(mux, health...)
	healthz.InstallReadyzHandler(mux, ready...)
}

// installPprof installs Go's profiling handlers.
func installPprof(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}

// secureMux is what the secure port serves behind secureHandler: the
// probes, /metrics and, with --profiling, /debug/pprof/.
func (c *Config) secureMux(health, ready []healthz.HealthChecker) *http.ServeMux {
	mux := http.NewServeMux()
	installProbes(mux, health, ready)
	healthz.InstallLivezHandler(mux, health...)
	if c.Registry != nil {
		mux.Handle("/metrics", monitor.Handler(c.Registry, c.ObjectSeries))
	}
	if c.Profiling {
		installPprof(mux)
	}
	return mux
}
