package objects_test

import (
	"net/http"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/tidal-autoscaler/tidal/adapter/objects"
)

// TestNamespacedLister: with --namespace the lister lists and watches in
// that namespace only, answers its namespace object without a read, and
// refuses every other namespace and cluster-scoped objects with a 403
// that says what to do.
func TestNamespacedLister(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	annotated := pod("a", "web-1", map[string]string{"app": "web"})
	annotated.Annotations = map[string]string{"big": strings.Repeat("x", 100)}
	client := metadatafake.NewSimpleMetadataClient(scheme, annotated, pod("a", "web-2", map[string]string{"app": "web"}), pod("b", "web-9", map[string]string{"app": "web"}))
	ctx := t.Context()
	l := objects.NewNamespacedInformerLister(ctx, client, "a")
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	nodes := schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	namespaces := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

	names, err := l.Names(ctx, pods, "a", web)
	if err != nil || strings.Join(names, ",") != "web-1,web-2" {
		t.Errorf("Names(pods, a) = %q, %v; want web-1,web-2", names, err)
	}
	if ok, err := l.Exists(ctx, namespaces, "", "a"); !ok || err != nil {
		t.Errorf("Exists(namespaces/a) = %v, %v; want true without a read", ok, err)
	}
	for _, tc := range []struct {
		name string
		call func() error
		want string
	}{
		{"another namespace", func() error { _, err := l.Names(ctx, pods, "b", web); return err }, `pods in namespace "b" are not read`},
		{"across namespaces", func() error { _, err := l.Names(ctx, pods, "", web); return err }, "pods outside a namespace"},
		{"a cluster-scoped object", func() error { _, err := l.Exists(ctx, nodes, "", "node-1"); return err }, "nodes outside a namespace"},
		{"another namespace object", func() error { _, err := l.Exists(ctx, namespaces, "", "b"); return err }, "namespaces outside a namespace"},
		{"a select in another namespace", func() error {
			_, err := l.(objects.CacheLister).Select(ctx, pods, "b", web)
			return err
		}, `pods in namespace "b"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			oos, ok := objects.AsOutOfScope(err)
			if !ok {
				t.Fatalf("error %v, want an OutOfScopeError", err)
			}
			if st := oos.Status(); st.Code != http.StatusForbidden || !apierrors.IsForbidden(err) {
				t.Errorf("status %d, want 403", st.Code)
			}
			for _, want := range []string{tc.want, "--namespace=a", "install an adapter without --namespace"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
		})
	}
	for _, a := range client.Actions() {
		if (a.GetVerb() == "list" || a.GetVerb() == "watch") && a.GetNamespace() != "a" {
			t.Errorf("%s %s in namespace %q: want reads in namespace a only", a.GetVerb(), a.GetResource().Resource, a.GetNamespace())
		}
	}
	if !hasAction(client.Actions(), "list", "pods") {
		t.Error("no list of pods in namespace a")
	}
	// Cached slim, as the cluster-wide lister does.
	objs, err := l.(objects.CacheLister).Select(ctx, pods, "a", web)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if len(o.Annotations) > 0 {
			t.Errorf("%s cached with its annotations: want SlimMetadata's slim copy", o.Name)
		}
	}
}

// TestClusterWideListerServesEverything: without --namespace nothing is
// out of scope.
func TestClusterWideListerServesEverything(t *testing.T) {
	_, l, _ := newLister(t)
	cl := l.(objects.CacheLister)
	for _, ns := range []string{"", "a", "b"} {
		if err := cl.InScope(pods, ns); err != nil {
			t.Errorf("InScope(pods, %q) = %v, want nil", ns, err)
		}
	}
}

func hasAction(actions []k8stesting.Action, verb, resource string) bool {
	for _, a := range actions {
		if a.GetVerb() == verb && a.GetResource().Resource == resource {
			return true
		}
	}
	return false
}
