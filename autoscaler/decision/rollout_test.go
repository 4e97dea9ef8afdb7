package decision

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestDeploymentRollout(t *testing.T) {
	dep := func(gen, observed int64, spec int32, replicas, updated, available int32, conds ...appsv1.DeploymentCondition) *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: gen},
			Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(spec)},
			Status: appsv1.DeploymentStatus{ObservedGeneration: observed, Replicas: replicas, UpdatedReplicas: updated,
				AvailableReplicas: available, Conditions: conds},
		}
	}
	progressing := func(reason string) appsv1.DeploymentCondition {
		return appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: reason}
	}
	tests := []struct {
		name       string
		d          *appsv1.Deployment
		inProgress bool
		msg        string
	}{
		{"complete", dep(3, 3, 4, 4, 4, 4, progressing("NewReplicaSetAvailable")), false, "successfully rolled out"},
		{"spec not observed", dep(4, 3, 4, 4, 4, 4), true, "spec update to be observed"},
		{"observed ahead (older cache)", dep(3, 4, 4, 4, 4, 4), false, "successfully rolled out"},
		{"new replicas not all updated", dep(3, 3, 4, 5, 2, 4, progressing("ReplicaSetUpdated")), true, "2 out of 4 new replicas have been updated"},
		{"old replicas pending termination", dep(3, 3, 4, 5, 4, 4), true, "1 old replicas are pending termination"},
		{"updated not available", dep(3, 3, 4, 4, 4, 3), true, "3 of 4 updated replicas are available"},
		{"progress deadline exceeded", dep(3, 3, 4, 5, 2, 3, progressing(progressDeadlineExceeded)), false, "exceeded its progress deadline"},
		{"deadline exceeded but spec not observed", dep(4, 3, 4, 5, 2, 3, progressing(progressDeadlineExceeded)), true, "spec update to be observed"},
		{"no spec.replicas", &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, false, "successfully rolled out"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DeploymentRollout(tt.d)
			if got.InProgress != tt.inProgress || !strings.Contains(got.Message, tt.msg) {
				t.Errorf("DeploymentRollout = %+v, want inProgress %v and a message with %q", got, tt.inProgress, tt.msg)
			}
		})
	}
}

func TestHoldsScaleDown(t *testing.T) {
	tests := []struct {
		name                   string
		current, desired, maxR int32
		inProgress, want       bool
	}{
		{"scale-down during a rollout", 4, 2, 10, true, true},
		{"scale-up during a rollout", 4, 6, 10, true, false},
		{"no change during a rollout", 4, 4, 10, true, false},
		{"scale-down without a rollout", 4, 2, 10, false, false},
		{"down to maxReplicas from above", 12, 10, 10, true, false},
		{"from maxReplicas down", 10, 8, 10, true, true},
	}
	for _, tt := range tests {
		if got := HoldsScaleDown(tt.current, tt.desired, tt.maxR, tt.inProgress); got != tt.want {
			t.Errorf("%s: HoldsScaleDown = %v, want %v", tt.name, got, tt.want)
		}
	}
}
