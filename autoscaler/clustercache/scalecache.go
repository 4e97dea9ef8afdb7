package clustercache

import (
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// ScaleCache answers the /scale of the built-in workload kinds from
// informers instead of a GET per reconcile: the GET is most of upstream's
// API traffic with many autoscalers. Other kinds (custom resources) are
// read with GET /scale as before.
//
// An informer is started on first use of its kind, so a cluster whose
// autoscalers only target Deployments watches only Deployments, and its
// cache keeps only what a Scale needs (see scaleTransform). Until it has
// synced, and for a short while after this controller rescaled a target
// and the cache has not yet seen that write, the scale is read with GET.
type ScaleCache struct {
	factory informers.SharedInformerFactory
	stop    <-chan struct{}
	clock   clock.PassiveClock

	mu        sync.Mutex
	informers map[schema.GroupResource]cache.SharedIndexInformer
	// written remembers the resourceVersion of the scales this controller
	// wrote, until the cache shows that version or writtenTTL passes.
	written map[scaleKey]writtenScale
}

type scaleKey struct {
	gr              schema.GroupResource
	namespace, name string
}

type writtenScale struct {
	resourceVersion string
	at              time.Time
}

// writtenTTL bounds how long a target is read with GET after a rescale
// whose write the cache has not shown (someone else may have written
// since, so the versions would never match).
const writtenTTL = time.Minute

// cachedScaleKinds are the kinds whose scale the cache can compute, as
// the apiserver's scale subresources do.
var cachedScaleKinds = map[schema.GroupResource]func(informers.SharedInformerFactory) cache.SharedIndexInformer{
	{Group: "apps", Resource: "deployments"}: func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
		return f.Apps().V1().Deployments().Informer()
	},
	{Group: "apps", Resource: "replicasets"}: func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
		return f.Apps().V1().ReplicaSets().Informer()
	},
	{Group: "apps", Resource: "statefulsets"}: func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
		return f.Apps().V1().StatefulSets().Informer()
	},
	{Resource: "replicationcontrollers"}: func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
		return f.Core().V1().ReplicationControllers().Informer()
	},
}

// NewScaleCache returns a cache whose informers come from factory, which
// should be built with informers.WithTransform(ScaleTransform). Call Start
// before use.
func NewScaleCache(factory informers.SharedInformerFactory, clk clock.PassiveClock) *ScaleCache {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &ScaleCache{
		factory: factory, clock: clk,
		informers: map[schema.GroupResource]cache.SharedIndexInformer{},
		written:   map[scaleKey]writtenScale{},
	}
}

// Start lets the cache start informers until stop is closed.
func (c *ScaleCache) Start(stop <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stop = stop
}

// Get returns the scale of the named object of gr from the cache; false
// when the cache cannot answer (a kind it does not cache, an informer not
// yet synced, a write not yet seen), and the caller should GET it.
func (c *ScaleCache) Get(gr schema.GroupResource, namespace, name string) (*autoscalingv1.Scale, bool) {
	if c == nil {
		return nil, false
	}
	inf := c.informer(gr)
	if inf == nil || !inf.HasSynced() {
		return nil, false
	}
	obj, exists, err := inf.GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil || !exists {
		// A missing object is reported by the GET, with the API's error.
		return nil, false
	}
	sc, ok := scaleOf(obj)
	if !ok {
		return nil, false
	}
	key := scaleKey{gr: gr, namespace: namespace, name: name}
	c.mu.Lock()
	defer c.mu.Unlock()
	if w, ok := c.written[key]; ok {
		if w.resourceVersion != sc.ResourceVersion && c.clock.Since(w.at) < writtenTTL {
			return nil, false
		}
		delete(c.written, key)
	}
	return sc, true
}

// Wrote records that this controller wrote the scale, now at
// resourceVersion.
func (c *ScaleCache) Wrote(gr schema.GroupResource, namespace, name, resourceVersion string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.written[scaleKey{gr: gr, namespace: namespace, name: name}] = writtenScale{resourceVersion: resourceVersion, at: c.clock.Now()}
}

// Deployment returns the cached Deployment namespace/name, cut down to its
// scale and rollout state (generation, spec.replicas, status.replicas,
// observedGeneration, updatedReplicas, availableReplicas and the reason of
// its Progressing condition); false when the cache cannot answer (its
// informer not started or synced, or no such Deployment). Do not modify it.
func (c *ScaleCache) Deployment(namespace, name string) (*appsv1.Deployment, bool) {
	if c == nil {
		return nil, false
	}
	inf := c.informer(schema.GroupResource{Group: "apps", Resource: "deployments"})
	if inf == nil || !inf.HasSynced() {
		return nil, false
	}
	obj, exists, err := inf.GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil || !exists {
		return nil, false
	}
	d, ok := obj.(*appsv1.Deployment)
	return d, ok
}

// rolloutStatus keeps of a Deployment's status what a Scale and the
// rollout state read: the replica counts, the observed generation and the
// Progressing condition's type, status and reason.
func rolloutStatus(st appsv1.DeploymentStatus) appsv1.DeploymentStatus {
	out := appsv1.DeploymentStatus{
		Replicas: st.Replicas, ObservedGeneration: st.ObservedGeneration,
		UpdatedReplicas: st.UpdatedReplicas, AvailableReplicas: st.AvailableReplicas,
	}
	for _, c := range st.Conditions {
		if c.Type == appsv1.DeploymentProgressing {
			out.Conditions = []appsv1.DeploymentCondition{{Type: c.Type, Status: c.Status, Reason: c.Reason}}
		}
	}
	return out
}

// informer returns the informer of gr, starting it on first use; nil for
// kinds the cache does not handle or before Start.
func (c *ScaleCache) informer(gr schema.GroupResource) cache.SharedIndexInformer {
	newInformer, ok := cachedScaleKinds[gr]
	if !ok {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if inf, ok := c.informers[gr]; ok {
		return inf
	}
	if c.stop == nil {
		return nil
	}
	inf := newInformer(c.factory)
	c.informers[gr] = inf
	c.factory.Start(c.stop)
	return inf
}

// scaleOf computes the Scale of a cached workload object as the
// apiserver's scale subresource does: spec.replicas, status.replicas and
// the selector in its string form (ScaleTransform's, when the object went
// through it).
func scaleOf(obj any) (*autoscalingv1.Scale, bool) {
	var (
		meta           *metav1.ObjectMeta
		specReplicas   *int32
		statusReplicas int32
	)
	switch o := obj.(type) {
	case *appsv1.Deployment:
		meta, specReplicas, statusReplicas = &o.ObjectMeta, o.Spec.Replicas, o.Status.Replicas
	case *appsv1.ReplicaSet:
		meta, specReplicas, statusReplicas = &o.ObjectMeta, o.Spec.Replicas, o.Status.Replicas
	case *appsv1.StatefulSet:
		meta, specReplicas, statusReplicas = &o.ObjectMeta, o.Spec.Replicas, o.Status.Replicas
	case *corev1.ReplicationController:
		meta, specReplicas, statusReplicas = &o.ObjectMeta, o.Spec.Replicas, o.Status.Replicas
	default:
		return nil, false
	}
	selector, ok := meta.Annotations[selectorAnnotation]
	if !ok {
		selector, ok = scaleSelector(obj)
	}
	if !ok || specReplicas == nil {
		return nil, false
	}
	return &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{
			Name: meta.Name, Namespace: meta.Namespace, UID: meta.UID,
			ResourceVersion: meta.ResourceVersion, CreationTimestamp: meta.CreationTimestamp,
		},
		Spec:   autoscalingv1.ScaleSpec{Replicas: *specReplicas},
		Status: autoscalingv1.ScaleStatus{Replicas: statusReplicas, Selector: selector},
	}, true
}

// scaleSelector is the string form of a workload's selector, as its
// scale's status.selector; false for another kind or a selector that does
// not parse (the API's /scale then answers, with its error).
func scaleSelector(obj any) (string, bool) {
	var ls *metav1.LabelSelector
	switch o := obj.(type) {
	case *appsv1.Deployment:
		ls = o.Spec.Selector
	case *appsv1.ReplicaSet:
		ls = o.Spec.Selector
	case *appsv1.StatefulSet:
		ls = o.Spec.Selector
	case *corev1.ReplicationController:
		return labels.SelectorFromSet(o.Spec.Selector).String(), true
	default:
		return "", false
	}
	s, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return "", false
	}
	return s.String(), true
}

// selectorAnnotation holds, on a cached workload object only (never
// written to the API), its scaleSelector, computed once by ScaleTransform
// when the object arrives instead of at every reconcile of its autoscaler
// (the selector's parse and print were 2.5% of the controller's
// allocations at 1,000 autoscalers).
const selectorAnnotation = "tidal.dev/cached-scale-selector"

// ScaleTransform drops from cached workload objects what a Scale does not
// need (pod templates, managed fields, annotations, conditions), so that
// caching every Deployment of a cluster costs little memory, and keeps
// the selector's string form in selectorAnnotation. A Deployment also
// keeps what its rollout state needs (see Deployment).
func ScaleTransform(obj any) (any, error) {
	selector, hasSelector := scaleSelector(obj)
	slim := func(m *metav1.ObjectMeta) {
		m.ManagedFields, m.Annotations, m.Labels, m.OwnerReferences, m.Finalizers = nil, nil, nil, nil, nil
		if hasSelector {
			m.Annotations = map[string]string{selectorAnnotation: selector}
		}
	}
	switch o := obj.(type) {
	case *appsv1.Deployment:
		slim(&o.ObjectMeta)
		o.Spec = appsv1.DeploymentSpec{Replicas: o.Spec.Replicas, Selector: o.Spec.Selector}
		o.Status = rolloutStatus(o.Status)
	case *appsv1.ReplicaSet:
		slim(&o.ObjectMeta)
		o.Spec = appsv1.ReplicaSetSpec{Replicas: o.Spec.Replicas, Selector: o.Spec.Selector}
		o.Status = appsv1.ReplicaSetStatus{Replicas: o.Status.Replicas}
	case *appsv1.StatefulSet:
		slim(&o.ObjectMeta)
		o.Spec = appsv1.StatefulSetSpec{Replicas: o.Spec.Replicas, Selector: o.Spec.Selector}
		o.Status = appsv1.StatefulSetStatus{Replicas: o.Status.Replicas}
	case *corev1.ReplicationController:
		slim(&o.ObjectMeta)
		o.Spec = corev1.ReplicationControllerSpec{Replicas: o.Spec.Replicas, Selector: o.Spec.Selector}
		o.Status = corev1.ReplicationControllerStatus{Replicas: o.Status.Replicas}
	}
	return obj, nil
}
