package provider_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tidal-autoscaler/tidal/adapter/provider"
)

// countingMapper counts the lookups resolve makes.
type countingMapper struct {
	meta.RESTMapper
	calls int
}

func (m *countingMapper) ResourceFor(in schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	m.calls++
	return m.RESTMapper.ResourceFor(in)
}

// What a request's resource resolves to is remembered for 10 s per
// discovery snapshot; a failed lookup is not.
func TestResolveRemembered(t *testing.T) {
	tests := []struct {
		name    string
		steps   []time.Duration // clock advance before each request
		gr      schema.GroupResource
		lookups int
	}{
		{"repeated requests look up once", []time.Duration{0, time.Second, 8 * time.Second}, pods, 1},
		{"and again after 10 s", []time.Duration{0, 10 * time.Second, time.Second}, pods, 2},
		{"an unknown resource is looked up every time", []time.Duration{0, 0}, schema.GroupResource{Resource: "widgets"}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1800000000, 0)
			var m *countingMapper
			f := newFixtureWith(t, nil, func(o *provider.Options) {
				m = &countingMapper{RESTMapper: o.Mapper}
				o.Mapper, o.Now = m, func() time.Time { return now }
			})
			for _, d := range tc.steps {
				now = now.Add(d)
				_, err := f.p.GetMetricBySelector(context.Background(), "a", labels.Everything(), info(tc.gr), labels.Everything())
				if (err == nil) != (tc.gr == pods) {
					t.Fatalf("%s: %v", tc.gr, err)
				}
			}
			if m.calls != tc.lookups {
				t.Errorf("%d lookups, want %d", m.calls, tc.lookups)
			}
		})
	}
}
