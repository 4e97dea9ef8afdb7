package objects_test

import (
	"context"
	"strings"
	"testing"

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

func TestInformerLister(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	client := metadatafake.NewSimpleMetadataClient(scheme,
		pod("a", "web-2", map[string]string{"app": "web"}),
		pod("a", "web-1", map[string]string{"app": "web"}),
		pod("a", "db-1", map[string]string{"app": "db"}),
		pod("b", "web-9", map[string]string{"app": "web"}),
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := objects.NewInformerLister(ctx, client)
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}

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
