package shard

import (
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/tidal-autoscaler/tidal/autoscaler/source"
)

// Source is src seen by one member: the controller's handlers get the
// events of the objects this member owns only, Get answers NotFound for
// the others (so the controller forgets a key it no longer owns, as it
// forgets a deleted object), and Offer hands the handlers the objects the
// member gained since the last Offer. Call Offer when the member's view
// changes (Member.OnChange).
type Source struct {
	source.Source
	owns     func(key string) bool
	informer *informer
}

// NewSource wraps src for the member whose ownership owns tells.
func NewSource(src source.Source, owns func(key string) bool) *Source {
	s := &Source{Source: src, owns: owns}
	s.informer = &informer{SharedIndexInformer: src.Informer(), owns: owns, offered: map[string]bool{}}
	return s
}

// Informer implements source.Source.
func (s *Source) Informer() cache.SharedIndexInformer { return s.informer }

// Get implements source.Source.
func (s *Source) Get(namespace, name string) (source.Object, error) {
	if !s.owns(namespace + "/" + name) {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: s.Kind()}, name)
	}
	return s.Source.Get(namespace, name)
}

// Offer delivers, as additions, the cached objects this member owns now
// and did not own at the last Offer.
func (s *Source) Offer() { s.informer.offer() }

// informer filters the handlers' events by ownership.
type informer struct {
	cache.SharedIndexInformer
	owns func(key string) bool

	mu       sync.Mutex
	handlers []cache.ResourceEventHandler
	offered  map[string]bool // owned at the last offer
}

func (i *informer) filtered(h cache.ResourceEventHandler) cache.ResourceEventHandler {
	i.mu.Lock()
	i.handlers = append(i.handlers, h)
	i.mu.Unlock()
	return cache.FilteringResourceEventHandler{Handler: h, FilterFunc: func(obj any) bool {
		key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		return err == nil && i.owns(key)
	}}
}

func (i *informer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandler(i.filtered(h))
}

func (i *informer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithResyncPeriod(i.filtered(h), resync)
}

func (i *informer) AddEventHandlerWithOptions(h cache.ResourceEventHandler, o cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithOptions(i.filtered(h), o)
}

func (i *informer) offer() {
	i.mu.Lock()
	defer i.mu.Unlock()
	owned := map[string]bool{}
	for _, obj := range i.GetStore().List() {
		key, err := cache.MetaNamespaceKeyFunc(obj)
		if err != nil || !i.owns(key) {
			continue
		}
		owned[key] = true
		if i.offered[key] {
			continue
		}
		for _, h := range i.handlers {
			h.OnAdd(obj, false)
		}
	}
	i.offered = owned
}
