package app

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	resourceclient "k8s.io/metrics/pkg/client/clientset/versioned"
	customclient "k8s.io/metrics/pkg/client/custom_metrics"
	externalclient "k8s.io/metrics/pkg/client/external_metrics"
	"k8s.io/utils/clock"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/autoscaler/clustercache"
	"github.com/tidal-autoscaler/tidal/autoscaler/controller"
	"github.com/tidal-autoscaler/tidal/autoscaler/decision"
	"github.com/tidal-autoscaler/tidal/autoscaler/guard"
	"github.com/tidal-autoscaler/tidal/autoscaler/metrics"
	"github.com/tidal-autoscaler/tidal/autoscaler/monitor"
	"github.com/tidal-autoscaler/tidal/autoscaler/shard"
	"github.com/tidal-autoscaler/tidal/autoscaler/source"
)

// clusterConfig is what a runner needs to reconcile a real cluster.
type clusterConfig struct {
	REST     *rest.Config
	Client   kubernetes.Interface
	Mode     source.Mode
	Decision decision.Config
	// SyncPeriod and Workers are --horizontal-pod-autoscaler-sync-period
	// and --concurrent-horizontal-pod-autoscaler-syncs.
	SyncPeriod time.Duration
	Workers    int
	// Registerer gets the controller's metrics; nil: not registered.
	Registerer prometheus.Registerer
	// ObjectSeries gets the per-autoscaler series instead of Registerer
	// when not nil (the caller serves it with monitor.Handler).
	ObjectSeries *monitor.ObjectSeries
	// Handover is controller.Options.Handover: nil without leader
	// election.
	Handover controller.Handover
	// Namespace restricts every informer (autoscalers, pods, workloads)
	// to one namespace; metav1.NamespaceAll: the whole cluster.
	Namespace string
	// StatusMetricsMinInterval is --status-metrics-min-interval.
	StatusMetricsMinInterval time.Duration
	// GuardOtherWriters is --guard-other-writers.
	GuardOtherWriters bool
	// Sharding is --sharding: in crd mode the watch then leaves the
	// objects of the other replicas' shares undecoded until read
	// (source.Deferred).
	Sharding bool
}

// otherWriterHold is how long a native HPA stays left alone after another
// controller was last seen writing its status (guard.StatusWriters): long
// enough that a controller whose decisions rarely change (it writes only
// changes) is not taken for gone between two of its writes, short enough
// that turning it off hands the HPA back within minutes.
func otherWriterHold(syncPeriod time.Duration) time.Duration { return 10 * syncPeriod }

// withProtobuf returns a copy of cfg that sends protobuf and accepts it
// before JSON, for clients of built-in and metrics.k8s.io types (custom
// resources and the custom and external metrics APIs speak JSON only).
func withProtobuf(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return c
}

// runner is a controller.Controller with its informers, clients and
// event broadcaster, built for a real cluster, as kube-controller-manager's
// startHPAController builds them. Building it contacts nothing and starts
// no goroutine: Run does. It is the Config's Reconciler.
//
// Run may be called again after it returned (a replica that lost the
// lease and won it back): the clients, the RESTMapper and the metrics
// last for the process, while the informers, the source and the
// controller, with its in-memory stabilization history, are built anew
// for each run, so that a new term starts from what the cluster holds,
// as a new leader does.
type runner struct {
	cluster    clusterConfig
	options    controller.Options     // without Source, Pods, ScaleCache and Recorder, set by Run
	crdClients source.HAClients       // ModeCRD's
	hpaStatus  source.HPAStatusWriter // ModeNative's
	hpaWatch   rest.Interface         // ModeNative's HPA list and watch client
	scheme     *runtime.Scheme
	component  string
	invalidate customclient.AvailableAPIsGetter
	// mapper is reset every discoveryRefresh (refreshDiscovery).
	mapper     *controller.CountedMapper
	workers    int
	client     kubernetes.Interface
	controller atomic.Pointer[controller.Controller]
	// member, when set (--sharding), limits the next terms to its share.
	member atomic.Pointer[shard.Member]
}

// useMember makes the next Run reconcile m's share only.
func (r *runner) useMember(m *shard.Member) { r.member.Store(m) }

// othersShare reports whether the autoscaler namespace/name is not this
// replica's to reconcile now (source.Deferred).
func (r *runner) othersShare(namespace, name string) bool {
	m := r.member.Load()
	return m != nil && !m.Owns(namespace+"/"+name)
}

// term is what one Run builds and starts: the informers and the source.
type term struct {
	options  controller.Options
	start    []func(<-chan struct{})
	shutdown []func()
}

// newRunner builds the clients as kube-controller-manager does for its HPA
// controller: a deferred discovery RESTMapper, the scale client, and the
// three metrics API clients.
func newRunner(c clusterConfig) (*runner, error) {
	if c.SyncPeriod <= 0 {
		return nil, fmt.Errorf("sync period must be positive, got %s", c.SyncPeriod)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(c.REST)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	cached := memory.NewMemCacheClient(disco)
	mapper := controller.NewCountedMapper(restmapper.NewDeferredDiscoveryRESTMapper(cached))
	scales, err := scale.NewForConfig(c.REST, mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(cached))
	if err != nil {
		return nil, fmt.Errorf("scale client: %w", err)
	}
	resourceMetrics, err := resourceclient.NewForConfig(withProtobuf(c.REST))
	if err != nil {
		return nil, fmt.Errorf("resource metrics client: %w", err)
	}
	apiVersions := customclient.NewAvailableAPIsGetter(disco)
	customMetrics := customclient.NewForConfig(c.REST, mapper, apiVersions)
	externalMetrics, err := externalclient.NewForConfig(c.REST)
	if err != nil {
		return nil, fmt.Errorf("external metrics client: %w", err)
	}
	r := &runner{cluster: c, invalidate: apiVersions, mapper: mapper, workers: c.Workers, client: c.Client}
	switch c.Mode {
	case source.ModeNative:
		// The clientset's rate limiter, which its informers take from too.
		limiter := c.Client.AutoscalingV2().RESTClient().GetRateLimiter()
		if r.hpaStatus, err = source.NewHPAStatusWriter(withProtobuf(c.REST), limiter, c.Workers); err != nil {
			return nil, fmt.Errorf("HorizontalPodAutoscaler status client: %w", err)
		}
		if r.hpaWatch, err = source.NewHPAWatchClient(c.REST, limiter); err != nil {
			return nil, fmt.Errorf("HorizontalPodAutoscaler watch client: %w", err)
		}
	case source.ModeCRD:
		var deferred source.Deferred
		if c.Sharding {
			deferred = r.othersShare
		}
		if r.crdClients, err = source.NewHorizontalAutoscalerClients(c.REST, c.Workers, deferred); err != nil {
			return nil, fmt.Errorf("HorizontalAutoscaler client: %w", err)
		}
	default:
		return nil, fmt.Errorf("unknown mode %q", c.Mode)
	}

	// Registered once per process: a later term records into the same
	// metrics.
	mon, err := monitor.New(c.Registerer, c.ObjectSeries)
	if err != nil {
		return nil, fmt.Errorf("registering the controller metrics: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	r.scheme, r.component = scheme, c.Mode.EventComponent()
	r.options = controller.Options{
		Scales: scales, Mapper: mapper, PodClient: c.Client.CoreV1(),
		Metrics:  metrics.NewRESTClient(resourceMetrics.MetricsV1beta1(), customMetrics, externalMetrics),
		Decision: c.Decision, SyncPeriod: c.SyncPeriod, Monitor: mon,
		Handover: c.Handover, StatusMetricsMinInterval: c.StatusMetricsMinInterval,
	}
	return r, nil
}

// newTerm builds the informers and the source of one Run.
func (r *runner) newTerm() *term {
	c := r.cluster
	t := &term{options: r.options}
	// A shard owns a part of each namespace's autoscalers: its shared
	// PodMetrics lists select their pods only.
	t.options.CoverLists = r.member.Load() != nil
	// The autoscalers' informer resyncs every sync period (a backstop to
	// the queue's own periodic requeue, as upstream); pods never resync,
	// and are cached slim (clustercache.CacheTransform).
	transform := clustercache.CacheTransform
	if c.GuardOtherWriters && c.Mode == source.ModeNative {
		// The HPAs' managed fields say who writes their status; they are
		// read here, before the cache drops them.
		writers := guard.NewStatusWriters(source.FieldManager, otherWriterHold(c.SyncPeriod), nil)
		t.options.StatusWriters = writers
		transform = func(obj any) (any, error) {
			if hpa, ok := obj.(*autoscalingv2.HorizontalPodAutoscaler); ok {
				writers.Observe(hpa)
			}
			return clustercache.CacheTransform(obj)
		}
	}
	factory := informers.NewSharedInformerFactoryWithOptions(c.Client, 0, informers.WithCustomResyncConfig(
		map[metav1.Object]time.Duration{&autoscalingv2.HorizontalPodAutoscaler{}: c.SyncPeriod}),
		informers.WithTransform(transform), informers.WithNamespace(c.Namespace))
	t.start = append(t.start, factory.Start)
	t.shutdown = append(t.shutdown, factory.Shutdown)

	// Targets' scales come from slimmed informers of the built-in kinds,
	// started on first use.
	scaleFactory := informers.NewSharedInformerFactoryWithOptions(c.Client, 0, informers.WithTransform(clustercache.ScaleTransform), informers.WithNamespace(c.Namespace))
	scaleCache := clustercache.NewScaleCache(scaleFactory, nil)
	t.start = append(t.start, scaleCache.Start)
	t.shutdown = append(t.shutdown, scaleFactory.Shutdown)

	var src source.Source
	if c.Mode == source.ModeNative {
		source.UseHPAWatchClient(factory, r.hpaWatch, c.Namespace)
		src = source.NativeSourceWith(factory, r.hpaStatus)
	} else {
		src = source.CRDSourceIn(r.crdClients, c.Namespace, c.SyncPeriod)
		if c.GuardOtherWriters {
			// Not waited for: without RBAC to list HPAs the guard knows
			// nothing and the controller acts as without it.
			hpas, err := guard.NewHPAs(factory.Autoscaling().V2().HorizontalPodAutoscalers().Informer())
			if err != nil {
				klog.Background().Error(err, "The other-writer guard is off")
			}
			t.options.OtherHPAs = hpas
		}
		var informerDone sync.WaitGroup
		t.start = append(t.start, func(stop <-chan struct{}) { informerDone.Go(func() { src.Informer().Run(stop) }) })
		t.shutdown = append(t.shutdown, informerDone.Wait)
	}
	if m := r.member.Load(); m != nil {
		sharded := shard.NewSource(src, m.Owns)
		m.OnChange(sharded.Offer)
		src = sharded
	}
	t.options.Source, t.options.Pods, t.options.ScaleCache = src, factory.Core().V1().Pods(), scaleCache
	return t
}

// HasSynced reports whether the controller runs with synced caches.
func (r *runner) HasSynced() bool {
	c := r.controller.Load()
	return c != nil && c.HasSynced()
}

// Run starts everything and reconciles until ctx is done; it returns after
// every goroutine it started has stopped. Run again, it starts a new term
// (see runner).
func (r *runner) Run(ctx context.Context) error {
	t := r.newTerm()
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	defer broadcaster.Shutdown()
	broadcaster.StartStructuredLogging(3)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: r.client.CoreV1().Events("")})
	o := t.options
	o.Recorder = broadcaster.NewRecorder(r.scheme, corev1.EventSource{Component: r.component})
	ctrl, err := controller.New(ctx, o)
	if err != nil {
		return err
	}
	r.controller.Store(ctrl)

	var wg sync.WaitGroup
	defer wg.Wait()
	// The custom metrics API version is rediscovered every sync period.
	wg.Go(func() { customclient.PeriodicallyInvalidate(r.invalidate, r.options.SyncPeriod, ctx.Done()) })
	wg.Go(func() { refreshDiscovery(ctx, clock.RealClock{}, discoveryRefresh, r.mapper.Reset) })
	for _, start := range t.start {
		start(ctx.Done())
	}
	defer func() {
		for _, shutdown := range t.shutdown {
			shutdown()
		}
	}()
	ctrl.Run(ctx, r.workers)
	return nil
}

// discoveryRefresh is how often the REST mapper's discovery is refreshed:
// kube-controller-manager resets its mapper every 30 s.
const discoveryRefresh = 30 * time.Second

// refreshDiscovery calls reset every period until ctx ends, so that a kind
// whose resources or served versions change is mapped anew (a kind the
// mapper does not know refreshes it at once; see controller's scaler).
// It is wait.Until's loop less the call at start, on a clock a test can
// step (wait.Until takes none).
func refreshDiscovery(ctx context.Context, clk clock.WithTicker, period time.Duration, reset func()) {
	t := clk.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			reset()
		}
	}
}
