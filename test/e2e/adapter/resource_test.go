package adapter

import (
	"context"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/tidal-autoscaler/tidal/test/exporter"
	"github.com/tidal-autoscaler/tidal/test/harness"
)

// resourceRules serve metrics.k8s.io (see exporter.ResourceRules).
const resourceRules = "\n" + exporter.ResourceRules

// The containerQuery and nodeQuery as the adapter renders them for the
// web pods of ns and for the harness node, for the oracle.
func podOracle(format string) string {
	sel := fmt.Sprintf(`{namespace=%q,pod=~%q}`, ns, strings.Join(env.pods, "|"))
	return fmt.Sprintf(`sum by (pod,container,namespace) (`+format+`)`, sel)
}

const (
	nodeCPUSeries = "node_cpu_usage_seconds_total"
	nodeMemSeries = "node_memory_working_set_bytes"
	nodeCores     = 1.75
	nodeBytes     = 3.5 * (1 << 30)
)

// setResourceSeries sets cAdvisor-style series for the web pods: pods[0]
// has an app and a sidecar container, every pod a pause container "POD"
// (never served), and the last pod no memory series (served with cpu
// only). Values need rounding.
func setResourceSeries(h *harness.Harness) {
	for i, p := range env.pods {
		h.Exporter.SetPodCPU(ns, p, "app", 0.1234567891*float64(i+1))
		h.Exporter.SetPodCPU(ns, p, "POD", 0.5)
		h.Exporter.SetPodMemory(ns, p, "POD", 1<<20)
		if i != len(env.pods)-1 {
			h.Exporter.SetPodMemory(ns, p, "app", 50e6*float64(i+1)+123)
		}
	}
	h.Exporter.SetPodCPU(ns, env.pods[0], "sidecar", 0.0105)
	h.Exporter.SetPodMemory(ns, env.pods[0], "sidecar", 1234567)
	h.Exporter.SetCounterRate(nodeCPUSeries, exporter.Labels{"node": h.NodeName}, nodeCores)
	h.Exporter.SetGauge(nodeMemSeries, exporter.Labels{"node": h.NodeName}, nodeBytes)
}

// oracle is Prometheus' own answer for a query at ts, by pod/container.
func oracle(t *testing.T, query string, ts time.Time) map[string]float64 {
	t.Helper()
	vec, err := promQuery(context.Background(), env.h, query, ts)
	if err != nil {
		t.Fatalf("oracle %s: %v", query, err)
	}
	out := map[string]float64{}
	for _, s := range vec {
		out[string(s.Metric["pod"])+"/"+string(s.Metric["container"])+string(s.Metric["node"])] = float64(s.Value)
	}
	return out
}

func nanocores(q resource.Quantity) int64 { return q.ScaledValue(resource.Nano) }

// closeCPU says whether the adapter's cpu matches Prometheus' cores. The
// API serializes timestamps to the second, so the adapter evaluated its
// query somewhere in the second after the timestamp: its value must lie
// between Prometheus' values at both ends of that second (rate() moves
// monotonically there), give or take 1% for scrape jitter.
func closeCPU(q resource.Quantity, cores, coresNext float64) bool {
	got := float64(nanocores(q)) / 1e9
	lo, hi := math.Min(cores, coresNext), math.Max(cores, coresNext)
	slack := math.Max(1e-6, 0.01*hi)
	return got >= lo-slack && got <= hi+slack
}

// waitSteadyCPU waits until the cpu counters have a full, gap-free 30 s
// rate window again. TestPrometheusOutage restarts Prometheus: while the
// window straddles the outage, rate() is right (the counters kept
// counting), but once only post-restart samples remain and they do not yet
// cover the window, rate() reads low for up to 30 s. So first wait for 35 s
// of scrapes without a gap, then for the values.
func waitSteadyCPU(t *testing.T) {
	t.Helper()
	err := harness.WaitReady(context.Background(), nil, "35 s of scrapes without a gap", 2*time.Minute, func(ctx context.Context) error {
		v, err := promQuery(ctx, env.h, `count_over_time(up{job="tidal-harness-exporter"}[35s])`, time.Now())
		if err != nil {
			return err
		}
		// One scrape a second; allow a few late ones on a loaded machine.
		if len(v) != 1 || float64(v[0].Value) < 32 {
			return fmt.Errorf("scrapes in the last 35 s: %v", v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = harness.WaitReady(context.Background(), nil, "steady cpu rates", 90*time.Second, func(ctx context.Context) error {
		for q, want := range map[string]float64{
			fmt.Sprintf(`sum(rate(%s{pod=%q,container="app"}[30s]))`, exporter.ContainerCPU, env.pods[0]): 0.1234567891,
			fmt.Sprintf(`sum(rate(%s{node=%q}[30s]))`, nodeCPUSeries, env.h.NodeName):                     nodeCores,
		} {
			// Steady two seconds ago too: the oracle evaluates up to a second
			// before the adapter.
			v, err := promQuery(ctx, env.h, q, time.Now().Add(-2*time.Second))
			if err != nil {
				return err
			}
			if len(v) != 1 || math.Abs(float64(v[0].Value)-want) > 0.001*want {
				return fmt.Errorf("%s: got %v, want %v", q, v, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestResourceMetricsPods reads PodMetrics as the HPA does, in JSON and
// in protobuf (what kube-controller-manager's clients ask for).
func TestResourceMetricsPods(t *testing.T) {
	need(t)
	waitSteadyCPU(t)
	for _, ct := range []string{"application/json", protobuf} {
		t.Run(ct, func(t *testing.T) {
			cfg, seen := asControllerManager(t, ct, "/apis/metrics.k8s.io/")
			testResourceMetricsPods(t, metricsclient.NewForConfigOrDie(cfg))
			if types := seen.all(); !slices.Equal(types, []string{ct}) {
				t.Errorf("PodMetrics answers were %v, want %s", types, ct)
			}
		})
	}
}

func testResourceMetricsPods(t *testing.T, hpa metricsclient.Interface) {
	mc := hpa.MetricsV1beta1()
	ctx := context.Background()

	// The HPA's own call: list the pods of a namespace by label selector.
	list, err := mc.PodMetricses(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatalf("list PodMetrics as the HPA: %v", err)
	}
	if len(list.Items) != len(env.pods) {
		t.Fatalf("got %d PodMetrics, want one per web pod (%v): %+v", len(list.Items), env.pods, list.Items)
	}
	byPod := map[string]metricsv1beta1.PodMetrics{}
	for _, m := range list.Items {
		byPod[m.Name] = m
		if m.Window.Duration != 30*time.Second {
			t.Errorf("%s: window %v, want 30s", m.Name, m.Window.Duration)
		}
		if age := time.Since(m.Timestamp.Time); age < 0 || age > time.Minute {
			t.Errorf("%s: timestamp %v is not a recent sample's", m.Name, m.Timestamp)
		}
		if m.Labels["app"] != "web" {
			t.Errorf("%s: labels %v", m.Name, m.Labels)
		}
	}

	for i, p := range env.pods {
		m, ok := byPod[p]
		if !ok {
			t.Errorf("no PodMetrics for %s", p)
			continue
		}
		cpuQuery := podOracle("rate(" + exporter.ContainerCPU + "%s[30s])")
		cpuWant, cpuWantNext := oracle(t, cpuQuery, m.Timestamp.Time), oracle(t, cpuQuery, m.Timestamp.Add(time.Second))
		memWant := oracle(t, podOracle(exporter.ContainerMemory+"%s"), m.Timestamp.Time)
		wantContainers := []string{"app"}
		if i == 0 {
			wantContainers = []string{"app", "sidecar"}
		}
		var got []string
		for _, c := range m.Containers {
			got = append(got, c.Name)
			key := p + "/" + c.Name
			cpu, ok := c.Usage[corev1.ResourceCPU]
			if !ok {
				t.Errorf("%s: no cpu", key)
			} else if want, ok := cpuWant[key]; !ok || !closeCPU(cpu, want, cpuWantNext[key]) {
				t.Errorf("%s: cpu %s (%dn), Prometheus says %v to %v cores in the second from %s", key, cpu.String(), nanocores(cpu), want, cpuWantNext[key], m.Timestamp.Time)
			}
			mem, hasMem := c.Usage[corev1.ResourceMemory]
			want, promHas := memWant[key]
			switch {
			case hasMem != promHas:
				t.Errorf("%s: memory present %v, Prometheus has a series %v", key, hasMem, promHas)
			case hasMem && math.Abs(float64(mem.Value())-want) > 0.5:
				t.Errorf("%s: memory %s, Prometheus says %v", key, mem.String(), want)
			}
		}
		if strings.Join(got, ",") != strings.Join(wantContainers, ",") {
			t.Errorf("%s: containers %v, want %v (no POD, no empty name)", p, got, wantContainers)
		}
	}
	if last := byPod[env.pods[len(env.pods)-1]]; len(last.Containers) == 1 {
		if _, ok := last.Containers[0].Usage[corev1.ResourceMemory]; ok {
			t.Errorf("the pod without memory series is served a memory usage: %v", last.Containers[0].Usage)
		}
	}

	// Field selectors and single gets work too (get as admin: the HPA's
	// role only lists).
	fl, err := mc.PodMetricses(ns).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + env.pods[1]})
	if err != nil || len(fl.Items) != 1 || fl.Items[0].Name != env.pods[1] {
		t.Errorf("field selector list: %v, %+v", err, fl)
	}
	admin := metricsclient.NewForConfigOrDie(env.h.Admin).MetricsV1beta1()
	one, err := admin.PodMetricses(ns).Get(ctx, env.pods[0], metav1.GetOptions{})
	if err != nil || len(one.Containers) != 2 {
		t.Errorf("get %s: %v, %+v", env.pods[0], err, one)
	}
	if _, err := admin.PodMetricses(ns).Get(ctx, "no-such-pod", metav1.GetOptions{}); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("get of a missing pod: %v, want not found", err)
	}
}

func TestResourceMetricsNode(t *testing.T) {
	need(t)
	ctx := context.Background()
	waitSteadyCPU(t)
	// The HPA's role does not cover NodeMetrics; read them as kubectl top
	// node does, as an admin.
	mc := metricsclient.NewForConfigOrDie(env.h.Admin).MetricsV1beta1()
	var m *metricsv1beta1.NodeMetrics
	if err := harness.WaitReady(ctx, nil, "node series", 30*time.Second, func(ctx context.Context) error {
		var err error
		m, err = mc.NodeMetricses().Get(ctx, env.h.NodeName, metav1.GetOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	nodeCPUQuery := fmt.Sprintf(`sum by (node) (rate(%s{node=%q}[30s]))`, nodeCPUSeries, env.h.NodeName)
	cpuWant := oracle(t, nodeCPUQuery, m.Timestamp.Time)["/"+env.h.NodeName]
	cpuWantNext := oracle(t, nodeCPUQuery, m.Timestamp.Add(time.Second))["/"+env.h.NodeName]
	memWant := oracle(t, fmt.Sprintf(`sum by (node) (%s{node=%q})`, nodeMemSeries, env.h.NodeName), m.Timestamp.Time)["/"+env.h.NodeName]
	cpu, mem := m.Usage[corev1.ResourceCPU], m.Usage[corev1.ResourceMemory]
	if !closeCPU(cpu, cpuWant, cpuWantNext) || math.Abs(cpuWant-nodeCores) > 0.1*nodeCores {
		t.Errorf("node cpu %s, Prometheus says %v (set %v)", cpu.String(), cpuWant, nodeCores)
	}
	if float64(mem.Value()) != memWant || memWant != nodeBytes {
		t.Errorf("node memory %s, Prometheus says %v (set %v)", mem.String(), memWant, float64(nodeBytes))
	}
	list, err := mc.NodeMetricses().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok"})
	if err != nil || len(list.Items) != 1 {
		t.Errorf("list nodes by label: %v, %+v", err, list)
	}
}

func TestKubectlTop(t *testing.T) {
	h := need(t)
	kubectl := filepath.Join(h.ToolsDir(), "kubectl")
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(kubectl, append([]string{"--kubeconfig", h.AdminKubeconfig}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
		t.Logf("kubectl %s:\n%s", strings.Join(args, " "), out)
		return string(out)
	}

	waitSteadyCPU(t)
	out := run("top", "pod", "-n", ns)
	rows := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) == 3 {
			rows[f[0]] = f[1:]
		}
	}
	for i, p := range env.pods {
		r, ok := rows[p]
		if !ok {
			t.Errorf("kubectl top pod does not list %s", p)
			continue
		}
		// CPU in millicores (app, plus the sidecar for pods[0]; never the
		// 500m pause container); kubectl rounds each value up.
		wantCPU := int64(math.Ceil(0.1234567891 * float64(i+1) * 1000))
		if i == 0 {
			wantCPU += int64(math.Ceil(0.0105 * 1000))
		}
		var gotCPU int64
		if _, err := fmt.Sscanf(r[0], "%dm", &gotCPU); err != nil || math.Abs(float64(gotCPU-wantCPU)) > math.Max(2, 0.1*float64(wantCPU)) {
			t.Errorf("%s: CPU %s, want about %dm", p, r[0], wantCPU)
		}
		wantMem := "0Mi" // the pod without memory series
		if i != len(env.pods)-1 {
			b := 50e6*float64(i+1) + 123
			if i == 0 {
				b += 1234567
			}
			wantMem = fmt.Sprintf("%dMi", int64(b)/(1<<20))
		}
		if r[1] != wantMem {
			t.Errorf("%s: MEMORY %s, want %s", p, r[1], wantMem)
		}
	}

	out = run("top", "node")
	// The rate of the exporter's counter wobbles (more so after
	// TestPrometheusOutage's restart), and kubectl rounds up.
	var nodeCPU int64
	found := false
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[0] == h.NodeName {
			found = true
			if _, err := fmt.Sscanf(f[1], "%dm", &nodeCPU); err != nil || math.Abs(float64(nodeCPU)-1750) > 175 || f[3] != "3584Mi" {
				t.Errorf("kubectl top node shows %s at %s and %s, want about 1750m and 3584Mi", f[0], f[1], f[3])
			}
		}
	}
	if !found {
		t.Errorf("kubectl top node does not list %s:\n%s", h.NodeName, out)
	}
}

// metrics.k8s.io v1 (KEP-5207), which kubectl top asks for first, answers
// as v1beta1 does through the aggregator: the same pods, containers and
// usage (within what the counter moves between the two reads), and nodes.
func TestResourceMetricsV1(t *testing.T) {
	h := need(t)
	waitSteadyCPU(t)
	ctx := context.Background()
	mc := metricsclient.NewForConfigOrDie(h.Admin)
	v1, err := mc.MetricsV1().PodMetricses(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatalf("list v1 PodMetrics: %v", err)
	}
	beta, err := mc.MetricsV1beta1().PodMetricses(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatalf("list v1beta1 PodMetrics: %v", err)
	}
	usage := map[string]float64{}
	for _, m := range beta.Items {
		for _, c := range m.Containers {
			usage[m.Name+"/"+c.Name+"/cpu"] = c.Usage.Cpu().AsApproximateFloat64()
			usage[m.Name+"/"+c.Name+"/memory"] = c.Usage.Memory().AsApproximateFloat64()
		}
	}
	got := 0
	for _, m := range v1.Items {
		if m.APIVersion != "" && m.APIVersion != "metrics.k8s.io/v1" {
			t.Errorf("%s: apiVersion %s", m.Name, m.APIVersion)
		}
		if m.Window.Duration != 30*time.Second {
			t.Errorf("%s: window %v, want 30s", m.Name, m.Window.Duration)
		}
		for _, c := range m.Containers {
			for res, q := range map[string]float64{"cpu": c.Usage.Cpu().AsApproximateFloat64(), "memory": c.Usage.Memory().AsApproximateFloat64()} {
				k := m.Name + "/" + c.Name + "/" + res
				want, ok := usage[k]
				if !ok {
					t.Errorf("v1 has %s, v1beta1 does not", k)
					continue
				}
				got++
				if math.Abs(q-want) > 0.02*math.Max(want, 1e-3) {
					t.Errorf("%s: v1 %v, v1beta1 %v", k, q, want)
				}
			}
		}
	}
	if got != len(usage) {
		t.Errorf("v1 has %d container usages, v1beta1 %d", got, len(usage))
	}
	node, err := mc.MetricsV1().NodeMetricses().Get(ctx, h.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get v1 NodeMetrics: %v", err)
	}
	if mem := node.Usage.Memory().Value(); mem != nodeBytes {
		t.Errorf("v1 node memory %d, want %d", mem, int64(nodeBytes))
	}
}
