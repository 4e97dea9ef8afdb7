package metricsserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	openapicommon "k8s.io/kube-openapi/pkg/common"
	cmapiserver "sigs.k8s.io/custom-metrics-apiserver/pkg/apiserver"
	generatedcore "sigs.k8s.io/custom-metrics-apiserver/pkg/generated/openapi/core"
	generatedcustommetrics "sigs.k8s.io/custom-metrics-apiserver/pkg/generated/openapi/custommetrics"
	generatedexternalmetrics "sigs.k8s.io/custom-metrics-apiserver/pkg/generated/openapi/externalmetrics"

	"github.com/tidal-autoscaler/tidal/test/harness"
)

// Options configure the server. The zero value is usable.
type Options struct {
	// Namespace and Service name the ExternalName Service the APIServices
	// point at, and the server's service account (Service is also its name).
	// Defaults: tidal-test-metrics, metrics-server.
	Namespace, Service string
	// ResourceWindow is the window of PodMetrics samples; default 1s. The
	// HPA drops a cpu sample of a pod whose Ready condition changed less
	// than a window before the sample's timestamp (during the cpu
	// initialization period), so a short window lets fresh pods count.
	ResourceWindow time.Duration
}

// APIServices are the GROUP/VERSIONs the server serves and registers.
var APIServices = []schema.GroupVersion{
	{Group: "metrics.k8s.io", Version: "v1beta1"},
	{Group: "custom.metrics.k8s.io", Version: "v1beta1"},
	{Group: "custom.metrics.k8s.io", Version: "v1beta2"},
	{Group: "external.metrics.k8s.io", Version: "v1beta1"},
}

// Server is a running test metrics server. Its Set methods change what it
// serves from the next request on.
type Server struct {
	store *store
	// Port is the server's port on 127.0.0.1.
	Port int
	done chan error
}

// Start runs the server in this process until ctx is cancelled, with its
// own service account identity, delegated authentication and authorization
// against the harness, and registers APIServices with the aggregator,
// returning once all are Available.
func Start(ctx context.Context, h *harness.Harness, opts Options) (*Server, error) {
	if opts.Namespace == "" {
		opts.Namespace = "tidal-test-metrics"
	}
	if opts.Service == "" {
		opts.Service = "metrics-server"
	}
	if opts.ResourceWindow == 0 {
		opts.ResourceWindow = time.Second
	}
	if err := h.EnsureNamespace(ctx, opts.Namespace); err != nil {
		return nil, err
	}
	if err := grantServerRBAC(ctx, h.Client, opts.Namespace, opts.Service); err != nil {
		return nil, err
	}
	kubeconfig, restConfig, err := h.Kubeconfig(harness.ServiceAccountIdentity(opts.Namespace, opts.Service))
	if err != nil {
		return nil, err
	}
	serving, err := h.ServingCertFor(opts.Namespace, opts.Service)
	if err != nil {
		return nil, err
	}
	certFile, keyFile, err := serving.WriteFiles(h.Dir, "test-metrics-server-serving")
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port

	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return nil, err
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	config, err := serverConfig(ln, certFile, keyFile, kubeconfig, restConfig, factory)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}

	s := &Server{store: newStore(), Port: port, done: make(chan error, 1)}
	podInformer := factory.Core().V1().Pods()
	if err := podInformer.Informer().AddIndexers(podIndexers); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("indexing pods by rank group and label: %w", err)
	}
	pods := ranker{pods: podInformer.Lister(), indexer: podInformer.Informer().GetIndexer()}
	provider := &metricsProvider{store: s.store, pods: pods, now: time.Now}
	server, err := config.Complete(factory).New("tidal-test-metrics-server", provider, provider)
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("building the test metrics server: %w", err)
	}
	if err := installResourceMetrics(server.GenericAPIServer, s.store, pods, opts.ResourceWindow, time.Now); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("installing metrics.k8s.io: %w", err)
	}
	podSynced := podInformer.Informer().HasSynced
	factory.Start(ctx.Done())
	go func() {
		s.done <- server.GenericAPIServer.PrepareRun().RunWithContext(ctx)
	}()
	if !cache.WaitForCacheSync(ctx.Done(), podSynced) {
		return nil, errors.New("test metrics server: pod informer did not sync")
	}

	srv := harness.AggregatedServer{Namespace: opts.Namespace, Service: opts.Service, Port: port, CABundle: h.CA.CertPEM}
	for _, gv := range APIServices {
		if err := h.RegisterAPIService(ctx, srv, gv.Group, gv.Version); err != nil {
			return nil, err
		}
	}
	for _, gv := range APIServices {
		if err := h.WaitAPIServiceAvailable(ctx, gv.Version+"."+gv.Group, 60*time.Second); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Wait returns once the server has stopped (its context was cancelled).
func (s *Server) Wait() error { return <-s.done }

func serverConfig(ln net.Listener, certFile, keyFile, kubeconfig string, restConfig *rest.Config, factory informers.SharedInformerFactory) (*cmapiserver.Config, error) {
	secure := genericoptions.NewSecureServingOptions().WithLoopback()
	secure.Listener = ln
	secure.BindAddress = net.ParseIP("127.0.0.1")
	secure.BindPort = ln.Addr().(*net.TCPAddr).Port
	secure.ServerCert.CertKey.CertFile, secure.ServerCert.CertKey.KeyFile = certFile, keyFile
	authn := genericoptions.NewDelegatingAuthenticationOptions()
	authn.RemoteKubeConfigFile = kubeconfig
	authz := genericoptions.NewDelegatingAuthorizationOptions()
	authz.RemoteKubeConfigFile = kubeconfig

	rc := genericapiserver.NewRecommendedConfig(cmapiserver.Codecs)
	rc.ClientConfig = restConfig
	rc.SharedInformerFactory = factory
	if err := secure.ApplyTo(&rc.SecureServing, &rc.LoopbackClientConfig); err != nil {
		return nil, fmt.Errorf("secure serving: %w", err)
	}
	if err := authn.ApplyTo(&rc.Authentication, rc.SecureServing, nil); err != nil {
		return nil, fmt.Errorf("delegated authentication: %w", err)
	}
	if err := authz.ApplyTo(&rc.Authorization); err != nil {
		return nil, fmt.Errorf("delegated authorization: %w", err)
	}
	defs := func(ref openapicommon.ReferenceCallback) map[string]openapicommon.OpenAPIDefinition {
		merged := map[string]openapicommon.OpenAPIDefinition{}
		for _, get := range []openapicommon.GetOpenAPIDefinitions{
			generatedcore.GetOpenAPIDefinitions, generatedcustommetrics.GetOpenAPIDefinitions,
			generatedexternalmetrics.GetOpenAPIDefinitions, resourceMetricsOpenAPI,
		} {
			for name, def := range get(ref) {
				merged[name] = def
			}
		}
		return merged
	}
	namer := openapinamer.NewDefinitionNamer(cmapiserver.Scheme, resourceScheme)
	rc.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(defs, namer)
	rc.OpenAPIConfig.Info.Title, rc.OpenAPIConfig.Info.Version = "tidal-test-metrics-server", "test"
	rc.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(defs, namer)
	rc.OpenAPIV3Config.Info.Title, rc.OpenAPIV3Config.Info.Version = "tidal-test-metrics-server", "test"
	return &cmapiserver.Config{GenericConfig: &rc.Config}, nil
}

// grantServerRBAC lets the server's service account delegate
// authentication and authorization and watch pods.
func grantServerRBAC(ctx context.Context, client kubernetes.Interface, namespace, name string) error {
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: namespace}}
	prefix := "tidal-test-" + namespace + "-" + name
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: prefix + ":pods"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}},
	}
	if _, err := client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create ClusterRole %s: %w", role.Name, err)
	}
	for _, ref := range []rbacv1.RoleRef{
		{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:auth-delegator"},
		{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
	} {
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: prefix + ":" + ref.Name}, RoleRef: ref, Subjects: subject}
		if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create ClusterRoleBinding %s: %w", crb.Name, err)
		}
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: prefix + ":authentication-reader", Namespace: "kube-system"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "extension-apiserver-authentication-reader"},
		Subjects:   subject,
	}
	if _, err := client.RbacV1().RoleBindings("kube-system").Create(ctx, rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create RoleBinding kube-system/%s: %w", rb.Name, err)
	}
	return nil
}

// SetPodMetric sets a per-pod custom metric (custom.metrics.k8s.io pods/*)
// for the pods of namespace matching selector; nil values remove the rule.
func (s *Server) SetPodMetric(namespace string, selector labels.Selector, metric string, values ...*resource.Quantity) {
	s.store.setPodMetric(metric, PodValues{Namespace: namespace, Selector: selector, Values: values})
}

// SetPodUsage sets the usage of resource by the named container of the
// pods of namespace matching selector (metrics.k8s.io PodMetrics); nil
// values remove the rule. A pod none of whose containers has a usage is
// left out of PodMetrics.
func (s *Server) SetPodUsage(namespace string, selector labels.Selector, container string, res corev1.ResourceName, values ...*resource.Quantity) {
	s.store.setUsage(container, res, PodValues{Namespace: namespace, Selector: selector, Values: values})
}

// SetObjectMetric sets a custom metric of one object. groupResource is as
// the HPA's client asks for it, e.g. "deployments.apps" or "services"; a
// nil value removes it (requests then fail with NotFound).
func (s *Server) SetObjectMetric(namespace, groupResource, name, metric string, value *resource.Quantity) {
	s.store.setObject(objectKey{namespace, groupResource, name, metric}, value)
}

// SetExternalMetric sets the series of an external metric in namespace;
// requests return those whose labels match their selector. nil removes the
// metric (requests then fail with NotFound).
func (s *Server) SetExternalMetric(namespace, metric string, series []ExternalSeries) {
	s.store.setExternal(externalKey{namespace, metric}, series)
}
