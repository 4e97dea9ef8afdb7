package harness_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/test/harness"
)

// TestSmoke starts every part of the harness and checks each does its job:
// the apiserver serves, a Deployment gets Ready pods through the scheduler
// and kwok, Prometheus returns rate() of the exporter's series, and an
// APIService backed by `tidal adapter` on loopback becomes Available.
func TestSmoke(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	tidal, err := harness.TidalBinary(ctx)
	if err != nil {
		t.Fatal(err)
	}

	started := time.Now()
	opts := harness.Full()
	opts.HPAController = true
	h := harness.StartT(t, opts)
	t.Logf("harness started in %s", time.Since(started).Round(time.Millisecond))

	t.Run("apiserver serves the admin", func(t *testing.T) {
		v, err := h.Client.Discovery().ServerVersion()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(v.GitVersion, "v1.") {
			t.Fatalf("server version %q is not stamped; kubectl and helm would refuse it", v.GitVersion)
		}
	})

	const ns = "smoke"
	var podNames []string
	t.Run("deployment gets ready pods through kwok", func(t *testing.T) {
		if err := h.EnsureNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
		if _, err := h.Client.AppsV1().Deployments(ns).Create(ctx, harness.Deployment(ns, "web", 3), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pods, err := h.WaitDeploymentReady(ctx, ns, "web", 60*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods {
			if p.Spec.NodeName != h.NodeName {
				t.Errorf("pod %s runs on %q, want the kwok node %q", p.Name, p.Spec.NodeName, h.NodeName)
			}
			podNames = append(podNames, p.Name)
		}
	})

	t.Run("prometheus returns rate of the exporter's series", func(t *testing.T) {
		if len(podNames) == 0 {
			t.Skip("no pods: the deployment step failed")
		}
		want := map[string]float64{}
		for i, name := range podNames {
			cores := 0.1 * float64(i+1)
			want[name] = cores
			h.Exporter.SetPodCPU(ns, name, "app", cores)
		}
		client, err := promapi.NewClient(promapi.Config{Address: h.PrometheusURL})
		if err != nil {
			t.Fatal(err)
		}
		api := promv1.NewAPI(client)
		query := fmt.Sprintf(`sum by (pod) (rate(%s{namespace=%q}[10s]))`, "container_cpu_usage_seconds_total", ns)
		err = harness.WaitReady(ctx, nil, "rate() of the exporter's CPU series", 60*time.Second, func(ctx context.Context) error {
			v, _, err := api.Query(ctx, query, time.Now())
			if err != nil {
				return err
			}
			vec, ok := v.(model.Vector)
			if !ok || len(vec) != len(want) {
				return fmt.Errorf("got %v, want %d series", v, len(want))
			}
			for _, s := range vec {
				pod := string(s.Metric["pod"])
				// The exporter's counters grow at exactly the set rate; a
				// 1 s scrape over a 10 s window leaves only timing jitter.
				if got := float64(s.Value); math.Abs(got-want[pod]) > 0.05*want[pod] {
					return fmt.Errorf("pod %s: rate %v, want %v", pod, got, want[pod])
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})

	t.Run("an added scrape job's series reach Prometheus", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			fmt.Fprintln(w, `smoke_added_job{pod="a"} 7`)
		}))
		defer srv.Close()
		job := harness.ScrapeJob{Name: "smoke-added", Target: strings.TrimPrefix(srv.URL, "http://"), Interval: 2 * time.Second, Timeout: 2 * time.Second}
		if err := h.AddScrapeJob(ctx, job); err != nil {
			t.Fatal(err)
		}
		if err := h.AddScrapeJob(ctx, harness.ScrapeJob{Name: "bad", Target: job.Target, Interval: time.Second, Timeout: 2 * time.Second}); err == nil {
			t.Error("AddScrapeJob took a timeout longer than the interval")
		}
		client, err := promapi.NewClient(promapi.Config{Address: h.PrometheusURL})
		if err != nil {
			t.Fatal(err)
		}
		api := promv1.NewAPI(client)
		err = harness.WaitReady(ctx, nil, "the added job's series", 30*time.Second, func(ctx context.Context) error {
			v, _, err := api.Query(ctx, `smoke_added_job{job="smoke-added",pod="a"}`, time.Now())
			if err != nil {
				return err
			}
			if vec, ok := v.(model.Vector); !ok || len(vec) != 1 || vec[0].Value != 7 {
				return fmt.Errorf("got %v, want one sample of 7", v)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// The exporter's job is still there.
		v, _, err := api.Query(ctx, `up{job="tidal-harness-exporter"}`, time.Now())
		if vec, ok := v.(model.Vector); err != nil || !ok || len(vec) != 1 || vec[0].Value != 1 {
			t.Errorf("exporter's job after the reload: %v, %v", v, err)
		}
	})

	t.Run("aggregated API on loopback becomes available", func(t *testing.T) {
		runAdapter(ctx, t, h, tidal)
	})

	t.Run("a server whose port was taken starts again on new ports", func(t *testing.T) {
		// CI's packages run in parallel: another one's server can bind a
		// port between the harness choosing it and its server binding it.
		taken, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer taken.Close()
		takenPort := taken.Addr().(*net.TCPAddr).Port
		choices := 0
		restore := harness.HandOutPorts(func(n int) ([]int, error) {
			if choices++; choices == 1 {
				return []int{takenPort}, nil
			}
			return harness.FreePorts(n)
		})
		defer restore()
		a, err := h.StartAdapter(ctx, harness.AdapterOptions{Binary: tidal, Namespace: "port-clash"})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = a.Process.Stop(10 * time.Second) }()
		if a.Port == takenPort || choices != 2 {
			t.Errorf("adapter on port %d after %d choices; want a port other than the taken %d, after 2", a.Port, choices, takenPort)
		}
		if log, err := os.ReadFile(a.Process.LogPath()); err != nil || !strings.Contains(string(log), "address already in use") {
			t.Errorf("the first start's log does not show the clash (%v):\n%s", err, a.Process.LogTail())
		}
	})

	t.Run("kubectl and helm accept the server", func(t *testing.T) {
		kubectl := filepath.Join(h.ToolsDir(), "kubectl")
		out := run(t, kubectl, "--kubeconfig", h.AdminKubeconfig, "get", "nodes", "-o", "name")
		if strings.TrimSpace(out) != "node/"+h.NodeName {
			t.Errorf("kubectl get nodes: %q, want node/%s", out, h.NodeName)
		}
		chart := filepath.Join(t.TempDir(), "smoke")
		writeFile(t, filepath.Join(chart, "Chart.yaml"), "apiVersion: v2\nname: smoke\nversion: 0.1.0\nkubeVersion: \">=1.30.0-0\"\n")
		writeFile(t, filepath.Join(chart, "templates", "cm.yaml"),
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: helm-smoke\ndata:\n  k: v\n")
		// helm checks kubeVersion against the server's version: an
		// unstamped server (v0.0.0-master) would fail here.
		run(t, filepath.Join(h.ToolsDir(), "helm"), "--kubeconfig", h.AdminKubeconfig, "install", "smoke", chart, "--namespace", ns, "--wait")
		if _, err := h.Client.CoreV1().ConfigMaps(ns).Get(ctx, "helm-smoke", metav1.GetOptions{}); err != nil {
			t.Fatalf("helm install created no ConfigMap: %v", err)
		}
	})

	t.Run("upstream HPA controller reconciles as its service account", func(t *testing.T) {
		hpa := &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
				MaxReplicas:    5,
				Metrics: []autoscalingv2.MetricSpec{{
					Type: autoscalingv2.ResourceMetricSourceType,
					Resource: &autoscalingv2.ResourceMetricSource{Name: "cpu", Target: autoscalingv2.MetricTarget{
						Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50),
					}},
				}},
			},
		}
		if _, err := h.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, hpa, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// No metrics.k8s.io is registered: the controller reads the scale
		// (AbleToScale) and then fails to get the metric (ScalingActive).
		want := map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{
			autoscalingv2.AbleToScale:   "SucceededGetScale",
			autoscalingv2.ScalingActive: "FailedGetResourceMetric",
		}
		err := harness.WaitReady(ctx, nil, "HPA conditions from the upstream controller", 60*time.Second, func(ctx context.Context) error {
			got, err := h.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			reasons := map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{}
			for _, c := range got.Status.Conditions {
				reasons[c.Type] = c.Reason
			}
			for typ, reason := range want {
				if reasons[typ] != reason {
					return fmt.Errorf("conditions %v, want %v", reasons, want)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// runAdapter runs `tidal adapter` on loopback as its own service account
// (h.StartAdapter), registers v1beta1.custom.metrics.k8s.io for it, and
// checks that the aggregator marks it Available and proxies discovery for
// the HPA's identity.
func runAdapter(ctx context.Context, t *testing.T, h *harness.Harness, tidal string) {
	t.Helper()
	if _, err := h.StartAdapter(ctx, harness.AdapterOptions{
		Binary:      tidal,
		APIServices: [][2]string{{"custom.metrics.k8s.io", "v1beta1"}},
	}); err != nil {
		t.Fatal(err)
	}
	hpa, err := h.RestConfigFor(harness.HPAServiceAccount)
	if err != nil {
		t.Fatal(err)
	}
	hpaClient, err := kubernetes.NewForConfig(hpa)
	if err != nil {
		t.Fatal(err)
	}
	res, err := hpaClient.Discovery().ServerResourcesForGroupVersion("custom.metrics.k8s.io/v1beta1")
	if err != nil {
		t.Fatalf("discovery of custom.metrics.k8s.io/v1beta1 through the aggregator as the HPA: %v", err)
	}
	if res.GroupVersion != "custom.metrics.k8s.io/v1beta1" {
		t.Fatalf("group version %q", res.GroupVersion)
	}
}

// leftovers is what a child test reports about the harness it started.
type leftovers struct {
	PIDs  map[string]int
	Ports []int
	Dir   string
}

// TestNothingLeftBehind runs a test that fails, and one that is killed, each
// in a child process with a harness started, and checks that no server
// process and no listening port survives either.
func TestNothingLeftBehind(t *testing.T) {
	tests := []struct {
		name string
		mode string
		// kill: SIGKILL the child once its harness is up instead of letting it fail.
		kill bool
	}{
		{name: "test fails", mode: "fail"},
		{name: "test process killed", mode: "hang", kill: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			report := filepath.Join(t.TempDir(), "report.json")
			cmd := exec.Command(os.Args[0], "-test.run=^TestChildWithHarness$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), "TIDAL_HARNESS_CHILD="+tt.mode, "TIDAL_HARNESS_REPORT="+report)
			out := &strings.Builder{}
			cmd.Stdout, cmd.Stderr = out, out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if tt.kill {
				if err := harness.WaitReady(context.Background(), nil, "child harness", 3*time.Minute, func(context.Context) error {
					_, err := os.Stat(report)
					return err
				}); err != nil {
					_ = cmd.Process.Kill()
					t.Fatalf("%v\n%s", err, out)
				}
				_ = cmd.Process.Signal(syscall.SIGKILL)
			}
			err := cmd.Wait()
			if err == nil {
				t.Fatalf("child test passed; it was meant to fail or be killed:\n%s", out)
			}
			data, rerr := os.ReadFile(report)
			if rerr != nil {
				t.Fatalf("child wrote no report (%v):\n%s", rerr, out)
			}
			var got leftovers
			if err := json.Unmarshal(data, &got); err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(got.Dir)
			if len(got.PIDs) < 3 {
				t.Fatalf("child reported %d processes, want the whole harness: %v", len(got.PIDs), got.PIDs)
			}
			// Pdeathsig delivers SIGKILL as the child dies; give the kernel a moment.
			err = harness.WaitReady(context.Background(), nil, "servers gone", 20*time.Second, func(context.Context) error {
				var alive []string
				for name, pid := range got.PIDs {
					if harness.ProcessAlive(pid) {
						alive = append(alive, fmt.Sprintf("%s (pid %d)", name, pid))
					}
				}
				for _, port := range got.Ports {
					if harness.PortOpen(port) {
						alive = append(alive, fmt.Sprintf("port %d", port))
					}
				}
				if len(alive) > 0 {
					return fmt.Errorf("still alive: %s", strings.Join(alive, ", "))
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestChildWithHarness is the child of TestNothingLeftBehind; it does
// nothing unless that test started it.
func TestChildWithHarness(t *testing.T) {
	mode := os.Getenv("TIDAL_HARNESS_CHILD")
	if mode == "" {
		t.Skip("runs only as the child of TestNothingLeftBehind")
	}
	opts := harness.Options{Kwok: true, Prometheus: true, ControllerManager: true, KeepDir: true}
	h := harness.StartT(t, opts)
	data, err := json.Marshal(leftovers{PIDs: h.PIDs(), Ports: h.Ports(), Dir: h.Dir})
	if err != nil {
		t.Fatal(err)
	}
	tmp := os.Getenv("TIDAL_HARNESS_REPORT") + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, os.Getenv("TIDAL_HARNESS_REPORT")); err != nil {
		t.Fatal(err)
	}
	if mode == "hang" {
		time.Sleep(5 * time.Minute) // the parent kills this process
	}
	t.Fatal("failing on purpose: the parent checks that the harness is gone")
}
