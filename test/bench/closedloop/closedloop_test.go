package closedloop

import (
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		from, to int
		ok       bool
	}{
		{"the default step", 3, 6, true},
		{"the smoke step", 1, 2, true},
		{"four from one", 1, 4, true},
		{"five from one: beyond one step's limit", 1, 5, false},
		{"no step", 3, 3, false},
		{"down", 3, 2, false},
		{"ten", 5, 10, true},
		{"eleven: 11/10 is within the tolerance", 6, 11, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := config{from: tc.from, to: tc.to, window: time.Minute, sync: 15 * time.Second, rounds: 1}
			if err := c.validate(); (err == nil) != tc.ok {
				t.Errorf("validate(%d -> %d) = %v, want ok %v", tc.from, tc.to, err, tc.ok)
			}
		})
	}
}

func TestPhase(t *testing.T) {
	for _, tc := range []struct {
		round, rounds int
		want          float64
	}{{1, 1, 0.5}, {1, 2, 0.25}, {2, 2, 0.75}, {3, 4, 0.625}} {
		if got := phase(tc.round, tc.rounds); got != tc.want {
			t.Errorf("phase(%d, %d) = %v, want %v", tc.round, tc.rounds, got, tc.want)
		}
	}
}

func TestStepAt(t *testing.T) {
	c := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	p := 10 * time.Second
	for _, tc := range []struct {
		name     string
		earliest time.Duration
		frac     float64
		want     time.Duration
	}{
		{"first slot is free", time.Second, 0.5, 5 * time.Second},
		{"exactly on the slot", 5 * time.Second, 0.5, 5 * time.Second},
		{"slot passed: next period", 6 * time.Second, 0.5, 15 * time.Second},
		{"several periods later", 31 * time.Second, 0.25, 32500 * time.Millisecond},
		{"just after a slot", 32600 * time.Millisecond, 0.25, 42500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := stepAt(c, c.Add(tc.earliest), p, tc.frac)
			if got.Sub(c) != tc.want {
				t.Errorf("stepAt = creation + %s, want + %s", got.Sub(c), tc.want)
			}
		})
	}
}

func TestBound(t *testing.T) {
	if got := bound(time.Second, time.Minute, 15*time.Second); got != 76*time.Second {
		t.Errorf("bound = %s, want 1m16s", got)
	}
}

func TestSteady(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []float64
		want   int
		ok     bool
	}{
		{"steady", []float64{100, 99, 102}, 3, true},
		{"a pod missing", []float64{100, 100}, 3, false},
		{"a pod too many", []float64{100, 100, 100, 100}, 3, false},
		{"still moving", []float64{100, 120, 100}, 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := steady(tc.values, tc.want); (err == nil) != tc.ok {
				t.Errorf("steady(%v, %d) = %v, want ok %v", tc.values, tc.want, err, tc.ok)
			}
		})
	}
}

func TestScrapeInterval(t *testing.T) {
	body := `{"status":"success","data":{"yaml":"global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n- job_name: x\n"}}`
	got, err := scrapeInterval([]byte(body))
	if err != nil || got != time.Second {
		t.Errorf("scrapeInterval = %s, %v; want 1s", got, err)
	}
	if _, err := scrapeInterval([]byte(`{"data":{"yaml":"global: {}\n"}}`)); err == nil {
		t.Error("no scrape_interval: no error")
	}
}

func TestRules(t *testing.T) {
	for _, w := range []struct {
		d    time.Duration
		want string
	}{{time.Minute, "[1m]"}, {5 * time.Second, "[5s]"}, {90 * time.Second, "[1m30s]"}} {
		if r := rules(w.d); !strings.Contains(r, w.want+"))") {
			t.Errorf("rules(%s) has no %s window:\n%s", w.d, w.want, r)
		}
	}
}
