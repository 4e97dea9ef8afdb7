// Package extensions is the end-to-end test of what a HorizontalAutoscaler
// adds to upstream's decision (spec.dryRun, spec.fallback,
// spec.holdScaleDownDuringRollout) and of `tidal autoscale` and
// `tidal explain`: the real tidal binary against the harness's control
// plane, kwok pods, kube-controller-manager's Deployment and ReplicaSet
// controllers, and the test metrics server serving the values each test
// sets. spec.scaleDownPodSelection has its own package, test/e2e/podselection.
package extensions
