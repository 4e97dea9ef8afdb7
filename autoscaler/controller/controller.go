package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/tidal-autoscaler/tidal/autoscaler/clustercache"
	"github.com/tidal-autoscaler/tidal/autoscaler/decision"
	"github.com/tidal-autoscaler/tidal/autoscaler/guard"
	"github.com/tidal-autoscaler/tidal/autoscaler/history"
	"github.com/tidal-autoscaler/tidal/autoscaler/metrics"
	"github.com/tidal-autoscaler/tidal/autoscaler/monitor"
	"github.com/tidal-autoscaler/tidal/autoscaler/source"
)

// Options are what New needs. Everything but Clock and Monitor is
// required.
type Options struct {
	// Source is the kind of object to reconcile (source.CRDSource or
	// source.NativeSource).
	Source source.Source
	// CoverLists makes a namespace's shared PodMetrics list select only
	// its autoscalers' pods (clustercache.Cover) when they come due on its
	// beat: for a sharded replica, which owns a part of each namespace's
	// autoscalers. A replica owning them all then lists whole namespaces,
	// which new autoscalers need no new list for. Off the beat every
	// controller covers only the autoscalers due before the list expires
	// (see listCover).
	CoverLists bool
	// Pods is the pod informer of the autoscalers' namespaces.
	Pods coreinformers.PodInformer
	// Scales reads and writes /scale subresources; Mapper maps a target's
	// group and kind to resources. A Mapper with a Reset method (client-go's
	// DeferredDiscoveryRESTMapper) is reset when a kind is not found; a
	// CountedMapper's mappings are kept until its next reset.
	Scales scale.ScalesGetter
	Mapper meta.RESTMapper
	// Metrics reads the metrics APIs.
	Metrics metrics.Client
	// ScaleCache answers the scale of built-in workload kinds; nil: every
	// scale is read with GET /scale. It also answers a Deployment's
	// rollout state (spec.holdScaleDownDuringRollout; nil: never known).
	ScaleCache *clustercache.ScaleCache
	// PodClient writes the pod deletion costs of
	// spec.scaleDownPodSelection; nil: they cannot be written (a Warning
	// event says so when a scale-down would write them).
	PodClient typedcorev1.PodsGetter
	// Recorder records events on the autoscalers.
	Recorder record.EventRecorder
	// Decision is the kube-controller-manager tuning (flags and gates).
	Decision decision.Config
	// SyncPeriod is how often every autoscaler is reconciled
	// (--horizontal-pod-autoscaler-sync-period).
	SyncPeriod time.Duration
	// Monitor records the controller's metrics; nil: an unregistered one.
	Monitor *monitor.Monitor
	// Clock is the time source; nil: the real clock.
	Clock clock.PassiveClock
	// Handover tells this controller, when it starts, until when the
	// previous leader reconciled; nil without leader election, and then a
	// repeated recommendation is also written on its own once a minute
	// (see source.HistoryAnnotation).
	Handover Handover
	// StatusMetricsMinInterval bounds status writes whose only change is
	// the values of status.currentMetrics to one per interval
	// (statuswrites.go); 0: every change is written, as upstream does.
	StatusMetricsMinInterval time.Duration
	// OtherHPAs (crd mode) and StatusWriters (native mode) are the
	// other-writer guard's (guard.go); nil: not checked.
	OtherHPAs     *guard.HPAs
	StatusWriters *guard.StatusWriters
}

// Handover is what leader election tells a new leader about the previous
// one.
type Handover interface {
	// PredecessorAlive is when the previous leader last renewed or
	// released the lease; zero when unknown (no earlier leader).
	PredecessorAlive() time.Time
}

// Controller reconciles autoscalers: informer events enqueue keys, workers
// reconcile them, and every key is re-queued for one sync period after it
// was due (see cadence).
type Controller struct {
	r       *reconciler
	queue   workqueue.TypedDelayingInterface[string]
	cadence *cadence
	period  time.Duration
	// coverLists is Options.CoverLists.
	coverLists bool
	// visits measure the gaps between an autoscaler's reconciles
	// (gaps.go).
	visits *visits
	synced []cache.InformerSynced
	ready  atomic.Bool
	// handover is Options.Handover.
	handover Handover
	// logger is New's context's, for the informer's event handlers.
	logger klog.Logger
}

// New creates a controller and registers its event handlers, which log
// through ctx's logger. Start the informers of Source and Pods, then Run.
func New(ctx context.Context, o Options) (*Controller, error) {
	var errs []error
	if o.Source == nil || o.Pods == nil || o.Scales == nil || o.Mapper == nil || o.Metrics == nil || o.Recorder == nil {
		errs = append(errs, errors.New("controller options need Source, Pods, Scales, Mapper, Metrics and Recorder"))
	}
	if o.SyncPeriod <= 0 {
		errs = append(errs, fmt.Errorf("sync period must be positive, got %s", o.SyncPeriod))
	}
	if o.StatusMetricsMinInterval < 0 {
		errs = append(errs, fmt.Errorf("status metrics min interval must not be negative, got %s", o.StatusMetricsMinInterval))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	podIndex := clustercache.NewPodIndex()
	if err := o.Pods.Informer().AddIndexers(podIndex.Indexers()); err != nil {
		return nil, fmt.Errorf("indexing pods by label: %w", err)
	}
	// No resync: the handler reads only deletions.
	if _, err := o.Pods.Informer().AddEventHandlerWithResyncPeriod(podIndex.Handler(), 0); err != nil {
		return nil, fmt.Errorf("watching pod deletions: %w", err)
	}
	if o.Monitor == nil {
		o.Monitor, _ = monitor.New(nil, nil)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	refresh := history.DefaultRefresh
	if o.Handover != nil {
		refresh = 0
	}
	selectors := clustercache.NewSelectorTracker()
	c := &Controller{
		handover: o.Handover,
		logger:   klog.FromContext(ctx),
		r: &reconciler{
			source: o.Source, selections: clustercache.NewSelections(podIndex, o.Pods.Informer().GetIndexer(), selectors, clustercache.NewPodConversions()),
			scales:  &scaler{scales: o.Scales, mapper: o.Mapper, cache: o.ScaleCache},
			metrics: o.Metrics, recorder: o.Recorder, monitor: o.Monitor, cfg: o.Decision,
			clock: o.Clock, history: history.NewStore(refresh), selectors: selectors,
			podClient: o.PodClient, deployment: o.ScaleCache.Deployment,
			statusInterval: o.StatusMetricsMinInterval, statusWrites: newStatusWrites(o.SyncPeriod),
			otherHPAs: o.OtherHPAs, writers: o.StatusWriters,
		},
		queue: workqueue.NewTypedDelayingQueueWithConfig(
			workqueue.TypedDelayingQueueConfig[string]{Name: source.ComponentName, MetricsProvider: o.Monitor.Queue()},
		),
		cadence:    newCadence(),
		period:     o.SyncPeriod,
		coverLists: o.CoverLists,
		visits:     newVisits(o.SyncPeriod),
	}
	if m, ok := o.Metrics.(interface{ ShareNamespaceLists(func(string) bool) }); ok {
		m.ShareNamespaceLists(c.sharesNamespace)
	}
	if m, ok := o.Metrics.(interface{ CoverNamespaceLists(metrics.CoverFunc) }); ok {
		m.CoverNamespaceLists(c.listCover)
	}
	_, err := o.Source.Informer().AddEventHandlerWithResyncPeriod(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.add,
		UpdateFunc: c.update,
		DeleteFunc: c.delete,
	}, o.SyncPeriod)
	if err != nil {
		return nil, fmt.Errorf("adding the %s event handlers: %w", o.Source.Kind(), err)
	}
	c.synced = []cache.InformerSynced{o.Source.Informer().HasSynced, o.Pods.Informer().HasSynced}
	return c, nil
}

// HasSynced reports whether the caches have synced and workers run.
func (c *Controller) HasSynced() bool { return c.ready.Load() }

// Run waits for the caches, then runs workers until ctx is done, and
// returns once they have stopped.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	logger.Info("Starting the autoscaler controller", "kind", c.r.source.Kind(), "workers", workers)
	c.takeOver(logger)
	c.r.monitor.SetLeading(true)

	var wg sync.WaitGroup
	defer func() {
		c.queue.ShutDown()
		wg.Wait()
		c.ready.Store(false)
		c.r.monitor.SetLeading(false)
		logger.Info("Stopped the autoscaler controller", "kind", c.r.source.Kind())
	}()
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced...) {
		return
	}
	c.ready.Store(true)
	c.r.monitor.SetReconcileGap(func() time.Duration { return c.visits.longest(c.r.clock.Now()) })
	defer c.r.monitor.SetReconcileGap(nil)
	c.r.monitor.SetOffBeat(c.cadence.offBeatCount)
	defer c.r.monitor.SetOffBeat(nil)
	for range workers {
		wg.Go(func() { wait.UntilWithContext(ctx, c.worker, time.Second) })
	}
	<-ctx.Done()
}

// takeOver learns from the handover, if any, until when the previous
// leader reconciled; call it before the first reconcile.
func (c *Controller) takeOver(logger klog.Logger) {
	if c.handover == nil {
		return
	}
	alive := c.handover.PredecessorAlive()
	c.r.history.Succeed(alive)
	if !alive.IsZero() {
		logger.Info("Continuing the previous leader's steady recommendations", "until", alive)
	}
}

func (c *Controller) worker(ctx context.Context) {
	for c.processNextWorkItem(ctx) {
	}
}

func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	// Stopping (SIGTERM, a lost Lease): leave the rest of the queue. The
	// queue hands out what it holds until it is empty even once shut down,
	// and a worker that reconciled it all with a cancelled context failed
	// each key in turn: thousands of them at 10,000 autoscalers, past the
	// kubelet's grace period, so that the process was killed before it
	// released its Lease.
	if ctx.Err() != nil {
		return false
	}
	now := c.r.clock.Now()
	due := c.cadence.started(key, now)
	c.visits.visited(key, now)
	// The autoscalers of a namespace that share its reads come due
	// together: they share only the reads of this round.
	deleted, err := c.r.reconcileKey(metrics.WithRound(ctx, due), key, recordStamp(due, now, c.period))
	if err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Reconciling an autoscaler failed", "key", key)
	}
	// Always come back one sync period after this reconcile was due (on
	// the namespace's beat when its autoscalers share a PodMetrics list;
	// later when it waited long in the queue), errors included; an earlier
	// time already waiting wins, so each key is reconciled once per period.
	if deleted {
		c.visits.forget(key)
	} else {
		ns, _, _ := cache.SplitMetaNamespaceKey(key)
		beat, shares := namespaceBeat(ns, c.period), c.sharesNamespace(ns)
		next := nextDue(due, now, c.r.clock.Now(), c.period, beat, shares)
		c.cadence.placed(key, !shares || untilBeat(next, c.period, beat) == 0)
		c.scheduleAt(key, next)
	}
	return true
}

// listCover is the selector of a shared PodMetrics list of namespace (see
// metrics.CoverFunc). On the namespace's beat, when at least half of its
// autoscalers wait for a time up to until, the list serves them all: it
// covers them all with CoverLists, else it is the whole namespace. Off the
// beat (a controller behind its queue, or autoscalers joining the beat)
// only the few due by until will read it, so it covers them and caller: a
// controller reconciling 2,500 of a period's 10,000 autoscalers listed each
// namespace of 5,000 pods every 2 s to read about 170 of them.
func (c *Controller) listCover(namespace string, caller labels.Selector, until time.Time) (clustercache.Cover, bool) {
	soon, all := c.r.selectors.Selectors(namespace, func(key string) bool { return c.cadence.dueBy(key, until) })
	switch {
	case 2*len(soon) < len(all):
		return clustercache.CoverOf(append(soon, caller))
	case c.coverLists:
		return clustercache.CoverOf(append(all, caller))
	default:
		return clustercache.Cover{}, false
	}
}

// sharesNamespace reports whether several autoscalers use namespace: they
// share its PodMetrics list and come due on its beat.
func (c *Controller) sharesNamespace(namespace string) bool {
	return c.r.selectors.Count(namespace) > 1
}

// scheduleAt queues key for t: at once when t is not in the future. A key
// already waiting for an earlier time is left alone: every echo of the
// controller's own status writes comes here, and the delaying queue would
// only find that it keeps the earlier time.
func (c *Controller) scheduleAt(key string, t time.Time) {
	if !c.cadence.scheduled(key, t) {
		return
	}
	if d := t.Sub(c.r.clock.Now()); d > 0 {
		c.queue.AddAfter(key, d)
		return
	}
	c.queue.Add(key)
}

func (c *Controller) keyOf(obj any) (string, bool) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleErrorWithLogger(c.logger, err, "Couldn't get the key of an object", "object", obj)
		return "", false
	}
	return key, true
}

// add queues a new object at once and registers it for selector overlap
// detection.
func (c *Controller) add(obj any) {
	key, ok := c.keyOf(obj)
	if !ok {
		return
	}
	ns, _, _ := cache.SplitMetaNamespaceKey(key)
	if c.r.selectors.PutIfAbsent(ns, key, labels.Nothing()) {
		c.r.monitor.AutoscalerAdded()
	}
	now := c.r.clock.Now()
	c.visits.known(key, now)
	c.scheduleAt(key, now)
}

// update queues at once on a spec change (metadata.generation bumped).
// Other updates (the controller's own status writes coming back, resyncs)
// change nothing: every reconcile schedules the next one, at most 1.1
// periods after it started (nextDue), so a key is always waiting or being
// reconciled.
// They only queue a key that nothing schedules, two periods on, as a net:
// any earlier time would win over the cadence's and pull the key off its
// namespace's beat (an echo arrives a moment after its reconcile was due).
func (c *Controller) update(oldObj, newObj any) {
	oldMeta, err1 := meta.Accessor(oldObj)
	newMeta, err2 := meta.Accessor(newObj)
	if err1 == nil && err2 == nil && oldMeta.GetGeneration() != newMeta.GetGeneration() {
		c.add(newObj)
		return
	}
	if key, ok := c.keyOf(newObj); ok {
		c.scheduleAt(key, c.r.clock.Now().Add(2*c.period))
	}
}

// delete forgets the object.
func (c *Controller) delete(obj any) {
	key, ok := c.keyOf(obj)
	if !ok {
		return
	}
	c.cadence.forget(key)
	c.visits.forget(key)
	c.r.statusWrites.forget(key)
	c.r.selections.Forget(key)
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	if c.r.selectors.Delete(ns, key) {
		c.r.monitor.AutoscalerDeleted()
	}
	if c.r.selectors.Count(ns) == 0 {
		c.r.statusWrites.forgetNamespace(ns)
	}
	c.r.history.Forget(key)
	c.r.monitor.Forget(ns, name)
}
