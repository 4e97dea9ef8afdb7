package source

import (
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
)

// TestDecisionAnnotation: the decision goes with a status write and is
// read back whole, a nil decision removes it, and it never makes a status
// differ (so it never causes a write of its own).
func TestDecisionAnnotation(t *testing.T) {
	why := &v1alpha1.Decision{CurrentReplicas: 3, ProposedReplicas: 5, DesiredReplicas: 4, Winner: "pods metric rps",
		Proposals:   []v1alpha1.MetricProposal{{Name: "pods metric rps", Replicas: ptr.To[int32](5)}},
		Adjustments: []v1alpha1.Adjustment{{Reason: "ScaleUpLimit", From: 5, To: 4}}}
	tests := []struct {
		name string
		set  *v1alpha1.TidalStatus
		want *v1alpha1.Decision
	}{
		{name: "a decision is kept", set: &v1alpha1.TidalStatus{Decision: why}, want: why},
		{name: "no decision removes it", set: &v1alpha1.TidalStatus{}, want: nil},
		{name: "no tidal status removes it", set: nil, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hpa := &autoscalingv2.HorizontalPodAutoscaler{}
			hpa.Annotations = map[string]string{DecisionAnnotation: `{"currentReplicas":1,"proposedReplicas":1,"desiredReplicas":1}`}
			before := ObjectOfHPA(hpa).DeepCopy()
			obj := ObjectOfHPA(hpa)
			obj.SetTidalStatus(tt.set)
			if !obj.StatusEqual(before) {
				t.Error("the decision annotation made the status differ: it would cause a write of its own")
			}
			got, err := DecisionOfAnnotation(hpa.Annotations)
			if err != nil {
				t.Fatal(err)
			}
			if (got == nil) != (tt.want == nil) || (got != nil && got.DesiredReplicas != tt.want.DesiredReplicas) ||
				(got != nil && (len(got.Proposals) != 1 || *got.Proposals[0].Replicas != 5 || got.Adjustments[0].Reason != "ScaleUpLimit")) {
				t.Errorf("read back %+v, want %+v", got, tt.want)
			}
		})
	}
	if _, err := DecisionOfAnnotation(map[string]string{DecisionAnnotation: "3"}); err == nil {
		t.Error("a value that is not a decision was accepted")
	}
}

// TestGetReturnsTheCachedObject: Get hands out the informer's own object,
// not a copy (the reconcile copies it once and keeps the original to
// compare with: a second copy cost 5% of a reconcile's allocations).
func TestGetReturnsTheCachedObject(t *testing.T) {
	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}}
	ha := &v1alpha1.HorizontalAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}}
	native := NativeSource(informers.NewSharedInformerFactory(fake.NewClientset(), 0), nil)
	crd := CRDSourceWith(cache.NewSharedIndexInformer(&cache.ListWatch{}, &v1alpha1.HorizontalAutoscaler{}, 0, cache.Indexers{}), nil)
	for name, tc := range map[string]struct {
		src    Source
		cached runtime.Object
	}{"native": {native, hpa}, "crd": {crd, ha}} {
		t.Run(name, func(t *testing.T) {
			if err := tc.src.Informer().GetIndexer().Add(tc.cached); err != nil {
				t.Fatal(err)
			}
			got, err := tc.src.Get("ns", "web")
			if err != nil {
				t.Fatal(err)
			}
			if got.Runtime() != tc.cached {
				t.Errorf("Get returned a copy of the cached object; want the cache's own")
			}
		})
	}
}
