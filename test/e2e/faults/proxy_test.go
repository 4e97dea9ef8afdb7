package faults

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/test/harness"
)

// The fault proxy's modes.
const (
	normal  = "normal"  // pass everything to Prometheus
	hang    = "hang"    // accept and never answer
	garbage = "garbage" // 200 with a body that is not Prometheus' JSON
	huge    = "huge"    // 200 with a 1 GiB body, written as fast as it is read
)

// hugeBytes is what huge offers.
const hugeBytes = 1 << 30

// faultProxy stands between the adapter and Prometheus on 127.0.0.1.
type faultProxy struct {
	ln    net.Listener
	srv   *http.Server
	rp    *httputil.ReverseProxy
	mode  atomic.Value // string
	sent  atomic.Int64 // bytes huge wrote, across requests
	close chan struct{}
	once  sync.Once
}

func newFaultProxy(prometheus string) (*faultProxy, error) {
	target, err := url.Parse(prometheus)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &faultProxy{ln: ln, rp: httputil.NewSingleHostReverseProxy(target), close: make(chan struct{})}
	p.mode.Store(normal)
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

func (p *faultProxy) URL() string { return "http://" + p.ln.Addr().String() }

func (p *faultProxy) set(mode string) { p.mode.Store(mode) }

func (p *faultProxy) Close() {
	p.once.Do(func() { close(p.close) })
	_ = p.srv.Close()
}

func (p *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch p.mode.Load().(string) {
	case hang:
		select {
		case <-r.Context().Done():
		case <-p.close:
		}
	case garbage:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("<html>502 Bad Gateway</html> {\"status\":"))
	case huge:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[`))
		item := []byte(`{"metric":{"pod":"web-0000000000000000000000000000000000000"},"value":[1700000000,"1"]},`)
		for n := int64(0); n < hugeBytes; n += int64(len(item)) {
			if _, err := w.Write(item); err != nil {
				return
			}
			p.sent.Add(int64(len(item)))
		}
	default:
		p.rp.ServeHTTP(w, r)
	}
}

// autoscalerState is the HorizontalAutoscaler's status and the
// Deployment's replicas.
func autoscalerState(ctx context.Context, name string) (*v1alpha1.HorizontalAutoscaler, int32, error) {
	ha, err := harness.GetHorizontalAutoscaler(ctx, env.dyn, ns, name)
	if err != nil {
		return nil, 0, err
	}
	d, err := env.h.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, 0, err
	}
	return ha, ptr.Deref(d.Spec.Replicas, 1), nil
}

// condition is the HorizontalAutoscaler's condition of type typ.
func condition(ha *v1alpha1.HorizontalAutoscaler, typ string) (status, reason, message string) {
	for _, c := range ha.Status.Conditions {
		if string(c.Type) == typ {
			return string(c.Status), c.Reason, c.Message
		}
	}
	return "", "", ""
}

// steady succeeds when the autoscaler reads its metric and holds the
// app's Deployment at replicas.
func steady(ctx context.Context) error { return steadyNamed(ctx, app) }

func steadyNamed(ctx context.Context, name string) error {
	ha, r, err := autoscalerState(ctx, name)
	if err != nil {
		return err
	}
	if s, reason, msg := condition(ha, "ScalingActive"); s != string(corev1.ConditionTrue) {
		return fmt.Errorf("ScalingActive %s %s: %s", s, reason, msg)
	}
	if r != replicas || ha.Status.DesiredReplicas != replicas {
		return fmt.Errorf("replicas %d, desired %d, want %d", r, ha.Status.DesiredReplicas, replicas)
	}
	return nil
}

// events are the Events of the HorizontalAutoscaler NAME with reason since
// t. client-go's event correlator lets an object have a burst of 25 events
// and then one per 5 minutes, as for kube-controller-manager: tests that
// need events of their own use an object of their own.
func events(ctx context.Context, name, reason string, since time.Time) ([]string, error) {
	l, err := env.h.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",reason=" + reason})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range l.Items {
		last := e.LastTimestamp.Time
		if last.IsZero() {
			last = e.EventTime.Time
		}
		if !last.Before(since.Truncate(time.Second)) && strings.Contains(e.InvolvedObject.Kind, "Autoscaler") {
			out = append(out, e.Type+" "+e.Message)
		}
	}
	return out, nil
}
