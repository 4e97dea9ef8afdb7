package decision

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
)

// Rollout is a Deployment's rollout state as `kubectl rollout status` sees
// it (k8s.io/kubectl's polymorphichelpers.DeploymentStatusViewer).
type Rollout struct {
	// InProgress: the rollout is not complete, and has not exceeded its
	// progress deadline.
	InProgress bool
	// Message says why, in kubectl's words.
	Message string
}

// progressDeadlineExceeded is the reason of the Progressing condition of a
// Deployment whose rollout made no progress within its deadline
// (deploymentutil.TimedOutReason).
const progressDeadlineExceeded = "ProgressDeadlineExceeded"

// DeploymentRollout is kubectl's rollout status of d: in progress while the
// controller has not observed the latest spec (generation above
// status.observedGeneration), while fewer than spec.replicas pods are
// updated, while old pods are still counted (status.replicas above
// updatedReplicas), and while updated pods are not all available. A
// rollout past its progress deadline, which kubectl reports as an error,
// is not in progress: it is stuck until someone acts, and a hold would
// last as long.
func DeploymentRollout(d *appsv1.Deployment) Rollout {
	if d.Generation > d.Status.ObservedGeneration {
		return Rollout{InProgress: true, Message: "waiting for the deployment spec update to be observed"}
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Reason == progressDeadlineExceeded {
			return Rollout{Message: fmt.Sprintf("deployment %q exceeded its progress deadline", d.Name)}
		}
	}
	st := d.Status
	switch {
	case d.Spec.Replicas != nil && st.UpdatedReplicas < *d.Spec.Replicas:
		return Rollout{InProgress: true, Message: fmt.Sprintf("waiting for deployment %q rollout to finish: %d out of %d new replicas have been updated", d.Name, st.UpdatedReplicas, *d.Spec.Replicas)}
	case st.Replicas > st.UpdatedReplicas:
		return Rollout{InProgress: true, Message: fmt.Sprintf("waiting for deployment %q rollout to finish: %d old replicas are pending termination", d.Name, st.Replicas-st.UpdatedReplicas)}
	case st.AvailableReplicas < st.UpdatedReplicas:
		return Rollout{InProgress: true, Message: fmt.Sprintf("waiting for deployment %q rollout to finish: %d of %d updated replicas are available", d.Name, st.AvailableReplicas, st.UpdatedReplicas)}
	}
	return Rollout{Message: fmt.Sprintf("deployment %q successfully rolled out", d.Name)}
}

// HoldsScaleDown reports whether a decision to go from current to desired
// replicas is held by a rollout in progress: only a scale-down, and not
// one to maxReplicas from above it (the spec's bound applies whatever the
// rollout, as upstream applies it even when metrics fail).
func HoldsScaleDown(current, desired, maxReplicas int32, inProgress bool) bool {
	return inProgress && desired < current && current <= maxReplicas
}
