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

// requestCounter is the series the exporter serves per pod; the rule
// file turns it into the Pods metric http_requests_per_second.
const requestCounter = "http_requests_total"

// balancer spreads a demand (requests per second) evenly over the ready
// pods of the app, as a load balancer in front of them would: each ready
// pod's request counter grows at demand/ready per second; pods that are
// not ready or gone get no series.
type balancer struct {
	client    kubernetes.Interface
	ex        *exporter.Exporter
	namespace string
	selector  string

	mu     sync.Mutex
	demand float64
	// kick asks run for a step now.
	kick chan struct{}

	// serving are the pods that had series at the last step; only run's
	// goroutine uses it.
	serving map[string]bool
}

func newBalancer(client kubernetes.Interface, ex *exporter.Exporter, namespace, app string) *balancer {
	return &balancer{
		client: client, ex: ex, namespace: namespace, selector: "app=" + app,
		kick: make(chan struct{}, 1), serving: map[string]bool{},
	}
}

// setDemand changes the total requests per second; run applies it at once.
func (b *balancer) setDemand(perSecond float64) {
	b.mu.Lock()
	b.demand = perSecond
	b.mu.Unlock()
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// run steps every period, and when the demand changes, until ctx ends.
func (b *balancer) run(ctx context.Context, period time.Duration) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		b.step(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-b.kick:
		}
	}
}

// step lists the pods and sets each ready pod's share. A failed list
// keeps the previous shares.
func (b *balancer) step(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	pods, err := b.client.CoreV1().Pods(b.namespace).List(ctx, metav1.ListOptions{LabelSelector: b.selector})
	if err != nil {
		return
	}
	b.mu.Lock()
	demand := b.demand
	b.mu.Unlock()
	ready := map[string]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp == nil && harness.PodReady(p) {
			ready[p.Name] = true
		}
	}
	for pod := range ready {
		b.ex.SetCounterRate(requestCounter, exporter.Labels{"namespace": b.namespace, "pod": pod}, demand/float64(len(ready)))
	}
	for pod := range b.serving {
		if !ready[pod] {
			b.ex.DeletePod(b.namespace, pod)
		}
	}
	b.serving = ready
}
