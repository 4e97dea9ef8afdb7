package autoscale

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/diff"
	"sigs.k8s.io/yaml"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
)

// runCmd runs `tidal autoscale args` with a kubeconfig that points
// nowhere reachable, so a test that contacted a cluster would fail.
func runCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: from-context}}]
current-context: x
`
	if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := NewCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SilenceUsage = true
	cmd.SetArgs(append([]string{"--kubeconfig", kc}, args...))
	err := cmd.Execute()
	return out.String(), err
}

func TestDryRunClientDecodes(t *testing.T) {
	flags := []string{"deployment/web", "--min=2", "--max=10", "--cpu-percent=60", "--dry-run=client",
		"--metric", "pods:rps:avg=100", "--metric", "external:queue_depth:avg=30,selector=queue=orders"}
	opts := Options{Namespace: "from-context", Min: 2, Max: 10, CPUPercent: 60,
		Metrics: []string{"pods:rps:avg=100", "external:queue_depth:avg=30,selector=queue=orders"}}
	for _, format := range []string{"yaml", "json"} {
		t.Run("crd "+format, func(t *testing.T) {
			out, err := runCmd(t, append(flags, "-o", format)...)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			want, _ := HorizontalAutoscaler(web, opts)
			got := &v1alpha1.HorizontalAutoscaler{}
			if err := yaml.UnmarshalStrict([]byte(out), got); err != nil {
				t.Fatalf("decoding %s: %v\n%s", format, err, out)
			}
			if !apiequality.Semantic.DeepEqual(want, got) {
				t.Errorf("(-want +got):\n%s", diff.Diff(want, got))
			}
			if format == "json" && !json.Valid([]byte(out)) {
				t.Errorf("not JSON:\n%s", out)
			}
		})
		t.Run("native "+format, func(t *testing.T) {
			out, err := runCmd(t, append(flags, "--native", "-n", "shop", "-o", format)...)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			o := opts
			o.Namespace = "shop"
			want, _ := HorizontalPodAutoscaler(web, o)
			got := &autoscalingv2.HorizontalPodAutoscaler{}
			if err := yaml.UnmarshalStrict([]byte(out), got); err != nil {
				t.Fatalf("decoding %s: %v\n%s", format, err, out)
			}
			if !apiequality.Semantic.DeepEqual(want, got) {
				t.Errorf("(-want +got):\n%s", diff.Diff(want, got))
			}
		})
	}
}

func TestCommandOutputAndErrors(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    string
		wantErr string
	}{
		{name: "dry run line", args: []string{"deploy/web", "--max=3", "--dry-run=client"}, want: "horizontalautoscaler.autoscaling.tidal.dev/web autoscaled (client dry run)\n"},
		{name: "native name", args: []string{"sts/db", "--max=3", "--native", "--dry-run=client", "-o", "name", "--name", "db-hpa"}, want: "horizontalpodautoscaler.autoscaling/db-hpa\n"},
		{name: "min greater than max", args: []string{"deploy/web", "--min=5", "--max=3", "--dry-run=client"}, wantErr: "--min=5 is greater than --max=3"},
		{name: "min greater than max without dry run refused before the cluster", args: []string{"deploy/web", "--min=5", "--max=3"}, wantErr: "--min=5 is greater than --max=3"},
		{name: "max missing", args: []string{"deploy/web", "--dry-run=client"}, wantErr: "--max=MAXPODS is required"},
		{name: "bad metric", args: []string{"deploy/web", "--max=3", "--metric=pods:rps:avg", "--dry-run=client"}, wantErr: `--metric "pods:rps:avg"`},
		{name: "bad dry run", args: []string{"deploy/web", "--max=3", "--dry-run=maybe"}, wantErr: "--dry-run=maybe"},
		{name: "bad output", args: []string{"deploy/web", "--max=3", "--dry-run=client", "-o", "wide"}, wantErr: "-o/--output=wide"},
		{name: "bad target", args: []string{"pod/web", "--max=3", "--dry-run=client"}, wantErr: `target type "pod"`},
		{name: "create needs a reachable cluster", args: []string{"deploy/web", "--max=3"}, wantErr: "creating from-context/web"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runCmd(t, tt.args...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if out != tt.want {
				t.Errorf("output %q, want %q", out, tt.want)
			}
		})
	}
}
