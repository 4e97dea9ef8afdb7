package explain

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/autoscaler/source"
)

// summary is what a test compares of a report: one line per metric
// (name|current|target|proposes), per limit (reason from→to) and the
// notes.
type summary struct {
	Metrics     []string
	Limits      []string
	Unavailable bool
	Notes       int
}

func summarize(r Report) summary {
	var s summary
	for _, m := range r.Metrics {
		s.Metrics = append(s.Metrics, strings.Join([]string{m.Name, m.Current, m.Target, proposes(m)}, "|"))
	}
	for _, l := range r.Limits {
		line := l.Reason
		if l.From != nil {
			line += fmt.Sprintf(" %d→%d", *l.From, *l.To)
		}
		s.Limits = append(s.Limits, line)
	}
	s.Unavailable = r.Unavailable != ""
	s.Notes = len(r.Notes)
	return s
}

var fixtureMetrics = []string{
	cpuName + "|113% (565m)|60%|10, chosen",
	"pods metric rps|33900m|80|3",
	"external metric queue_length(nil)|<unknown>|30 (avg)|failed: " + queueError,
}

func TestOfHorizontalAutoscaler(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(*v1alpha1.HorizontalAutoscaler)
		want    summary
		wantErr string
	}{
		{
			name: "scale-up limited by a policy",
			edit: func(*v1alpha1.HorizontalAutoscaler) {},
			want: summary{Metrics: fixtureMetrics, Limits: []string{"ScaleUpLimit 10→9"}},
		},
		{
			name: "a dry run shadowing an HPA: a note",
			edit: func(ha *v1alpha1.HorizontalAutoscaler) {
				ha.Status.Tidal.Shadow = &v1alpha1.ShadowComparison{HorizontalPodAutoscaler: "web-hpa", DesiredReplicas: 9, HPADesiredReplicas: 7}
			},
			want: summary{Metrics: fixtureMetrics, Limits: []string{"ScaleUpLimit 10→9"}, Notes: 1},
		},
		{
			name: "within tolerance, nothing else",
			edit: func(ha *v1alpha1.HorizontalAutoscaler) {
				d := ha.Status.Tidal.Decision
				d.Proposals[0] = v1alpha1.MetricProposal{Name: cpuName, Replicas: ptr.To[int32](5), WithinTolerance: true}
				d.ProposedReplicas, d.StabilizedReplicas, d.DesiredReplicas, d.Adjustments = 5, ptr.To[int32](5), 5, nil
			},
			want: summary{Metrics: []string{cpuName + "|113% (565m)|60%|5, within tolerance, chosen", fixtureMetrics[1], fixtureMetrics[2]},
				Limits: []string{"WithinTolerance"}},
		},
		{
			name: "scale-down stabilized, then raised to minReplicas",
			edit: func(ha *v1alpha1.HorizontalAutoscaler) {
				d := ha.Status.Tidal.Decision
				d.Proposals = d.Proposals[:2]
				d.Proposals[0].Replicas = ptr.To[int32](1)
				d.Proposals[1].Replicas = ptr.To[int32](1)
				d.ProposedReplicas, d.StabilizedReplicas, d.DesiredReplicas = 1, ptr.To[int32](1), 2
				d.Adjustments = []v1alpha1.Adjustment{{Reason: "TooFewReplicas", From: 1, To: 2, Message: "the desired replica count is less than the minimum replica count"}}
				ha.Spec.Metrics = ha.Spec.Metrics[:2]
				ha.Status.CurrentMetrics = ha.Status.CurrentMetrics[:2]
			},
			// Both proposals are 1: the first with the winner's name is chosen.
			want: summary{Metrics: []string{cpuName + "|113% (565m)|60%|1, chosen", "pods metric rps|33900m|80|1"}, Limits: []string{"TooFewReplicas 1→2"}},
		},
		{
			name: "fallback, rollout hold and dry run in order",
			edit: func(ha *v1alpha1.HorizontalAutoscaler) {
				d := ha.Status.Tidal.Decision
				d.Adjustments = append(d.Adjustments,
					v1alpha1.Adjustment{Reason: "Fallback", From: 5, To: 6, Message: "fallback: every metric failed"},
					v1alpha1.Adjustment{Reason: "RolloutInProgress", From: 4, To: 5, Message: "holdScaleDownDuringRollout: the scale-down waits for the rollout"})
				ha.Status.Conditions = append(ha.Status.Conditions, autoscalingv2.HorizontalPodAutoscalerCondition{
					Type: "DryRun", Status: corev1.ConditionTrue, Reason: "WouldScale", Message: "dry run, /scale is not written: would scale 5→9: " + cpuName + " above target"})
			},
			want: summary{Metrics: fixtureMetrics, Limits: []string{"ScaleUpLimit 10→9", "Fallback 5→6", "RolloutInProgress 4→5", "DryRun"}},
		},
		{
			name: "a dry run turned off is not a limit",
			edit: func(ha *v1alpha1.HorizontalAutoscaler) {
				ha.Status.Conditions = append(ha.Status.Conditions, autoscalingv2.HorizontalPodAutoscalerCondition{Type: "DryRun", Status: corev1.ConditionFalse})
			},
			want: summary{Metrics: fixtureMetrics, Limits: []string{"ScaleUpLimit 10→9"}},
		},
		{
			name: "every metric failed",
			edit: func(ha *v1alpha1.HorizontalAutoscaler) {
				ha.Spec.Metrics = ha.Spec.Metrics[2:]
				ha.Status.CurrentMetrics = []autoscalingv2.MetricStatus{{}}
				ha.Status.Tidal.Decision = &v1alpha1.Decision{CurrentReplicas: 5, ProposedReplicas: -1, DesiredReplicas: 5,
					Proposals: []v1alpha1.MetricProposal{{Name: "external metric queue_length(nil)", Error: queueError}}}
			},
			want: summary{Metrics: fixtureMetrics[2:]},
		},
		{
			name: "no decision but conditions: the scale could not be read",
			edit: func(ha *v1alpha1.HorizontalAutoscaler) {
				ha.Status.Tidal.Decision = nil
				ha.Status.CurrentMetrics = nil
				ha.Status.Conditions = []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionFalse,
					Reason: "FailedGetScale", Message: `the HPA controller was unable to get the target's current scale: deployments.apps "web" not found`}}
			},
			want: summary{Metrics: []string{cpuName + "|<unknown>|60%|-", "pods metric rps|<unknown>|80|-", "external metric queue_length(nil)|<unknown>|30 (avg)|-"},
				Unavailable: true},
		},
		{
			name: "spec changed after the decision",
			edit: func(ha *v1alpha1.HorizontalAutoscaler) {
				ha.Generation = 2
				ha.Spec.Metrics = ha.Spec.Metrics[1:]
			},
			want: summary{Metrics: []string{cpuName + "|<unknown>||10, chosen", "pods metric rps|<unknown>||3",
				"external metric queue_length(nil)|<unknown>||failed: " + queueError},
				Limits: []string{"ScaleUpLimit 10→9"}, Notes: 2},
		},
		{
			name:    "not reconciled yet",
			edit:    func(ha *v1alpha1.HorizontalAutoscaler) { ha.Status = v1alpha1.HorizontalAutoscalerStatus{} },
			wantErr: "horizontalautoscaler shop/web has no status to explain: the controller has not reconciled it yet",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ha := web()
			tt.edit(ha)
			r, err := OfHorizontalAutoscaler(ha)
			if tt.wantErr != "" {
				var nr *NotReconciledError
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.As(err, &nr) {
					t.Fatalf("err = %v, want a NotReconciledError containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := summarize(r); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %#v\nwant %#v", got, tt.want)
			}
			if r.Target != "Deployment/web" || r.MinReplicas != 2 || r.MaxReplicas != 20 || r.CurrentReplicas != 5 {
				t.Errorf("target %s, range %d..%d, current %d", r.Target, r.MinReplicas, r.MaxReplicas, r.CurrentReplicas)
			}
		})
	}
}

func TestOfHorizontalPodAutoscaler(t *testing.T) {
	tests := []struct {
		name         string
		edit         func(*autoscalingv2.HorizontalPodAutoscaler)
		want         summary
		wantDecision bool
		wantErr      string
	}{
		{
			name: "native mode: status only",
			edit: func(*autoscalingv2.HorizontalPodAutoscaler) {},
			want: summary{Metrics: []string{cpuName + "|113% (565m)|60%|-", "pods metric rps|33900m|80|-", "external metric queue_length(nil)|<unknown>|30 (avg)|-"},
				Unavailable: true},
		},
		{
			name: "native dry run from the annotation's condition",
			edit: func(hpa *autoscalingv2.HorizontalPodAutoscaler) {
				hpa.Spec.MinReplicas = nil
				hpa.Status.Conditions = append(hpa.Status.Conditions, autoscalingv2.HorizontalPodAutoscalerCondition{
					Type: "DryRun", Status: corev1.ConditionTrue, Reason: "WouldNotScale", Message: "dry run, /scale is not written: would keep 5 replicas"})
			},
			want: summary{Metrics: []string{cpuName + "|113% (565m)|60%|-", "pods metric rps|33900m|80|-", "external metric queue_length(nil)|<unknown>|30 (avg)|-"},
				Limits: []string{"DryRun"}, Unavailable: true},
		},
		{
			// What native mode writes with the status (source.hpaObject's
			// SetTidalStatus), read back as a HorizontalAutoscaler's.
			name: "native mode: the decision annotation gives the proposals",
			edit: func(hpa *autoscalingv2.HorizontalPodAutoscaler) {
				source.ObjectOfHPA(hpa).SetTidalStatus(&v1alpha1.TidalStatus{Decision: web().Status.Tidal.Decision})
			},
			want:         summary{Metrics: fixtureMetrics, Limits: []string{"ScaleUpLimit 10→9"}},
			wantDecision: true,
		},
		{
			name: "another controller writes the status: Conflict limits",
			edit: func(hpa *autoscalingv2.HorizontalPodAutoscaler) {
				hpa.Status.Conditions = append(hpa.Status.Conditions, autoscalingv2.HorizontalPodAutoscalerCondition{
					Type: "Conflict", Status: corev1.ConditionTrue, Reason: "OtherStatusWriter", Message: "kube-controller-manager also writes this HorizontalPodAutoscaler's status"})
			},
			want: summary{Metrics: []string{cpuName + "|113% (565m)|60%|-", "pods metric rps|33900m|80|-", "external metric queue_length(nil)|<unknown>|30 (avg)|-"},
				Limits: []string{"Conflict"}, Unavailable: true},
		},
		{
			name: "a damaged annotation: status only, with a note",
			edit: func(hpa *autoscalingv2.HorizontalPodAutoscaler) {
				hpa.Annotations = map[string]string{source.DecisionAnnotation: "{not json"}
			},
			want: summary{Metrics: []string{cpuName + "|113% (565m)|60%|-", "pods metric rps|33900m|80|-", "external metric queue_length(nil)|<unknown>|30 (avg)|-"},
				Unavailable: true, Notes: 1},
		},
		{
			name: "not reconciled yet",
			edit: func(hpa *autoscalingv2.HorizontalPodAutoscaler) {
				hpa.Status = autoscalingv2.HorizontalPodAutoscalerStatus{}
			},
			wantErr: "horizontalpodautoscaler shop/web has no status to explain: the controller has not reconciled it yet",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hpa := webHPA()
			tt.edit(hpa)
			r, err := OfHorizontalPodAutoscaler(hpa)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := summarize(r); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %#v\nwant %#v", got, tt.want)
			}
			if (r.Decision != nil) != tt.wantDecision || r.Kind != KindHPA {
				t.Errorf("kind %s, decision %v", r.Kind, r.Decision)
			}
		})
	}
}
