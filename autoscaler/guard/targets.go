package guard

import (
	"fmt"
	"sort"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// targetIndex is the indexer name of HPAs by TargetKey.
const targetIndex = "scaleTarget"

// TargetKey identifies a workload within the cluster: namespace, API
// group, kind and name of a scale target reference. The version is left
// out: apps/v1 and apps/v1beta2 name one Deployment.
func TargetKey(namespace string, ref autoscalingv2.CrossVersionObjectReference) string {
	group := ""
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err == nil {
		group = gv.Group
	}
	return fmt.Sprintf("%s/%s/%s/%s", namespace, group, ref.Kind, ref.Name)
}

// HPAs answers which autoscaling/v2 HorizontalPodAutoscalers scale a
// workload, from an HPA informer.
type HPAs struct {
	indexer cache.Indexer
	synced  cache.InformerSynced
}

// NewHPAs indexes the informer's HPAs by target. Call it before the
// informer starts.
func NewHPAs(inf cache.SharedIndexInformer) (*HPAs, error) {
	err := inf.AddIndexers(cache.Indexers{targetIndex: func(obj any) ([]string, error) {
		hpa, ok := obj.(*autoscalingv2.HorizontalPodAutoscaler)
		if !ok {
			return nil, nil
		}
		return []string{TargetKey(hpa.Namespace, hpa.Spec.ScaleTargetRef)}, nil
	}})
	if err != nil {
		return nil, fmt.Errorf("indexing HorizontalPodAutoscalers by scale target: %w", err)
	}
	return &HPAs{indexer: inf.GetIndexer(), synced: inf.HasSynced}, nil
}

// Scaling returns the HPAs whose scale target is the workload ref names in
// namespace, sorted by name (read-only: they are the informer's). known is
// false until the informer has synced (for example while the autoscaler's
// RBAC does not let it list HPAs): nothing is known then, and the caller
// acts as if there were none.
func (h *HPAs) Scaling(namespace string, ref autoscalingv2.CrossVersionObjectReference) (hpas []*autoscalingv2.HorizontalPodAutoscaler, known bool) {
	if h == nil || !h.synced() {
		return nil, false
	}
	objs, err := h.indexer.ByIndex(targetIndex, TargetKey(namespace, ref))
	if err != nil {
		return nil, false
	}
	for _, o := range objs {
		if hpa, ok := o.(*autoscalingv2.HorizontalPodAutoscaler); ok {
			hpas = append(hpas, hpa)
		}
	}
	sort.Slice(hpas, func(i, j int) bool { return hpas[i].Name < hpas[j].Name })
	return hpas, true
}
