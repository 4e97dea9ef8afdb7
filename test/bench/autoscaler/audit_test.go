package autoscaler

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestLongestGap(t *testing.T) {
	at := func(s ...int) []time.Time {
		var out []time.Time
		for _, v := range s {
			out = append(out, time.Unix(int64(v), 0))
		}
		return out
	}
	// A window of 45 s, from 0 to 45.
	from, to := time.Unix(0, 0), time.Unix(45, 0)
	for _, tc := range []struct {
		name    string
		visits  map[string][]time.Time
		objects int
		want    time.Duration
	}{
		{"no objects", nil, 0, 0},
		{"an object never visited went the whole window", map[string][]time.Time{"a": at(0, 15, 30)}, 2, 45 * time.Second},
		{"one visit: the open stretch after it", map[string][]time.Time{"a": at(5)}, 1, 40 * time.Second},
		{"one visit: the open stretch before it", map[string][]time.Time{"a": at(41)}, 1, 41 * time.Second},
		{"unsorted visits", map[string][]time.Time{"a": at(30, 2, 15)}, 1, 15 * time.Second},
		{"longest over objects", map[string][]time.Time{"a": at(0, 15, 30), "b": at(1, 40)}, 2, 39 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := longestGap(tc.visits, from, to, tc.objects); got != tc.want {
				t.Errorf("longestGap = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestBusiestClients(t *testing.T) {
	for _, tc := range []struct {
		name   string
		counts map[string]int
		n      int
		want   string
	}{
		{"none", nil, 3, "none"},
		{"most first, ties by name", map[string]int{"b": 2, "a": 2, "kwok": 9}, 3, "kwok=9 a=2 b=2"},
		{"the rest as one entry", map[string]int{"a": 1, "b": 5, "c": 3, "d": 2}, 2, "b=5 c=3 others=3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := busiestClients(tc.counts, tc.n); got != tc.want {
				t.Errorf("busiestClients = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestCountWindow: the users' requests by kind and every other client's by
// name, only those received in the window and completed.
func TestCountWindow(t *testing.T) {
	line := func(stage, user, verb, at string) string {
		return `{"stage":"` + stage + `","verb":"` + verb + `","requestReceivedTimestamp":"` + at +
			`","user":{"username":"` + user + `"},"objectRef":{"resource":"pods","namespace":"n","name":"p"}}` + "\n"
	}
	log := line("ResponseComplete", "tidal", "list", "2026-01-01T00:00:10Z") +
		line("ResponseComplete", "tidal", "get", "2026-01-01T00:00:20Z") +
		line("ResponseStarted", "tidal", "watch", "2026-01-01T00:00:20Z") +
		line("ResponseComplete", "kwok", "patch", "2026-01-01T00:00:30Z") +
		line("ResponseComplete", "kwok", "patch", "2026-01-01T00:00:31Z") +
		line("ResponseComplete", "system:kube-controller-manager", "list", "2026-01-01T00:00:44Z") +
		line("ResponseComplete", "kwok", "patch", "2026-01-01T00:00:45Z") + // the window's end: out
		line("ResponseComplete", "tidal", "list", "2026-01-01T00:00:09Z") // before it: out
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	c, err := countWindow(path, []string{"tidal"}, from, from.Add(35*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.mine.String(), "2 (get pods=1 list pods=1)"; got != want {
		t.Errorf("the users' requests = %s, want %s", got, want)
	}
	if got, want := busiestClients(c.others, 5), "kwok=2 system:kube-controller-manager=1"; got != want {
		t.Errorf("the other clients' requests = %s, want %s", got, want)
	}
}
