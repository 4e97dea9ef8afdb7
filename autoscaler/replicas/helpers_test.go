package replicas

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const cpu = corev1.ResourceCPU

func tp(t time.Time) *time.Time { return &t }

// readyPod is Running, started 20 minutes ago (past the 5m cpu
// initialization period) and Ready since 19 minutes, with one container
// requesting reqMilli of cpu.
func readyPod(name string, reqMilli int64) Pod {
	return Pod{
		Name:       name,
		Phase:      corev1.PodRunning,
		StartTime:  tp(testNow.Add(-20 * time.Minute)),
		Ready:      &ReadyCondition{Status: corev1.ConditionTrue, LastTransitionTime: testNow.Add(-19 * time.Minute)},
		Containers: []Container{{Name: "app", Requests: map[corev1.ResourceName]int64{cpu: reqMilli}}},
	}
}

// neverReadyPod started 20 minutes ago and has been unready since it started
// (transition within the initial readiness delay): unready for cpu.
func neverReadyPod(name string, reqMilli int64) Pod {
	p := readyPod(name, reqMilli)
	p.Ready = &ReadyCondition{Status: corev1.ConditionFalse, LastTransitionTime: *p.StartTime}
	return p
}

func withPhase(p Pod, phase corev1.PodPhase) Pod {
	p.Phase = phase
	return p
}

// sample is a cpu sample taken just now over a one minute window.
func sample(v int64) Sample {
	return Sample{Value: v, Timestamp: testNow, Window: time.Minute}
}

func samples(kv ...any) PodSamples {
	s := PodSamples{}
	for i := 0; i < len(kv); i += 2 {
		s[kv[i].(string)] = sample(int64(kv[i+1].(int)))
	}
	return s
}

func tol(t float64) Tolerances { return Tolerances{Down: t, Up: t} }
