package manifests

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/tidal-autoscaler/tidal/test/harness"
)

const (
	releaseName = "tidal"
	namespace   = "tidal-system"
)

var (
	clusterOnce sync.Once
	cluster     *harness.Harness
	clusterDir  string
	clusterErr  error
)

// TestMain stops the package's harness, if a test started one, after all
// tests; its files are kept when a test failed. With postRenderPortEnv set
// the binary is a Helm post-renderer instead (lifecycle_test.go).
func TestMain(m *testing.M) {
	// Run as a Helm post-renderer by TestCluster's upgrade step.
	if port := os.Getenv(postRenderPortEnv); port != "" {
		if err := postRender(os.Stdin, os.Stdout, port); err != nil {
			fmt.Fprintf(os.Stderr, "post-render: %v\n", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := harness.RunTests(m)
	if cluster != nil {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop harness: %v\n", err)
		}
		if code == 0 {
			_ = os.RemoveAll(clusterDir)
		} else {
			fmt.Fprintf(os.Stderr, "harness files kept in %s\n", clusterDir)
		}
	}
	os.Exit(code)
}

// startCluster returns the package's harness, starting it on first use: the
// apiserver and Prometheus. No kubelet, scheduler or controller manager:
// installed Deployments get no pods; the tests run the binaries themselves.
func startCluster(t *testing.T) *harness.Harness {
	t.Helper()
	clusterOnce.Do(func() {
		if clusterDir, clusterErr = os.MkdirTemp("", "tidal-manifests-"); clusterErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cluster, clusterErr = harness.Start(ctx, harness.Options{
			Dir: clusterDir, ToolsDir: os.Getenv("TIDAL_TOOLS_DIR"), Prometheus: true,
			Logf: func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) },
		})
	})
	if clusterErr != nil {
		t.Fatalf("start harness: %v", clusterErr)
	}
	return cluster
}

func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func chartDir(t testing.TB) string { return filepath.Join(repoRoot(t), "manifests", "charts", "tidal") }

// tool returns the path of a binary of `make tools` (helm, kubectl).
func tool(t testing.TB, name string) string {
	t.Helper()
	dir := os.Getenv("TIDAL_TOOLS_DIR")
	if dir == "" {
		dir = filepath.Join(repoRoot(t), "_output", "tools")
	}
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s not found in %s: run `make tools` first, or set TIDAL_TOOLS_DIR", name, dir)
	}
	return path
}

// helmEnv keeps helm's cache, config and data out of the user's home.
var (
	helmHomeOnce sync.Once
	helmHome     string
)

func helmEnv(t testing.TB, extra ...string) []string {
	t.Helper()
	helmHomeOnce.Do(func() {
		var err error
		if helmHome, err = os.MkdirTemp("", "tidal-helm-home-"); err != nil {
			t.Fatal(err)
		}
	})
	env := append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(helmHome, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(helmHome, "config"),
		"HELM_DATA_HOME="+filepath.Join(helmHome, "data"),
	)
	return append(env, extra...)
}

// run runs a binary and returns its standard output; err carries the
// standard error.
func run(env []string, bin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w\n%s", filepath.Base(bin), strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// helmTemplate renders the chart as release "tidal" in tidal-system, CRDs
// included, with the values files and flags given.
func helmTemplate(t testing.TB, args ...string) []*unstructured.Unstructured {
	t.Helper()
	out, err := run(helmEnv(t), tool(t, "helm"), append([]string{"template", releaseName, chartDir(t), "--namespace", namespace, "--include-crds"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return decodeObjects(t, out)
}

func kustomize(t testing.TB, dir string) []*unstructured.Unstructured {
	t.Helper()
	out, err := run(os.Environ(), tool(t, "kubectl"), "kustomize", dir)
	if err != nil {
		t.Fatal(err)
	}
	return decodeObjects(t, out)
}

// decodeObjects decodes a multi-document YAML stream, skipping empty
// documents. Numbers become int64 where they are integers, as the apiserver
// reads them.
func decodeObjects(t testing.TB, stream string) []*unstructured.Unstructured {
	t.Helper()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(stream)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading rendered YAML: %v", err)
		}
		data, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatalf("decoding rendered YAML: %v\n%s", err, doc)
		}
		if s := strings.TrimSpace(string(data)); s == "null" || s == "{}" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			t.Fatalf("decoding rendered object: %v\n%s", err, doc)
		}
		objs = append(objs, u)
	}
	if len(objs) == 0 {
		t.Fatal("nothing rendered")
	}
	return objs
}

func objKey(o *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
}

func keys(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, objKey(o))
	}
	sort.Strings(out)
	return out
}

// find returns the object of that kind, namespace and name, or fails.
func find(t testing.TB, objs []*unstructured.Unstructured, kind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetNamespace() == ns && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s/%s rendered; have:\n%s", kind, ns, name, strings.Join(keys(objs), "\n"))
	return nil
}

func ofKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// typed converts an unstructured object into a typed one.
func typed[T any](t testing.TB, o *unstructured.Unstructured) *T {
	t.Helper()
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, &out, true); err != nil {
		t.Fatalf("%s: %v", objKey(o), err)
	}
	return &out
}
