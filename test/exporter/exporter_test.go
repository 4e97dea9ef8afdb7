package exporter

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// fakeClock is advanced by the test.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// step advances the clock, then sets the rate unless rate < 0.
type step struct {
	advance time.Duration
	rate    float64
}

func TestCounterFollowsRate(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	tests := []struct {
		name  string
		steps []step
		want  float64
	}{
		{
			name:  "constant rate grows linearly",
			steps: []step{{0, 0.5}, {10 * time.Second, -1}},
			want:  5,
		},
		{
			name:  "rate change keeps the value reached",
			steps: []step{{0, 2}, {3 * time.Second, 0}, {100 * time.Second, 1}, {4 * time.Second, -1}},
			want:  6 + 0 + 4,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := New()
			e.now = clock.now
			labels := Labels{"namespace": "ns", "pod": "p", "container": "c"}
			for _, s := range tt.steps {
				clock.t = clock.t.Add(s.advance)
				if s.rate >= 0 {
					e.SetCounterRate(ContainerCPU, labels, s.rate)
				}
			}
			got := e.series[key(ContainerCPU, labels)].valueAt(clock.now())
			if got != tt.want {
				t.Fatalf("counter = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestHandlerServesSeries(t *testing.T) {
	e := New()
	e.SetPodMemory("ns", "web-1", "app", 1024)
	e.SetGauge("queue_length", Labels{"queue": "orders"}, 7)
	e.SetPodCPU("ns", "web-1", "app", 0.25)
	e.SetPodCPU("ns", "web-2", "app", 0.25)
	e.DeletePod("ns", "web-2")

	srv := httptest.NewServer(e.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	text := string(body)
	for _, want := range []string{
		`container_memory_working_set_bytes{container="app",namespace="ns",pod="web-1"} 1024`,
		`queue_length{queue="orders"} 7`,
		`# TYPE container_cpu_usage_seconds_total counter`,
		`container_cpu_usage_seconds_total{container="app",namespace="ns",pod="web-1"}`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("exposition lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, `pod="web-2"`) {
		t.Errorf("deleted pod still exported:\n%s", text)
	}
}
