package replicas

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Config is the controller-wide configuration of the calculator.
type Config struct {
	// CPUInitializationPeriod is --horizontal-pod-autoscaler-cpu-initialization-period.
	CPUInitializationPeriod time.Duration
	// InitialReadinessDelay is --horizontal-pod-autoscaler-initial-readiness-delay.
	InitialReadinessDelay time.Duration
	// PodLevelResources is the PodLevelResources feature gate (beta, on by
	// default since v1.34): when on, pod-level requests are used for whole-pod
	// Resource utilization.
	PodLevelResources bool
}

// DefaultConfig returns the kube-controller-manager defaults: 5m cpu
// initialization period, 30s initial readiness delay, PodLevelResources on.
func DefaultConfig() Config {
	return Config{
		CPUInitializationPeriod: 5 * time.Minute,
		InitialReadinessDelay:   30 * time.Second,
		PodLevelResources:       true,
	}
}

// Groups is the result of GroupPods.
type Groups struct {
	// ReadyCount counts the pods with a sample that are ready.
	ReadyCount int
	// Unready holds pending pods, and for cpu the pods whose sample must not
	// be trusted yet (see GroupPods).
	Unready map[string]bool
	// Missing holds pods that are neither ignored nor pending and have no
	// sample.
	Missing map[string]bool
	// Ignored holds deleted and failed pods.
	Ignored map[string]bool
}

// GroupPods sorts pods as upstream's groupPods does, in this order:
//
//  1. deletionTimestamp set or phase Failed: ignored;
//  2. phase Pending: unready;
//  3. no sample: missing;
//  4. only when resource is cpu (Resource and ContainerResource cpu metrics;
//     pass "" for custom metrics):
//     - no Ready condition or no start time: unready;
//     - now < startTime + CPUInitializationPeriod: unready when Ready is
//     False, or when the sample's timestamp is before Ready's
//     lastTransitionTime + the sample's window;
//     - otherwise: unready when Ready is False and startTime +
//     InitialReadinessDelay is after Ready's lastTransitionTime (the pod never
//     became ready);
//  5. otherwise ready.
func (c Config) GroupPods(pods []Pod, samples PodSamples, resource corev1.ResourceName, now time.Time) Groups {
	g := Groups{Unready: map[string]bool{}, Missing: map[string]bool{}, Ignored: map[string]bool{}}
	for _, pod := range pods {
		if pod.Deleted || pod.Phase == corev1.PodFailed {
			g.Ignored[pod.Name] = true
			continue
		}
		if pod.Phase == corev1.PodPending {
			g.Unready[pod.Name] = true
			continue
		}
		sample, ok := samples[pod.Name]
		if !ok {
			g.Missing[pod.Name] = true
			continue
		}
		if resource == corev1.ResourceCPU && c.cpuSampleUnready(pod, sample, now) {
			g.Unready[pod.Name] = true
			continue
		}
		g.ReadyCount++
	}
	return g
}

func (c Config) cpuSampleUnready(pod Pod, sample Sample, now time.Time) bool {
	if pod.Ready == nil || pod.StartTime == nil {
		return true
	}
	start := *pod.StartTime
	if start.Add(c.CPUInitializationPeriod).After(now) {
		return pod.Ready.Status == corev1.ConditionFalse ||
			sample.Timestamp.Before(pod.Ready.LastTransitionTime.Add(sample.Window))
	}
	return pod.Ready.Status == corev1.ConditionFalse &&
		start.Add(c.InitialReadinessDelay).After(pod.Ready.LastTransitionTime)
}

// ReadyPodCount counts pods in phase Running whose Ready condition is True, as
// the Object and External Value calculations do. An empty list is an error.
func ReadyPodCount(pods []Pod) (int64, error) {
	if len(pods) == 0 {
		return 0, errNoPods
	}
	var n int64
	for _, p := range pods {
		if p.Phase == corev1.PodRunning && p.Ready != nil && p.Ready.Status == corev1.ConditionTrue {
			n++
		}
	}
	return n, nil
}
