package behavior

import (
	"reflect"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
)

func ptr[T any](v T) *T { return &v }

func TestFromV2(t *testing.T) {
	maxPolicy := autoscalingv2.MaxChangePolicySelect
	disabled := autoscalingv2.DisabledPolicySelect
	custom := []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: 60}}
	tests := []struct {
		name   string
		in     *autoscalingv2.HorizontalPodAutoscalerBehavior
		window time.Duration
		want   *Behavior
	}{
		{name: "nil stays nil (legacy)", in: nil, window: 5 * time.Minute, want: nil},
		{name: "empty behavior gets both defaults", in: &autoscalingv2.HorizontalPodAutoscalerBehavior{}, window: 5 * time.Minute,
			want: &Behavior{ScaleUp: Rules{StabilizationWindowSeconds: 0, SelectPolicy: SelectMax, Policies: []Policy{{PodsPolicy, 4, 15}, {PercentPolicy, 100, 15}}},
				ScaleDown: Rules{StabilizationWindowSeconds: 300, SelectPolicy: SelectMax, Policies: []Policy{{PercentPolicy, 100, 15}}}}},
		{name: "down window comes from the flag, truncated to seconds", in: &autoscalingv2.HorizontalPodAutoscalerBehavior{}, window: 90500 * time.Millisecond,
			want: &Behavior{ScaleUp: DefaultScaleUpRules(), ScaleDown: Rules{StabilizationWindowSeconds: 90, SelectPolicy: SelectMax, Policies: []Policy{{PercentPolicy, 100, 15}}}}},
		{name: "set fields win, unset fields defaulted", window: 5 * time.Minute, in: &autoscalingv2.HorizontalPodAutoscalerBehavior{
			ScaleUp:   &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr(int32(60)), Tolerance: ptr(resource.MustParse("50m"))},
			ScaleDown: &autoscalingv2.HPAScalingRules{SelectPolicy: &disabled, Policies: custom, StabilizationWindowSeconds: ptr(int32(0))},
		}, want: &Behavior{
			ScaleUp:   Rules{StabilizationWindowSeconds: 60, SelectPolicy: SelectMax, Policies: []Policy{{PodsPolicy, 4, 15}, {PercentPolicy, 100, 15}}, Tolerance: ptr(0.05)},
			ScaleDown: Rules{StabilizationWindowSeconds: 0, SelectPolicy: SelectDisabled, Policies: []Policy{{PodsPolicy, 1, 60}}},
		}},
		{name: "explicit Max select policy", window: time.Minute, in: &autoscalingv2.HorizontalPodAutoscalerBehavior{
			ScaleDown: &autoscalingv2.HPAScalingRules{SelectPolicy: &maxPolicy},
		}, want: &Behavior{ScaleUp: DefaultScaleUpRules(), ScaleDown: DefaultScaleDownRules(time.Minute)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FromV2(tt.in, tt.window)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
