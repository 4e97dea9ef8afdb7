// Package peerdiff runs Tidal's adapter and prometheus-adapter v0.12 side by
// side on one rule file (prometheus-adapter's legacy default rules, with
// the external rules of its sample configuration), one Prometheus and one
// cluster, asks both the same requests and fails on any difference in their
// answers that docs/compatibility.md does not list.
//
// Both servers are asked directly on their ports, one right after the
// other, as the HPA controller's identity: the aggregator only proxies, and
// asking both within the same moment keeps rate() values comparable.
package peerdiff

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/test/exporter"
	"github.com/tidal-autoscaler/tidal/test/harness"
)

const (
	ns    = "diff"
	other = "other" // a namespace with no objects and no series
	// scrapeJob is the job label Prometheus gives every series; under the
	// legacy rules' `<<.Resource>>` template it names a batch/v1 Job, which
	// the setup creates so both servers can answer for it.
	scrapeJob = "tidal-harness-exporter"
	// gonePod has series but no Pod.
	gonePod = "gone-0"
)

var env struct {
	h            *harness.Harness
	peer, tidal  *harness.Adapter
	pods         []string
	setupErr     error
	relistPeriod time.Duration
}

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	h, err := setup(ctx)
	cancel()
	env.h, env.setupErr = h, err
	code := harness.RunTests(m)
	if h != nil {
		h.StopShared(code != 0 || env.setupErr != nil)
	}
	os.Exit(code)
}

func setup(ctx context.Context) (*harness.Harness, error) {
	tidal, err := harness.TidalBinary(ctx)
	if err != nil {
		return nil, err
	}
	h, err := harness.Start(ctx, harness.Full())
	if err != nil {
		return nil, err
	}
	for _, n := range []string{ns, other} {
		if err := h.EnsureNamespace(ctx, n); err != nil {
			return h, err
		}
	}
	if _, err := h.Client.AppsV1().Deployments(ns).Create(ctx, harness.Deployment(ns, "web", 2), metav1.CreateOptions{}); err != nil {
		return h, err
	}
	pods, err := h.WaitDeploymentReady(ctx, ns, "web", 90*time.Second)
	if err != nil {
		return h, err
	}
	for _, p := range pods {
		env.pods = append(env.pods, p.Name)
	}
	sort.Strings(env.pods)
	if err := createObjects(ctx, h); err != nil {
		return h, err
	}
	setSeries(h)

	// Both servers discover once at start (prometheus-adapter) or soon
	// after: wait until Prometheus has every series and a full rate window.
	if err := harness.WaitReady(ctx, nil, "a full 30s rate window", 90*time.Second, func(ctx context.Context) error {
		return promHasWindow(ctx, h)
	}); err != nil {
		return h, err
	}

	rules, err := filepath.Abs("testdata/legacy-config.yaml")
	if err != nil {
		return h, err
	}
	// The same discovery period for both; no query cache in Tidal, as
	// prometheus-adapter has none.
	env.relistPeriod = 5 * time.Second
	relist := fmt.Sprintf("--metrics-relist-interval=%s", env.relistPeriod)
	if env.peer, err = h.StartPrometheusAdapter(ctx, harness.PeerOptions{RuleFile: rules, Args: []string{relist}}); err != nil {
		return h, fmt.Errorf("start prometheus-adapter: %w", err)
	}
	if env.tidal, err = h.StartAdapter(ctx, harness.AdapterOptions{
		Binary: tidal, RuleFile: rules, Args: []string{relist, "--query-cache-ttl=0"},
	}); err != nil {
		return h, fmt.Errorf("start tidal adapter: %w", err)
	}
	return h, nil
}

// createObjects creates the objects the series name besides the web
// Deployment's pods: Service web, Job scrapeJob (suspended: it runs
// nothing).
func createObjects(ctx context.Context, h *harness.Harness) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80}}},
	}
	if _, err := h.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: scrapeJob, Namespace: ns},
		Spec: batchv1.JobSpec{
			Suspend: ptr.To(true),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "job"}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "job", Image: "job"}},
				},
			},
		},
	}
	_, err := h.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	return err
}

// setSeries sets cAdvisor-style and application series that every legacy
// rule matches: container seconds, totals and gauges (with a pause
// container "POD"), an application counter, seconds counter and gauges per
// pod, a Deployment's, a namespace's and a node's gauge, node totals
// (id="/") for metrics.k8s.io, the sample external series, a counter for a
// pod that does not exist and a gauge that is NaN for one pod. Values need
// more than milli-unit precision.
func setSeries(h *harness.Harness) {
	node := h.NodeName
	e := h.Exporter
	for i, p := range env.pods {
		f := float64(i + 1)
		pod := func(extra exporter.Labels) exporter.Labels {
			l := exporter.Labels{"namespace": ns, "pod": p}
			for k, v := range extra {
				l[k] = v
			}
			return l
		}
		e.SetCounterRate(exporter.ContainerCPU, pod(exporter.Labels{"container": "app", "instance": node}), 0.1234567*f)
		e.SetCounterRate(exporter.ContainerCPU, pod(exporter.Labels{"container": "POD", "instance": node}), 0.01)
		e.SetGauge(exporter.ContainerMemory, pod(exporter.Labels{"container": "app", "instance": node}), 50e6*f+123)
		e.SetGauge(exporter.ContainerMemory, pod(exporter.Labels{"container": "POD", "instance": node}), 1<<20)
		e.SetCounterRate("container_network_receive_bytes_total", pod(exporter.Labels{"interface": "eth0"}), 1000.5*f)
		e.SetCounterRate("http_requests_total", pod(exporter.Labels{"service": "web"}), 1.2345*f)
		e.SetCounterRate("process_cpu_seconds_total", pod(nil), 0.0421*f)
		e.SetGauge("app_ratio", pod(nil), 0.3125*f)
		nan := 2.0
		if i == 0 {
			nan = math.NaN()
		}
		e.SetGauge("app_nan", pod(nil), nan)
	}
	e.SetCounterRate("http_requests_total", exporter.Labels{"namespace": ns, "pod": gonePod, "service": "web"}, 0.5)
	e.SetCounterRate(exporter.ContainerCPU, exporter.Labels{"id": "/", "instance": node}, 1.75)
	e.SetGauge(exporter.ContainerMemory, exporter.Labels{"id": "/", "instance": node}, 3.5*(1<<30))
	e.SetGauge("queue_length", exporter.Labels{"namespace": ns, "deployment": "web"}, 7.25)
	e.SetGauge("namespace_quota_ratio", exporter.Labels{"namespace": ns}, 0.875)
	e.SetGauge("node_temperature_celsius", exporter.Labels{"namespace": ns, "node": node}, 41.5)
	e.SetGauge("queue_consumer_lag", exporter.Labels{"namespace": ns, "name": "orders"}, 12)
	e.SetGauge("queue_depth", exporter.Labels{"topic": "t1", "name": "orders"}, 30)
	e.SetGauge("queue_depth", exporter.Labels{"topic": "t2", "name": "billing"}, 5.5)
}
