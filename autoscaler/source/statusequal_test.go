package source

import (
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// TestStatusDiffers: statusDiffers catches the changes of a moving
// reconcile, and never claims a difference apiequality.Semantic does not
// see, for named changes and for random statuses; StatusEqual agrees with
// the whole comparison either way.
func TestStatusDiffers(t *testing.T) {
	base := func() *autoscalingv2.HorizontalPodAutoscalerStatus { return &wireHPA(1).Status }
	tests := []struct {
		name   string
		change func(s *autoscalingv2.HorizontalPodAutoscalerStatus)
		// differs is what statusDiffers must say; equal what the whole
		// comparison says.
		differs, equal bool
	}{
		{name: "unchanged", equal: true},
		{name: "a moved value", differs: true, change: func(s *autoscalingv2.HorizontalPodAutoscalerStatus) {
			s.CurrentMetrics[0].Resource.Current.AverageValue = ptr.To(resource.MustParse("97m"))
		}},
		{name: "a moved utilization", differs: true, change: func(s *autoscalingv2.HorizontalPodAutoscalerStatus) {
			s.CurrentMetrics[0].Resource.Current.AverageUtilization = ptr.To[int32](97)
		}},
		{name: "a utilization dropped", differs: true, change: func(s *autoscalingv2.HorizontalPodAutoscalerStatus) {
			s.CurrentMetrics[0].Resource.Current.AverageUtilization = nil
		}},
		{name: "the same value written otherwise", equal: true, change: func(s *autoscalingv2.HorizontalPodAutoscalerStatus) {
			q := s.CurrentMetrics[0].Resource.Current.AverageValue
			s.CurrentMetrics[0].Resource.Current.AverageValue = resource.NewScaledQuantity(q.ScaledValue(resource.Nano), resource.Nano)
		}},
		{name: "desired replicas", differs: true, change: func(s *autoscalingv2.HorizontalPodAutoscalerStatus) { s.DesiredReplicas++ }},
		{name: "a metric more", differs: true, change: func(s *autoscalingv2.HorizontalPodAutoscalerStatus) {
			s.CurrentMetrics = append(s.CurrentMetrics, s.CurrentMetrics[0])
		}},
		{name: "another source with the same value", change: func(s *autoscalingv2.HorizontalPodAutoscalerStatus) {
			r := s.CurrentMetrics[0].Resource
			s.CurrentMetrics[0] = autoscalingv2.MetricStatus{Type: autoscalingv2.ContainerResourceMetricSourceType,
				ContainerResource: &autoscalingv2.ContainerResourceMetricStatus{Name: r.Name, Container: "app", Current: r.Current}}
		}},
		{name: "a condition's message, left to the whole comparison", change: func(s *autoscalingv2.HorizontalPodAutoscalerStatus) {
			s.Conditions[0].Message = "other"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := base(), base()
			if tt.change != nil {
				tt.change(b)
			}
			if got := statusDiffers(a, b); got != tt.differs {
				t.Errorf("statusDiffers = %v, want %v", got, tt.differs)
			}
			if got := apiequality.Semantic.DeepEqual(a, b); got != tt.equal {
				t.Fatalf("the case is wrong: Semantic.DeepEqual = %v", got)
			}
			ha, hb := wireHPA(1), wireHPA(1)
			ha.Status, hb.Status = *a, *b
			if got := ObjectOfHPA(ha).StatusEqual(ObjectOfHPA(hb)); got != tt.equal {
				t.Errorf("StatusEqual = %v, want %v", got, tt.equal)
			}
			if tt.differs {
				if n := testing.AllocsPerRun(100, func() { ObjectOfHPA(ha).StatusEqual(ObjectOfHPA(hb)) }); n != 0 {
					t.Errorf("StatusEqual of statuses that differ allocated %v times, want 0", n)
				}
			}
		})
	}
	for seed := int64(0); seed < 300; seed++ {
		a, b := randomHA(newHAFiller(seed)), randomHA(newHAFiller(seed+1000))
		if seed%3 == 0 {
			b = a.DeepCopy()
		}
		equal := apiequality.Semantic.DeepEqual(&a.Status, &b.Status)
		if as, bs := &a.Status.HorizontalPodAutoscalerStatus, &b.Status.HorizontalPodAutoscalerStatus; statusDiffers(as, bs) && apiequality.Semantic.DeepEqual(as, bs) {
			t.Fatalf("seed %d: statusDiffers says equal statuses differ:\n%#v\n%#v", seed, a.Status, b.Status)
		}
		if got := ObjectOfHA(a).StatusEqual(ObjectOfHA(b)); got != equal {
			t.Fatalf("seed %d: StatusEqual = %v, the whole comparison %v", seed, got, equal)
		}
	}
}
