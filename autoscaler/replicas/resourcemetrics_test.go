package replicas

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

func cpuUsage(milli int64) []ResourceUsage { return []ResourceUsage{{cpu, milli}} }

// TestContainerUsage: Set keeps one value per resource, the last, sorted
// by name; Of finds it, or reports none.
func TestContainerUsage(t *testing.T) {
	tests := []struct {
		name string
		set  []ResourceUsage
		want []ResourceUsage
	}{
		{name: "none", want: nil},
		{name: "sorted by name", set: []ResourceUsage{{"memory", 20}, {"cpu", 5}, {"example.com/gpu", 1}},
			want: []ResourceUsage{{"cpu", 5}, {"example.com/gpu", 1}, {"memory", 20}}},
		{name: "the last value of a resource wins", set: []ResourceUsage{{"cpu", 5}, {"memory", 20}, {"cpu", 7}},
			want: []ResourceUsage{{"cpu", 7}, {"memory", 20}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c ContainerUsage
			for _, u := range tt.set {
				c.Set(u.Resource, u.Milli)
			}
			if !slices.Equal(c.Usage, tt.want) {
				t.Errorf("Usage = %v, want %v", c.Usage, tt.want)
			}
			for _, u := range tt.want {
				if v, ok := c.Of(u.Resource); !ok || v != u.Milli {
					t.Errorf("Of(%s) = %d, %v; want %d", u.Resource, v, ok, u.Milli)
				}
			}
			if v, ok := c.Of("ephemeral-storage"); ok {
				t.Errorf("Of(ephemeral-storage) = %d, true; want none", v)
			}
		})
	}
}

func TestResourceSamples(t *testing.T) {
	mem := corev1.ResourceMemory
	first := testNow.Add(-time.Second)
	items := []PodUsage{
		{Name: "a", Timestamp: first, Window: time.Minute, Containers: []ContainerUsage{
			{Name: "app", Usage: []ResourceUsage{{cpu, 300}, {mem, 1000}}},
			{Name: "proxy", Usage: cpuUsage(50)},
		}},
		{Name: "b", Timestamp: testNow, Containers: []ContainerUsage{
			{Name: "app", Usage: []ResourceUsage{{cpu, 100}, {mem, 2000}}},
		}},
		{Name: "c", Timestamp: testNow}, // no containers
	}
	tests := []struct {
		name      string
		items     []PodUsage
		resource  corev1.ResourceName
		container string
		want      map[string]int64
		wantErr   string
	}{
		{name: "pod sums containers", items: items, resource: cpu, want: map[string]int64{"a": 350, "b": 100}},
		{name: "pod with a container lacking the resource is skipped", items: items, resource: mem, want: map[string]int64{"b": 2000}},
		{name: "named container", items: items, resource: cpu, container: "proxy", want: map[string]int64{"a": 50}},
		{name: "named container lacking the resource", items: items, resource: mem, container: "proxy", want: map[string]int64{}},
		{name: "empty list", items: nil, resource: cpu, wantErr: "no metrics returned from resource metrics API"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ts, err := ResourceSamples(tt.items, tt.resource, tt.container)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !ts.Equal(first) {
				t.Errorf("timestamp = %v, want the first item's %v", ts, first)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for name, v := range tt.want {
				if got[name].Value != v {
					t.Errorf("%s = %d, want %d", name, got[name].Value, v)
				}
			}
			if s, ok := got["a"]; ok && (s.Window != time.Minute || !s.Timestamp.Equal(first)) {
				t.Errorf("sample a lost its window/timestamp: %+v", s)
			}
		})
	}
}

func TestFromV1beta1PodMetrics(t *testing.T) {
	in := []metricsv1beta1.PodMetrics{{
		ObjectMeta: metav1.ObjectMeta{Name: "a"},
		Timestamp:  metav1.NewTime(testNow),
		Window:     metav1.Duration{Duration: 30 * time.Second},
		Containers: []metricsv1beta1.ContainerMetrics{{Name: "app", Usage: corev1.ResourceList{cpu: resource.MustParse("1.5")}}},
	}}
	tests := []struct {
		name string
		want PodUsage
	}{
		{name: "converts to milli-units", want: PodUsage{Name: "a", Timestamp: testNow, Window: 30 * time.Second,
			Containers: []ContainerUsage{{Name: "app", Usage: cpuUsage(1500)}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FromV1beta1PodMetrics(in)
			if len(got) != 1 || got[0].Name != tt.want.Name || !got[0].Timestamp.Equal(tt.want.Timestamp) || got[0].Window != tt.want.Window ||
				len(got[0].Containers) != 1 || !slices.Equal(got[0].Containers[0].Usage, tt.want.Containers[0].Usage) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
