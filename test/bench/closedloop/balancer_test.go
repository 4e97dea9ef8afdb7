package closedloop

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tidal-autoscaler/tidal/test/exporter"
	"github.com/tidal-autoscaler/tidal/test/harness"
)

// balancer spreads a demand (requests per second) evenly over the ready
// pods of one Deployment, as a load balancer in front of them would: each
// ready pod's request counter grows at demand/ready per second; pods that
// are not ready or gone have no series.
type balancer struct {
	client    kubernetes.Interface
	ex        *exporter.Exporter
	namespace string
	selector  string

	// mu serializes steps; demand and serving belong to it.
	mu      sync.Mutex
	demand  float64
	serving map[string]bool
}

func newBalancer(client kubernetes.Interface, ex *exporter.Exporter, namespace, app string) *balancer {
	return &balancer{client: client, ex: ex, namespace: namespace, selector: "app=" + app, serving: map[string]bool{}}
}

// set changes the demand and applies it to the pods at once; it returns
// the instant the first counter started growing at its new share (zero
// when the pods could not be listed: run applies it at its next step).
func (b *balancer) set(ctx context.Context, perSecond float64) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.demand = perSecond
	return b.stepLocked(ctx)
}

// run steps every period until ctx ends.
func (b *balancer) run(ctx context.Context, period time.Duration) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		b.mu.Lock()
		b.stepLocked(ctx)
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// stepLocked lists the pods and sets each ready pod's share. A failed
// list keeps the previous shares.
func (b *balancer) stepLocked(ctx context.Context) time.Time {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	pods, err := b.client.CoreV1().Pods(b.namespace).List(ctx, metav1.ListOptions{LabelSelector: b.selector})
	if err != nil {
		return time.Time{}
	}
	ready := map[string]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp == nil && harness.PodReady(p) {
			ready[p.Name] = true
		}
	}
	applied := time.Now()
	for pod := range ready {
		b.ex.SetCounterRate(requestCounter, exporter.Labels{"namespace": b.namespace, "pod": pod}, b.demand/float64(len(ready)))
	}
	for pod := range b.serving {
		if !ready[pod] {
			b.ex.DeletePod(b.namespace, pod)
		}
	}
	b.serving = ready
	return applied
}
