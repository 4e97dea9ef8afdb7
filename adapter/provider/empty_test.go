package provider

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"
)

func TestEmptyListsNothing(t *testing.T) {
	var p Empty
	if got := p.ListAllMetrics(); len(got) != 0 {
		t.Errorf("ListAllMetrics() = %v, want none", got)
	}
	if got := p.ListAllExternalMetrics(); len(got) != 0 {
		t.Errorf("ListAllExternalMetrics() = %v, want none", got)
	}
}

func TestEmptyGetIsNotFound(t *testing.T) {
	ctx := context.Background()
	pods := cmprovider.CustomMetricInfo{GroupResource: schema.GroupResource{Resource: "pods"}, Namespaced: true, Metric: "http_requests"}
	sel := labels.SelectorFromSet(labels.Set{"code": "500"})
	var p Empty

	tests := []struct {
		name string
		get  func() error
		want []string
	}{{
		name: "custom by name",
		get: func() error {
			_, err := p.GetMetricByName(ctx, types.NamespacedName{Namespace: "ns", Name: "web-0"}, pods, labels.Everything())
			return err
		},
		want: []string{"http_requests", "pods", "web-0"},
	}, {
		name: "custom by name with metric selector",
		get: func() error {
			_, err := p.GetMetricByName(ctx, types.NamespacedName{Namespace: "ns", Name: "web-0"}, pods, sel)
			return err
		},
		want: []string{"http_requests", "web-0", "code=500"},
	}, {
		name: "custom by selector",
		get: func() error {
			_, err := p.GetMetricBySelector(ctx, "ns", labels.Everything(), pods, labels.Everything())
			return err
		},
		want: []string{"http_requests", "pods"},
	}, {
		name: "external",
		get: func() error {
			_, err := p.GetExternalMetric(ctx, "ns", sel, cmprovider.ExternalMetricInfo{Metric: "queue_depth"})
			return err
		},
		want: []string{"queue_depth", "ns", "code=500"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.get()
			if !apierrors.IsNotFound(err) {
				t.Fatalf("got %v, want a NotFound error", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}
