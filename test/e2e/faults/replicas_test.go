package faults

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/tidal-autoscaler/tidal/test/harness"
)

// endpoints stands in for a Service's endpoints and kube-proxy in front of
// the adapter's replicas: each new connection goes to the next backend of
// the current list, round robin; removing a backend is what the endpoints
// controller does when a pod starts terminating. Connections already open
// stay with their backend, as with kube-proxy.
type endpoints struct {
	ln       net.Listener
	mu       sync.Mutex
	backends []string
	// open counts each backend's open connections.
	open map[string]int
	next atomic.Uint64
	wg   sync.WaitGroup
}

func newEndpoints(backends ...string) (*endpoints, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	e := &endpoints{ln: ln, backends: backends, open: map[string]int{}}
	e.wg.Add(1)
	go e.serve()
	return e, nil
}

func (e *endpoints) port() int { return e.ln.Addr().(*net.TCPAddr).Port }

func (e *endpoints) remove(backend string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, b := range e.backends {
		if b == backend {
			e.backends = append(e.backends[:i:i], e.backends[i+1:]...)
		}
	}
}

func (e *endpoints) pick() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.backends) == 0 {
		return ""
	}
	return e.backends[int(e.next.Add(1))%len(e.backends)]
}

func (e *endpoints) serve() {
	defer e.wg.Done()
	for {
		c, err := e.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			b := e.pick()
			if b == "" {
				return
			}
			up, err := net.Dial("tcp", b)
			if err != nil {
				return
			}
			defer up.Close()
			e.mu.Lock()
			e.open[b]++
			e.mu.Unlock()
			defer func() { e.mu.Lock(); e.open[b]--; e.mu.Unlock() }()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
			go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
			<-done
		}()
	}
}

func (e *endpoints) close() { _ = e.ln.Close(); e.wg.Wait() }

// busiest is the backend with the most open connections: the one the
// aggregator is using.
func (e *endpoints) busiest() (string, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	best, n := "", -1
	for _, b := range e.backends {
		if e.open[b] > n {
			best, n = b, e.open[b]
		}
	}
	return best, n
}

// TestAdapterReplicaLost: two adapter replicas behind one Service; one is
// taken out of the endpoints and stopped, as when its pod is deleted,
// under steady HPA load. No autoscaler sync fails to read its metric and no
// replicas move; a probe through the aggregator reports what it saw.
func TestAdapterReplicaLost(t *testing.T) {
	h := need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bin, err := harness.TidalBinary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A second replica of the adapter the other tests use.
	second, err := h.StartAdapter(ctx, harness.AdapterOptions{
		Binary: bin, RuleFile: filepath.Join(h.Dir, "rules.yaml"),
		Args: []string{"--prometheus-url=" + env.proxy.URL(), "--prometheus-timeout=" + promTimeout.String(), "--metrics-relist-interval=5s", "--query-cache-ttl=0"},
	})
	if err != nil {
		t.Fatal(err)
	}
	first := env.adapter
	ep, err := newEndpoints(hostPort(first.Port), hostPort(second.Port))
	if err != nil {
		t.Fatal(err)
	}
	defer ep.close()
	srv := harness.AggregatedServer{Namespace: first.Namespace, Service: first.ServiceAccount, Port: ep.port(), CABundle: h.CA.CertPEM}
	for _, v := range []string{"v1beta1", "v1beta2"} {
		if err := h.RegisterAPIService(ctx, srv, "custom.metrics.k8s.io", v); err != nil {
			t.Fatal(err)
		}
	}
	if err := harness.WaitReady(ctx, nil, "steady behind both replicas", 2*time.Minute, steady); err != nil {
		t.Fatal(err)
	}

	cfg, err := h.RestConfigFor(harness.HPAServiceAccount)
	if err != nil {
		t.Fatal(err)
	}
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := h.APIServerURL + "/apis/custom.metrics.k8s.io/v1beta2/namespaces/" + ns + "/pods/*/" + metric + "?labelSelector=app%3D" + app
	var reads, failed atomic.Int64
	stop := make(chan struct{})
	var probe sync.WaitGroup
	probe.Add(1)
	go func() {
		defer probe.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			reads.Add(1)
			resp, err := c.Get(path)
			if err != nil {
				failed.Add(1)
				continue
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				failed.Add(1)
			}
		}
	}()
	time.Sleep(3 * time.Second)

	// The pod of the replica the aggregator is connected to is deleted:
	// out of the endpoints, then SIGTERM (it drains its requests and
	// closes its connections).
	victim, survivor := first, second
	busy, conns := ep.busiest()
	if busy == hostPort(second.Port) {
		victim, survivor = second, first
	}
	if conns < 1 {
		t.Fatalf("the aggregator holds no connection to either replica")
	}
	t.Logf("stopping the replica on %s, which holds %d of the aggregator's connections", busy, conns)
	start := time.Now()
	ep.remove(hostPort(victim.Port))
	if err := victim.Process.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	env.adapter = survivor
	// Five sync periods on the second replica alone.
	deadline := time.Now().Add(5 * syncPeriod)
	for time.Now().Before(deadline) {
		ha, r, err := autoscalerState(ctx, app)
		if err != nil {
			t.Fatal(err)
		}
		if s, reason, msg := condition(ha, "ScalingActive"); s != string(corev1.ConditionTrue) {
			t.Errorf("an autoscaler sync failed: ScalingActive %s %s: %s", s, reason, msg)
			break
		}
		if r != replicas {
			t.Fatalf("the Deployment moved to %d replicas", r)
		}
		time.Sleep(200 * time.Millisecond)
	}
	close(stop)
	probe.Wait()
	evs, err := events(ctx, app, "FailedGetPodsMetric", start)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		t.Errorf("an autoscaler sync failed to read its metric after the replica was lost: %s", e)
	}
	t.Logf("probe through the aggregator, 10 reads a second: %d reads, %d failed, while one of two replicas was taken out and stopped", reads.Load(), failed.Load())
}

func hostPort(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
