package objects_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/tidal-autoscaler/tidal/adapter/objects"
)

func pod(ns, name string, l map[string]string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: l},
	}
}

var pods = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// newLister returns a fake metadata client holding objs and an informer
// lister over it that runs until the test ends.
func newLister(t *testing.T, objs ...runtime.Object) (*metadatafake.FakeMetadataClient, objects.Lister, context.Context) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	client := metadatafake.NewSimpleMetadataClient(scheme, objs...)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return client, objects.NewInformerLister(ctx, client), ctx
}

func TestInformerLister(t *testing.T) {
	client, l, ctx := newLister(t,
		pod("a", "web-2", map[string]string{"app": "web"}),
		pod("a", "web-1", map[string]string{"app": "web"}),
		pod("a", "db-1", map[string]string{"app": "db"}),
		pod("b", "web-9", map[string]string{"app": "web"}),
	)

	tests := []struct {
		name, ns, selector, want string
	}{
		{"selector in a namespace", "a", "app=web", "web-1,web-2"},
		{"everything in a namespace", "a", "", "db-1,web-1,web-2"},
		{"nothing matches", "a", "app=none", ""},
		{"other namespace", "b", "app=web", "web-9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sel, err := labels.Parse(tt.selector)
			if err != nil {
				t.Fatal(err)
			}
			names, err := l.Names(ctx, pods, tt.ns, sel)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(names, ","); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	for _, c := range []struct {
		ns, name string
		want     bool
	}{{"a", "web-1", true}, {"a", "web-9", false}, {"b", "web-9", true}} {
		got, err := l.Exists(ctx, pods, c.ns, c.name)
		if err != nil || got != c.want {
			t.Errorf("Exists(%s/%s) = %v, %v; want %v", c.ns, c.name, got, err, c.want)
		}
	}
	// The cache is filled once: further lookups make no requests.
	before := len(client.Actions())
	if _, err := l.Names(ctx, pods, "a", labels.Everything()); err != nil {
		t.Fatal(err)
	}
	if after := len(client.Actions()); after != before {
		t.Errorf("a lookup made %d API requests, want none", after-before)
	}
}

// TestNamesRemembered: an answer is served again (the same slice) until an
// object of its namespace is added, deleted or relabelled; other changes,
// and changes in other namespaces, keep it.
func TestNamesRemembered(t *testing.T) {
	client, l, ctx := newLister(t,
		pod("a", "web-1", map[string]string{"app": "web"}),
		pod("a", "web-2", map[string]string{"app": "web"}),
		pod("b", "web-9", map[string]string{"app": "web"}),
	)
	podsA := client.Resource(pods).Namespace("a")
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	names := func(t *testing.T, ns string) []string {
		t.Helper()
		n, err := l.Names(ctx, pods, ns, web)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// eventually waits until namespace a's answer is want, and returns it.
	eventually := func(t *testing.T, want string) []string {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			n := names(t, "a")
			if strings.Join(n, ",") == want {
				return n
			}
			if time.Now().After(deadline) {
				t.Fatalf("names in a: %q, want %q", strings.Join(n, ","), want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	same := func(a, b []string) bool { return len(a) > 0 && len(b) > 0 && &a[0] == &b[0] }
	// settle waits until the informer has handled the events the fake
	// client made so far: a change with no effect on the answers.
	settle := func(t *testing.T) {
		t.Helper()
		marker := pod("zz", "marker-"+strconv.Itoa(len(client.Actions())), nil)
		if _, err := client.Resource(pods).Namespace("zz").(metadatafake.MetadataClient).CreateFake(marker, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			n, err := l.Names(ctx, pods, "zz", labels.Everything())
			if err != nil {
				t.Fatal(err)
			}
			if slices.Contains(n, marker.Name) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("the informer did not see the marker pod")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	first := eventually(t, "web-1,web-2")
	steps := []struct {
		name   string
		change func() error
		want   string
		kept   bool
	}{
		{"no change", func() error { return nil }, "web-1,web-2", true},
		{"another namespace changes", func() error {
			_, err := client.Resource(pods).Namespace("b").(metadatafake.MetadataClient).CreateFake(pod("b", "web-8", map[string]string{"app": "web"}), metav1.CreateOptions{})
			return err
		}, "web-1,web-2", true},
		{"annotations change", func() error {
			p := pod("a", "web-1", map[string]string{"app": "web"})
			p.Annotations = map[string]string{"note": "x"}
			_, err := podsA.(metadatafake.MetadataClient).UpdateFake(p, metav1.UpdateOptions{})
			return err
		}, "web-1,web-2", true},
		{"a pod is added", func() error {
			_, err := podsA.(metadatafake.MetadataClient).CreateFake(pod("a", "web-3", map[string]string{"app": "web"}), metav1.CreateOptions{})
			return err
		}, "web-1,web-2,web-3", false},
		{"a pod is relabelled", func() error {
			_, err := podsA.(metadatafake.MetadataClient).UpdateFake(pod("a", "web-2", map[string]string{"app": "db"}), metav1.UpdateOptions{})
			return err
		}, "web-1,web-3", false},
		{"a pod is deleted", func() error {
			return podsA.Delete(ctx, "web-1", metav1.DeleteOptions{})
		}, "web-3", false},
	}
	prev := first
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if err := s.change(); err != nil {
				t.Fatal(err)
			}
			settle(t)
			got := eventually(t, s.want)
			if kept := same(prev, got); kept != s.kept {
				t.Errorf("answer kept: %v, want %v", kept, s.kept)
			}
			prev = got
		})
	}
	// Every namespace's answer ("") changes with any namespace's objects.
	all := func() []string {
		n, err := l.Names(ctx, pods, "", web)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := all()
	if again := all(); !same(before, again) {
		t.Error("the all-namespaces answer was not kept")
	}
	if _, err := client.Resource(pods).Namespace("b").(metadatafake.MetadataClient).CreateFake(pod("b", "web-7", map[string]string{"app": "web"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	settle(t)
	if got := strings.Join(all(), ","); got != "web-3,web-7,web-8,web-9" {
		t.Errorf("all namespaces after an add in b: %q", got)
	}
}

// TestSelectRemembered: the objects a selector matches are served again
// (the same slice) until any object of the namespace changes, and are
// sorted by name.
func TestSelectRemembered(t *testing.T) {
	client, lister, ctx := newLister(t,
		pod("a", "web-2", map[string]string{"app": "web"}),
		pod("a", "web-1", map[string]string{"app": "web"}),
		pod("b", "web-9", map[string]string{"app": "web"}),
	)
	l := lister.(objects.CacheLister)
	fake := func(ns string) metadatafake.MetadataClient {
		return client.Resource(pods).Namespace(ns).(metadatafake.MetadataClient)
	}
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	// until waits until namespace a's answer satisfies ok, and returns it.
	until := func(t *testing.T, what string, ok func([]*metav1.PartialObjectMetadata) bool) []*metav1.PartialObjectMetadata {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got, err := l.Select(ctx, pods, "a", web)
			if err != nil {
				t.Fatal(err)
			}
			if ok(got) {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("namespace a never had %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	names := func(objs []*metav1.PartialObjectMetadata) string {
		var n []string
		for _, o := range objs {
			n = append(n, o.Name)
		}
		return strings.Join(n, ",")
	}
	first := until(t, "web-1,web-2", func(o []*metav1.PartialObjectMetadata) bool { return names(o) == "web-1,web-2" })
	again, err := l.Select(ctx, pods, "a", web)
	if err != nil {
		t.Fatal(err)
	}
	if &again[0] != &first[0] {
		t.Error("an unchanged namespace's answer was not kept")
	}
	if _, err := fake("b").CreateFake(pod("b", "web-8", map[string]string{"app": "web"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// An annotation change is an event of namespace a: the answer follows.
	p := pod("a", "web-1", map[string]string{"app": "web"})
	p.Annotations = map[string]string{"note": "x"}
	if _, err := fake("a").UpdateFake(p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := until(t, "the annotated web-1", func(o []*metav1.PartialObjectMetadata) bool {
		return len(o) == 2 && o[0].Annotations["note"] == "x"
	})
	if &got[0] == &first[0] {
		t.Error("the answer was kept past a change in its namespace")
	}
	if _, err := fake("a").CreateFake(pod("a", "web-0", map[string]string{"app": "web"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, "web-0,web-1,web-2", func(o []*metav1.PartialObjectMetadata) bool { return names(o) == "web-0,web-1,web-2" })
}
