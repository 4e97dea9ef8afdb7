package app

import (
	"fmt"
	"net"
	"time"

	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	openapicommon "k8s.io/kube-openapi/pkg/common"
	netutils "k8s.io/utils/net"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/apiserver"
	generatedcore "sigs.k8s.io/custom-metrics-apiserver/pkg/generated/openapi/core"
	generatedcustommetrics "sigs.k8s.io/custom-metrics-apiserver/pkg/generated/openapi/custommetrics"
	generatedexternalmetrics "sigs.k8s.io/custom-metrics-apiserver/pkg/generated/openapi/externalmetrics"

	"github.com/tidal-autoscaler/tidal/adapter/prom"
	"github.com/tidal-autoscaler/tidal/adapter/resourcemetrics"
	"github.com/tidal-autoscaler/tidal/internal/authzcache"
	"github.com/tidal-autoscaler/tidal/internal/frontproxy"
	"github.com/tidal-autoscaler/tidal/internal/kubeconfig"
	"github.com/tidal-autoscaler/tidal/internal/version"
)

// serverName names the API server in logs, the OpenAPI document and the
// kubeconfig user agent.
const serverName = "tidal-adapter"

// Config is everything the adapter needs to run, built from validated
// Options.
type Config struct {
	// Apiserver is the generic API server configuration, in the shape
	// custom-metrics-apiserver builds its server from.
	Apiserver *apiserver.Config
	// Informers feed the generic server (priority and fairness, when
	// enabled); the server starts them.
	Informers informers.SharedInformerFactory
	// Kube reaches the cluster the metrics describe.
	Kube *rest.Config
	// Namespace is --namespace: the only namespace objects are read in;
	// empty: every namespace.
	Namespace string

	// Prometheus and Rules drive the Prometheus-backed provider.
	Prometheus prom.FlagConfig
	Rules      RulesConfig

	APIs APIOptions
}

// RulesConfig is where the rules come from and how often to rediscover.
type RulesConfig struct {
	File           string
	RelistInterval time.Duration
	MaxAge         time.Duration
	CheckInterval  time.Duration
}

// Config builds the adapter's configuration. Call Validate first: Config
// reports the first problem it meets, Validate all of them.
//
// It writes the self-signed serving certificate when none is given, and
// reads the Prometheus TLS and auth files; it contacts neither the cluster
// nor Prometheus, except for the delegated authentication lookup of the
// cluster's client CAs (skip it with --authentication-skip-lookup).
func (o *Options) Config() (*Config, error) {
	clusterKubeconfig := o.Kubeconfig
	if o.ListerKubeconfig != "" {
		clusterKubeconfig = o.ListerKubeconfig
	}
	kube, err := kubeconfig.Load(clusterKubeconfig, serverName)
	if err != nil {
		return nil, err
	}
	// As custom-metrics-apiserver's AdapterBase: only positive values
	// change client-go's defaults.
	if o.ClientQPS > 0 {
		kube.QPS = o.ClientQPS
	}
	if o.ClientBurst > 0 {
		kube.Burst = o.ClientBurst
	}
	// No gzip, as kube-controller-manager's clients: next to the API server
	// compressing lists and watch streams costs both sides more CPU than
	// the bytes it saves.
	kube.DisableCompression = true
	// One kubeconfig for everything when run outside the cluster.
	if o.Authentication.RemoteKubeConfigFile == "" {
		o.Authentication.RemoteKubeConfigFile = o.Kubeconfig
	}
	if o.Authorization.RemoteKubeConfigFile == "" {
		o.Authorization.RemoteKubeConfigFile = o.Kubeconfig
	}

	pc, err := o.Prometheus.Config()
	if err != nil {
		return nil, err
	}

	// TODO: the aggregator reaches the adapter through its Service, so the
	// generated certificate could also name the Service's DNS names.
	if err := o.SecureServing.MaybeDefaultWithSelfSignedCerts("localhost", nil, []net.IP{netutils.ParseIPSloppy("127.0.0.1")}); err != nil {
		return nil, fmt.Errorf("creating the self-signed serving certificate (see --cert-dir, --tls-cert-file): %w", err)
	}

	client, err := kubernetes.NewForConfig(kube)
	if err != nil {
		return nil, fmt.Errorf("building the Kubernetes client: %w", err)
	}
	informerFactory := informers.NewSharedInformerFactory(client, 0)

	serverConfig := genericapiserver.NewRecommendedConfig(apiserver.Codecs)
	serverConfig.ClientConfig = kube
	serverConfig.SharedInformerFactory = informerFactory
	if err := o.SecureServing.ApplyTo(&serverConfig.SecureServing, &serverConfig.LoopbackClientConfig); err != nil {
		return nil, fmt.Errorf("secure serving: %w", err)
	}
	if err := o.Authentication.ApplyTo(&serverConfig.Authentication, serverConfig.SecureServing, nil); err != nil {
		return nil, fmt.Errorf("delegated authentication (see --authentication-kubeconfig): %w", err)
	}
	// The aggregator's certificate is verified once, not on every request.
	serverConfig.Authentication.Authenticator = frontproxy.New(serverConfig.Authentication.RequestHeaderConfig, serverConfig.Authentication.Authenticator)
	if err := o.Authorization.ApplyTo(&serverConfig.Authorization); err != nil {
		return nil, fmt.Errorf("delegated authorization (see --authorization-kubeconfig): %w", err)
	}
	// Allow decisions are reused for a second without re-encoding the
	// request's attributes as a SubjectAccessReview.
	if serverConfig.Authorization.Authorizer != nil {
		serverConfig.Authorization.Authorizer = authzcache.New(serverConfig.Authorization.Authorizer)
	}
	if err := o.Audit.ApplyTo(&serverConfig.Config); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	if err := o.Features.ApplyTo(&serverConfig.Config, client, informerFactory); err != nil {
		return nil, fmt.Errorf("features: %w", err)
	}
	serverConfig.EnableMetrics = true
	serverConfig.OpenAPIConfig, serverConfig.OpenAPIV3Config = openAPIConfigs(o.APIs)

	return &Config{
		Apiserver:  &apiserver.Config{GenericConfig: &serverConfig.Config},
		Informers:  informerFactory,
		Kube:       kube,
		Namespace:  o.Namespace,
		Prometheus: pc,
		Rules: RulesConfig{
			File:           o.Rules.File,
			RelistInterval: o.Rules.RelistInterval,
			MaxAge:         o.Rules.effectiveMaxAge(),
			CheckInterval:  o.Rules.CheckInterval,
		},
		APIs: o.APIs,
	}, nil
}

// openAPIConfigs describes the served API groups, with the definitions
// custom-metrics-apiserver generates, as its own builder does.
func openAPIConfigs(apis APIOptions) (*openapicommon.Config, *openapicommon.OpenAPIV3Config) {
	getters := []openapicommon.GetOpenAPIDefinitions{generatedcore.GetOpenAPIDefinitions}
	if apis.CustomMetrics {
		getters = append(getters, generatedcustommetrics.GetOpenAPIDefinitions)
	}
	if apis.ExternalMetrics {
		getters = append(getters, generatedexternalmetrics.GetOpenAPIDefinitions)
	}
	if apis.ResourceMetrics {
		getters = append(getters, resourcemetrics.GetOpenAPIDefinitions)
	}
	defs := func(ref openapicommon.ReferenceCallback) map[string]openapicommon.OpenAPIDefinition {
		merged := map[string]openapicommon.OpenAPIDefinition{}
		for _, get := range getters {
			for name, def := range get(ref) {
				merged[name] = def
			}
		}
		return merged
	}
	namer := openapinamer.NewDefinitionNamer(apiserver.Scheme, resourcemetrics.Scheme)

	v2 := genericapiserver.DefaultOpenAPIConfig(defs, namer)
	v2.Info.Title = serverName
	v2.Info.Version = version.Get().Version
	v3 := genericapiserver.DefaultOpenAPIV3Config(defs, namer)
	v3.Info.Title = serverName
	v3.Info.Version = version.Get().Version
	return v2, v3
}
