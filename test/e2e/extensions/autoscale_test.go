package extensions

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/test/harness"
	"github.com/tidal-autoscaler/tidal/test/metricsserver"
)

// rps is the Pods metric of the api Deployment.
const rps = "e2e_rps"

// TestAutoscaleCommand runs `tidal autoscale` as users do, against the
// harness: a HorizontalAutoscaler with --cpu-percent, one with a Pods
// --metric, and an autoscaling/v2 HPA with --native are created as the
// flags say (by the field manager tidal-autoscale), and the autoscaler
// reconciles the two HorizontalAutoscalers; --min above --max and a
// --metric of an unknown type exit non-zero naming the flag, and create
// nothing. Then `tidal explain` and the same binary as the kubectl plugin
// (a symlink kubectl-tidal, directly and through kubectl) print each
// metric of a reconciled autoscaler with its proposal.
func TestAutoscaleCommand(t *testing.T) {
	start(t)
	ctx := testContext(t)
	const ns = "autoscale"
	must(t, env.h.EnsureNamespace(ctx, ns))
	for _, name := range []string{"web", "api"} {
		_, err := env.h.Client.AppsV1().Deployments(ns).Create(ctx, harness.Deployment(ns, name, 2), metav1.CreateOptions{})
		must(t, err)
	}
	for _, name := range []string{"web", "api"} {
		_, err := env.h.WaitDeploymentReady(ctx, ns, name, timeout)
		must(t, err)
	}
	// 60m of the 100m requested is the 60% target, and 50 rps of a 100
	// target proposes 1, which the downscale stabilization window (and
	// --min 2) keep at 2: both decisions keep 2.
	env.metrics.SetPodUsage(ns, labels.SelectorFromSet(labels.Set{"app": "web"}), "app", corev1.ResourceCPU, metricsserver.Q("60m"))
	env.metrics.SetPodMetric(ns, labels.SelectorFromSet(labels.Set{"app": "api"}), rps, metricsserver.Q("50"))

	kubeconfig := "--kubeconfig=" + env.h.AdminKubeconfig
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, name := range []string{"web", "api"} {
			if err := env.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete HorizontalAutoscaler %s/%s: %v", ns, name, err)
			}
		}
		if err := env.h.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Delete(ctx, "worker", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete HorizontalPodAutoscaler %s/worker: %v", ns, err)
		}
	})
	createWithAutoscale(ctx, t, ns, kubeconfig)
	refuseBadInput(ctx, t, ns, kubeconfig)

	// The autoscaler reconciles both: status written with its decision.
	for _, name := range []string{"web", "api"} {
		waitUntil(ctx, t, "HorizontalAutoscaler "+name+" reconciled", func() (bool, string) {
			ha, err := getAutoscaler(ctx, ns, name)
			if err != nil {
				return false, err.Error()
			}
			d := ha.Status.Tidal
			return d != nil && d.Decision != nil && len(d.Decision.Proposals) == 1 && d.Decision.Proposals[0].Replicas != nil &&
				ha.Status.DesiredReplicas == 2, describe(ha)
		})
	}
	explainRows(ctx, t, ns, kubeconfig)
}

// run runs bin with args.
func run(ctx context.Context, bin string, args ...string) (stdout, stderr string, err error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// createWithAutoscale creates two HorizontalAutoscalers and a native HPA
// with tidal autoscale and checks each against its flags.
func createWithAutoscale(ctx context.Context, t *testing.T, ns, kubeconfig string) {
	t.Helper()
	for _, c := range []struct {
		title, args, out string
	}{
		{"cpu-percent", "deployment/web --min=2 --max=10 --cpu-percent=60", "horizontalautoscaler.autoscaling.tidal.dev/web autoscaled\n"},
		{"pods metric", "deployment/api --min=2 --max=10 --metric=pods:" + rps + ":avg=100", "horizontalautoscaler.autoscaling.tidal.dev/api autoscaled\n"},
		// Another target: tidal does not scale a target an HPA also scales.
		{"native", "deployment/worker --native --max=5 --cpu-percent=70", "horizontalpodautoscaler.autoscaling/worker autoscaled\n"},
	} {
		args := append([]string{"autoscale"}, strings.Fields(c.args)...)
		stdout, stderr, err := run(ctx, env.tidal, append(args, "-n", ns, kubeconfig)...)
		if err != nil || stdout != c.out {
			t.Fatalf("%s: tidal %s: %v; stdout %q, want %q; stderr %s", c.title, c.args, err, stdout, c.out, stderr)
		}
	}
	cpu := func(p int32) []autoscalingv2.MetricSpec {
		return []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
			Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(p)}}}}
	}
	pods := []autoscalingv2.MetricSpec{{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: rps},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: resource.NewQuantity(100, resource.DecimalSI)}}}}
	for _, want := range []struct {
		name, target string
		metrics      []autoscalingv2.MetricSpec
	}{{"web", "web", cpu(60)}, {"api", "api", pods}} {
		ha, err := getAutoscaler(ctx, ns, want.name)
		must(t, err)
		checkSpec(t, "HorizontalAutoscaler "+want.name, ha.Spec.HorizontalPodAutoscalerSpec, ha.ManagedFields, want.target, 2, 10, want.metrics)
	}
	hpa, err := env.h.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "worker", metav1.GetOptions{})
	must(t, err)
	// kubectl's --min default: none given, the server's 1.
	checkSpec(t, "HorizontalPodAutoscaler worker", hpa.Spec, hpa.ManagedFields, "worker", 1, 5, cpu(70))
}

// refuseBadInput: bad flags exit non-zero naming the flag, and nothing
// is created.
func refuseBadInput(ctx context.Context, t *testing.T, ns, kubeconfig string) {
	t.Helper()
	for _, c := range []struct {
		title, name, args string
		says              []string
	}{
		{"min above max", "bad-range", "--min=5 --max=2", []string{"--min=5", "--max=2"}},
		{"unknown metric type", "bad-metric", "--max=3 --metric=gauge:" + rps + ":avg=1", []string{"--metric", "gauge"}},
	} {
		args := append([]string{"autoscale", "deployment/web", "--name=" + c.name}, strings.Fields(c.args)...)
		_, stderr, err := run(ctx, env.tidal, append(args, "-n", ns, kubeconfig)...)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() == 0 {
			t.Errorf("%s: tidal %s: %v, want a non-zero exit", c.title, strings.Join(args, " "), err)
		}
		for _, s := range c.says {
			if !strings.Contains(stderr, s) {
				t.Errorf("%s: stderr %q does not name %s", c.title, stderr, s)
			}
		}
		if _, err := getAutoscaler(ctx, ns, c.name); !apierrors.IsNotFound(err) {
			t.Errorf("%s: HorizontalAutoscaler %s: %v, want NotFound", c.title, c.name, err)
		}
	}
}

// explainRows: tidal explain, and the same binary as kubectl's plugin,
// print each metric's row with its proposal.
func explainRows(ctx context.Context, t *testing.T, ns, kubeconfig string) {
	t.Helper()
	dir := t.TempDir()
	plugin := filepath.Join(dir, "kubectl-tidal")
	must(t, os.Symlink(env.tidal, plugin))
	for _, c := range []struct {
		title string
		bin   string
		args  string
		row   []string // the metric's row: name, then its proposal
	}{
		{"tidal explain", env.tidal, "explain ha/api", []string{"pods metric " + rps, "1, chosen"}},
		{"kubectl-tidal explain", plugin, "explain ha/web", []string{"cpu resource utilization (percentage of request)", "2, within tolerance, chosen"}},
		{"kubectl tidal explain", filepath.Join(env.h.ToolsDir(), "kubectl"), "tidal explain ha/api", []string{"pods metric " + rps, "1, chosen"}},
	} {
		cmd := exec.CommandContext(ctx, c.bin, append(strings.Fields(c.args), "-n", ns, kubeconfig)...)
		cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%s: %v\n%s", c.title, err, out)
			continue
		}
		t.Logf("%s %s:\n%s", filepath.Base(c.bin), c.args, out)
		if !slices.ContainsFunc(strings.Split(string(out), "\n"), func(line string) bool {
			return strings.HasPrefix(strings.TrimSpace(line), c.row[0]) && strings.HasSuffix(line, c.row[1])
		}) {
			t.Errorf("%s: no row %q ... %q in:\n%s", c.title, c.row[0], c.row[1], out)
		}
	}
}

// checkSpec compares what `tidal autoscale` created with what its flags say.
func checkSpec(t *testing.T, what string, spec autoscalingv2.HorizontalPodAutoscalerSpec, fields []metav1.ManagedFieldsEntry,
	target string, minR, maxR int32, metrics []autoscalingv2.MetricSpec) {
	t.Helper()
	ref := autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: target}
	if spec.ScaleTargetRef != ref || ptr.Deref(spec.MinReplicas, 0) != minR || spec.MaxReplicas != maxR {
		t.Errorf("%s: target %+v, min %v, max %d; want %+v, %d, %d", what, spec.ScaleTargetRef, ptr.Deref(spec.MinReplicas, 0), spec.MaxReplicas, ref, minR, maxR)
	}
	if len(spec.Metrics) != len(metrics) {
		t.Errorf("%s: metrics %+v, want %+v", what, spec.Metrics, metrics)
	}
	for i := range min(len(spec.Metrics), len(metrics)) {
		got, want := spec.Metrics[i], metrics[i]
		if !equality.Semantic.DeepEqual(got, want) {
			t.Errorf("%s: metrics[%d] %s, want %s", what, i, got.String(), want.String())
		}
	}
	if !slices.ContainsFunc(fields, func(f metav1.ManagedFieldsEntry) bool { return f.Manager == "tidal-autoscale" }) {
		t.Errorf("%s: no managedFields entry of tidal-autoscale", what)
	}
}
