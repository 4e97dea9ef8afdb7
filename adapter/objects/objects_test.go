package objects_test

import (
	"context"
	"encoding/json"
	"reflect"
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
	"github.com/tidal-autoscaler/tidal/internal/heapbytes"
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
	// A new label of web-1 (it still matches) is an event of namespace a:
	// the answer follows. (Annotations are not cached: SlimMetadata.)
	p := pod("a", "web-1", map[string]string{"app": "web", "tier": "front"})
	if _, err := fake("a").UpdateFake(p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := until(t, "the relabelled web-1", func(o []*metav1.PartialObjectMetadata) bool {
		return len(o) == 2 && o[0].Labels["tier"] == "front"
	})
	if &got[0] == &first[0] {
		t.Error("the answer was kept past a change in its namespace")
	}
	if _, err := fake("a").CreateFake(pod("a", "web-0", map[string]string{"app": "web"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, "web-0,web-1,web-2", func(o []*metav1.PartialObjectMetadata) bool { return names(o) == "web-0,web-1,web-2" })
}

// The cache keeps of each object only the metadata the adapter reads:
// managed fields, annotations, owner references and finalizers are cut.
func TestCachedMetadataIsSlim(t *testing.T) {
	full := pod("a", "web-1", map[string]string{"app": "web"})
	full.UID, full.ResourceVersion = "uid-1", "7"
	full.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-03-01T11:00:00Z"}
	full.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d8f7", UID: "rs"}}
	full.Finalizers = []string{"example.com/keep"}
	full.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status"}}
	_, l, ctx := newLister(t, full)

	got, err := l.(objects.CacheLister).Select(ctx, pods, "a", labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("got %d objects, want 1", len(got))
	}
	want := metav1.ObjectMeta{Namespace: "a", Name: "web-1", UID: "uid-1", ResourceVersion: got[0].ResourceVersion, Labels: map[string]string{"app": "web"}}
	if got[0].ResourceVersion == "" || !reflect.DeepEqual(got[0].ObjectMeta, want) {
		t.Errorf("cached metadata %+v, want %+v (with a resourceVersion)", got[0].ObjectMeta, want)
	}
}

// BenchmarkMetadataCacheBytes reports the heap a cached pod's metadata
// holds, decoded as the informer decodes it, with and without
// SlimMetadata. The pod's managed fields are those of a Deployment's pod
// (the ReplicaSet controller's spec and the kubelet's status).
func BenchmarkMetadataCacheBytes(b *testing.B) {
	p := pod("shop", "web-5d8f7-x2x9k", map[string]string{"app": "web", "pod-template-hash": "5d8f7"})
	p.UID, p.ResourceVersion = "0b5c3f3e-8a57-4a62-9d0e-2f4f3b9c1a77", "123456"
	p.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-03-01T11:00:00Z"}
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d8f7", UID: "rs", Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true)}}
	spec := `{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"rs\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:env":{".":{},"k:{\"name\":\"A\"}":{".":{},"f:name":{},"f:value":{}},"k:{\"name\":\"B\"}":{".":{},"f:name":{},"f:value":{}}},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:ports":{".":{},"k:{\"containerPort\":8080,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:name":{},"f:protocol":{}}},"f:readinessProbe":{".":{},"f:httpGet":{".":{},"f:path":{},"f:port":{},"f:scheme":{}}},"f:resources":{".":{},"f:requests":{".":{},"f:cpu":{},"f:memory":{}}},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{}}}`
	status := `{"f:status":{"f:conditions":{"k:{\"type\":\"ContainersReady\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Initialized\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Ready\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},"f:containerStatuses":{},"f:hostIP":{},"f:phase":{},"f:podIP":{},"f:podIPs":{".":{},"k:{\"ip\":\"10.0.0.7\"}":{".":{},"f:ip":{}}},"f:startTime":{}}}`
	p.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(spec)},
		{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(status), Subresource: "status"},
	}
	data, err := json.Marshal(p)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		transform func(any) (any, error)
	}{
		{"full", func(o any) (any, error) { return o, nil }},
		{"slim", objects.SlimMetadata},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var perObject float64
			for b.Loop() {
				perObject = heapbytes.PerObject(1000, func(int) any {
					m := &metav1.PartialObjectMetadata{}
					if err := json.Unmarshal(data, m); err != nil {
						b.Fatal(err)
					}
					slim, _ := tc.transform(m)
					return slim
				})
			}
			b.ReportMetric(perObject, "bytes/object")
		})
	}
}

func ptrTo[T any](v T) *T { return &v }
