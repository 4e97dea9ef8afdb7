package docs

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.RunTests(m)) }

// TestAutoscaleDryRun runs the docs' `tidal autoscale ... --dry-run=client
// -o yaml` blocks with the binary of this checkout and no cluster, and
// checks that the object printed is the one the block's flags ask for.
func TestAutoscaleDryRun(t *testing.T) {
	root := repoRoot(t)
	blocks, err := RunBy(root, "test/docs TestAutoscaleDryRun")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range blocks {
		t.Run(b.String(), func(t *testing.T) {
			cmds := b.Commands()
			if len(cmds) != 1 || !strings.HasPrefix(cmds[0], "tidal autoscale ") || !strings.Contains(cmds[0], "--dry-run=client") {
				t.Fatalf("%s: want one `tidal autoscale ... --dry-run=client -o yaml` command, got %q", b, cmds)
			}
			want := autoscalerOf(t, cmds[0])
			out := runBlock(t, root, b)
			var got v1alpha1.HorizontalAutoscaler
			if err := yaml.UnmarshalStrict([]byte(out), &got); err != nil {
				t.Fatalf("%s printed no HorizontalAutoscaler: %v\n%s", b, err, out)
			}
			if got.APIVersion != "autoscaling.tidal.dev/v1alpha1" || got.Kind != "HorizontalAutoscaler" || got.Name != want.Name {
				t.Errorf("printed %s %s %q, want autoscaling.tidal.dev/v1alpha1 HorizontalAutoscaler %q", got.APIVersion, got.Kind, got.Name, want.Name)
			}
			if !equality.Semantic.DeepEqual(got.Spec, want.Spec) {
				t.Errorf("spec printed:\n%s\nwant, from the block's flags:\n%s", toYAML(t, got.Spec), toYAML(t, want.Spec))
			}
		})
	}
}

// autoscalerOf is the HorizontalAutoscaler a `tidal autoscale` command
// line asks for, read from its flags as docs/autoscaling.md describes them.
func autoscalerOf(t *testing.T, command string) v1alpha1.HorizontalAutoscaler {
	t.Helper()
	args := strings.Fields(stripComment(command))[2:]
	var ha v1alpha1.HorizontalAutoscaler
	kinds := map[string]string{"deployment": "Deployment", "deploy": "Deployment", "statefulset": "StatefulSet", "sts": "StatefulSet", "replicaset": "ReplicaSet", "rs": "ReplicaSet"}
	atoi := func(s string) int32 {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("%q: %v", command, err)
		}
		return int32(n)
	}
	var metrics []autoscalingv2.MetricSpec
	for i := 0; i < len(args); i++ {
		name, value, ok := strings.Cut(args[i], "=")
		if !ok && strings.HasPrefix(name, "-") && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			i++
			value = args[i]
		}
		switch name {
		case "--min":
			ha.Spec.MinReplicas = new(atoi(value))
		case "--max":
			ha.Spec.MaxReplicas = atoi(value)
		case "--cpu-percent":
			metrics = append([]autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: "cpu", Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: new(atoi(value))}}}}, metrics...)
		case "--metric":
			metrics = append(metrics, metricOf(t, value))
		case "--name":
			ha.Name = value
		case "--dry-run", "-o", "--output":
		default:
			kind, target, ok := strings.Cut(args[i], "/")
			if !ok || kinds[kind] == "" || strings.HasPrefix(args[i], "-") {
				t.Fatalf("%q: this test does not know %q; teach autoscalerOf", command, args[i])
			}
			ha.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: kinds[kind], Name: target}
			if ha.Name == "" {
				ha.Name = target
			}
		}
	}
	ha.Spec.Metrics = metrics
	return ha
}

// metricOf reads --metric TYPE:NAME:TARGET[,selector=SELECTOR].
func metricOf(t *testing.T, value string) autoscalingv2.MetricSpec {
	t.Helper()
	parts := strings.SplitN(value, ":", 3)
	if len(parts) != 3 {
		t.Fatalf("--metric %q: want TYPE:NAME:TARGET", value)
	}
	targetText, selectorText, _ := strings.Cut(parts[2], ",selector=")
	kind, quantity, _ := strings.Cut(targetText, "=")
	var target autoscalingv2.MetricTarget
	switch kind {
	case "avg":
		q := resource.MustParse(quantity)
		target = autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &q}
	case "value":
		q := resource.MustParse(quantity)
		target = autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: &q}
	case "util":
		n, err := strconv.Atoi(quantity)
		if err != nil {
			t.Fatalf("--metric %q: %v", value, err)
		}
		target = autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: new(int32(n))}
	}
	id := autoscalingv2.MetricIdentifier{Name: parts[1]}
	if selectorText != "" {
		sel, err := metav1.ParseToLabelSelector(selectorText)
		if err != nil {
			t.Fatalf("--metric %q: %v", value, err)
		}
		id.Selector = sel
	}
	switch parts[0] {
	case "pods":
		return autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{Metric: id, Target: target}}
	case "external":
		return autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{Metric: id, Target: target}}
	case "resource":
		return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: "cpu", Target: target}}
	}
	t.Fatalf("--metric %q: unknown type %q", value, parts[0])
	return autoscalingv2.MetricSpec{}
}

func toYAML(t *testing.T, v any) string {
	t.Helper()
	out, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// toolNames are the commands a block may run from TIDAL_TOOLS_DIR.
var toolNames = []string{"helm", "kubectl", "promtool", "kwok", "etcd", "prometheus"}

// runBlock runs b's commands with bash from the repository's root and
// returns what they print. PATH holds the tidal binary of this checkout,
// then TIDAL_TOOLS_DIR when the block runs one of its tools (the test is
// skipped when it is unset; make test sets it); HOME, Helm's directories
// and KUBECONFIG point into a temporary directory, so a block reads none
// of the user's files and reaches no cluster.
func runBlock(t *testing.T, root string, b Block) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	path := []string{}
	if uses(b, "tidal") {
		tidal, err := harness.TidalBinary(ctx)
		if err != nil {
			t.Fatal(err)
		}
		path = append(path, filepath.Dir(tidal))
	}
	for _, tool := range toolNames {
		if !uses(b, tool) {
			continue
		}
		dir := os.Getenv("TIDAL_TOOLS_DIR")
		if dir == "" {
			t.Skipf("%s runs %s: set TIDAL_TOOLS_DIR to the folder `make tools` fills (make test sets it)", b, tool)
		}
		path = append(path, dir)
		break
	}
	home := t.TempDir()
	cmd := exec.CommandContext(ctx, "bash", "-c", b.Script())
	cmd.Dir = root
	cmd.Env = append(os.Environ(),
		"PATH="+strings.Join(append(path, os.Getenv("PATH")), string(os.PathListSeparator)),
		"HOME="+home,
		"XDG_CACHE_HOME="+filepath.Join(home, "cache"),
		"XDG_CONFIG_HOME="+filepath.Join(home, "config"),
		"XDG_DATA_HOME="+filepath.Join(home, "data"),
		"KUBECONFIG="+filepath.Join(home, "no-cluster.kubeconfig"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nscript:\n%s\nstdout:\n%s\nstderr:\n%s", b, err, b.Script(), stdout.String(), stderr.String())
	}
	return stdout.String()
}

// uses says whether a command of b runs name, as a word of its own.
func uses(b Block, name string) bool {
	for _, c := range b.Commands() {
		for _, w := range strings.FieldsFunc(c, func(r rune) bool { return strings.ContainsRune(" \t|;&()$`", r) }) {
			if w == name {
				return true
			}
		}
	}
	return false
}
