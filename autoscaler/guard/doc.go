// Package guard finds the other writers of what an autoscaler writes, so
// that the controller stops acting instead of fighting them:
//
//   - another autoscaler on the same workload (targets.go): an
//     autoscaling/v2 HorizontalPodAutoscaler that scales the workload a
//     HorizontalAutoscaler scales. Two autoscalers on one /scale undo each
//     other's decisions every sync. (Two of tidal's own on one workload
//     select the same pods and get upstream's AmbiguousSelector instead.)
//   - another controller writing a native HPA's status (writers.go), which
//     is how kube-controller-manager's HPA controller, left on beside
//     tidal in native mode, shows itself.
//
// Both answer from informers the controller runs; neither writes anything.
package guard
