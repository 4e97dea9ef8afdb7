// Package podselection is the end-to-end test of
// spec.scaleDownPodSelection: tidal's autoscaler sets
// controller.kubernetes.io/pod-deletion-cost on a Deployment's pods before
// scaling it down, and the real kube-controller-manager's ReplicaSet
// controller removes the least loaded pods, so the busiest remain.
package podselection
