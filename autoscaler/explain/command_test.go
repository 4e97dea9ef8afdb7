package explain

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
)

// runCmd runs `tidal explain args` against fake clients holding the
// fixture (ha web and hpa web in shop, ha fresh not yet reconciled) and a
// kubeconfig whose context's namespace is shop.
func runCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: shop}}]
current-context: x
`
	if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	fresh := web()
	fresh.Name, fresh.Status = "fresh", v1alpha1.HorizontalAutoscalerStatus{}
	var objs []runtime.Object
	for _, ha := range []*v1alpha1.HorizontalAutoscaler{web(), fresh} {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ha)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, &unstructured.Unstructured{Object: u})
	}
	clients := Clients{
		Kube: kubefake.NewClientset(webHPA()),
		Dynamic: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme,
			map[schema.GroupVersionResource]string{v1alpha1.GroupVersionResource: "HorizontalAutoscalerList"}, objs...),
	}
	cmd := newCommand(func(cfg *rest.Config) (Clients, error) {
		if cfg.Host != "https://127.0.0.1:1" {
			return Clients{}, errors.New("not the kubeconfig's cluster: " + cfg.Host)
		}
		return clients, nil
	})
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SilenceUsage = true
	cmd.SetArgs(append([]string{"--kubeconfig", kc}, args...))
	err := cmd.Execute()
	return out.String(), err
}

func TestCommand(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    string // the whole output
		check   func(t *testing.T, out string)
		wantErr string
	}{
		{name: "ha from the context's namespace", args: []string{"ha/web"}, want: webText},
		{name: "full resource name and -n", args: []string{"horizontalautoscalers.autoscaling.tidal.dev", "web", "-n", "shop", "-o", "text"}, want: webText},
		{name: "hpa as yaml", args: []string{"hpa/web", "-o", "yaml"}, check: func(t *testing.T, out string) {
			var r Report
			if err := yaml.UnmarshalStrict([]byte(out), &r); err != nil {
				t.Fatal(err)
			}
			if r.Kind != KindHPA || r.Decision != nil || r.Unavailable == "" || len(r.Metrics) != 3 {
				t.Errorf("report %+v", r)
			}
		}},
		{name: "ha as json", args: []string{"ha/web", "-o", "json"}, check: func(t *testing.T, out string) {
			var r Report
			if err := yaml.UnmarshalStrict([]byte(out), &r); err != nil {
				t.Fatal(err)
			}
			if r.Decision == nil || r.Decision.DesiredReplicas != 9 || !r.Metrics[0].Winner {
				t.Errorf("report %+v", r)
			}
		}},
		{name: "not found", args: []string{"ha/api"},
			wantErr: "horizontalautoscaler api not found in namespace shop (kubectl get ha -n shop lists them; is the HorizontalAutoscaler CRD installed? for an autoscaling/v2 HPA, use hpa/api)"},
		{name: "hpa not found elsewhere", args: []string{"hpa/web", "-n", "other"},
			wantErr: "horizontalpodautoscaler web not found in namespace other (kubectl get hpa -n other lists them)"},
		{name: "not reconciled yet", args: []string{"ha/fresh"},
			wantErr: "horizontalautoscaler shop/fresh has no status to explain: the controller has not reconciled it yet"},
		{name: "wrong kind", args: []string{"deployment/web"},
			wantErr: `type "deployment": explain takes horizontalautoscaler/NAME (ha/NAME) or horizontalpodautoscaler/NAME (hpa/NAME)`},
		{name: "wrong group", args: []string{"ha.autoscaling/web"}, wantErr: `type "ha.autoscaling"`},
		{name: "no name", args: []string{"ha/"}, wantErr: `"ha/": expected TYPE/NAME with a name`},
		{name: "no type", args: []string{"web"}, wantErr: `"web": expected TYPE/NAME or TYPE NAME`},
		{name: "bad output", args: []string{"ha/web", "-o", "wide"}, wantErr: "-o/--output=wide: expected one of text, yaml, json"},
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
				t.Fatalf("%v\n%s", err, out)
			}
			if tt.check != nil {
				tt.check(t, out)
			} else if out != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", out, tt.want)
			}
		})
	}
}

// TestParseObjectTakesTheCRDNames checks that every name the CRD declares
// for the resource (singular, plural, short names) is a TYPE, bare and
// with its group.
func TestParseObjectTakesTheCRDNames(t *testing.T) {
	raw, err := os.ReadFile(filepath.FromSlash("../../manifests/crd/autoscaling.tidal.dev_horizontalautoscalers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Group string
			Names struct {
				Plural, Singular string
				ShortNames       []string `json:"shortNames"`
			}
		}
	}
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	names := append([]string{crd.Spec.Names.Plural, crd.Spec.Names.Singular}, crd.Spec.Names.ShortNames...)
	if len(names) < 3 {
		t.Fatalf("CRD names %v", names)
	}
	for _, n := range names {
		for _, typ := range []string{n, n + "." + crd.Spec.Group, n + ".v1alpha1." + crd.Spec.Group, strings.ToUpper(n)} {
			o, err := ParseObject([]string{typ + "/web"})
			if err != nil || o != (Object{Kind: KindHA, Name: "web"}) {
				t.Errorf("ParseObject(%s/web) = %+v, %v", typ, o, err)
			}
		}
	}
	for _, typ := range []string{"hpa", "horizontalpodautoscaler", "horizontalpodautoscalers.autoscaling", "hpa.v2.autoscaling"} {
		if o, err := ParseObject([]string{typ, "web"}); err != nil || o.Kind != KindHPA {
			t.Errorf("ParseObject(%s web) = %+v, %v", typ, o, err)
		}
	}
}
