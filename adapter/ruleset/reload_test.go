package ruleset_test

import (
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"

	"github.com/tidal-autoscaler/tidal/adapter/internal/promtest"
	"github.com/tidal-autoscaler/tidal/adapter/monitor"
	"github.com/tidal-autoscaler/tidal/adapter/prom"
	"github.com/tidal-autoscaler/tidal/adapter/ruleset"
	"github.com/tidal-autoscaler/tidal/rules/config"
)

const good = `
externalRules:
- seriesQuery: 'queue_messages{queue!=""}'
  resources: {namespaced: false}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (queue)'
`

func TestReloader(t *testing.T) {
	srv := promtest.New(t)
	u := srv.URL
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(good)

	m := monitor.New()
	m.Register(metrics.NewKubeRegistry())
	var changes int
	var failures []error
	client := func() prom.Client {
		c, err := prom.New(prom.Options{Name: prom.DefaultBackend, URL: mustURL(t, u)})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}()
	r := ruleset.NewReloader(ruleset.ReloaderOptions{
		Path: path,
		Load: func(path string, data []byte) (*ruleset.Set, error) {
			return ruleset.Load(path, data, promtest.Mapper(), func(named []config.Backend) (*prom.Backends, error) {
				return prom.NewBackends(client, prom.Options{}, named)
			})
		},
		OnChange:  func(*ruleset.Set) { changes++ },
		OnFailure: func(err error) { failures = append(failures, err) },
		Metrics:   m,
	})
	if err := r.LoadInitial(); err != nil {
		t.Fatal(err)
	}
	first := r.Current()
	if len(first.External) != 1 || changes != 1 {
		t.Fatalf("initial load: %d external rules, %d changes", len(first.External), changes)
	}

	steps := []struct {
		name        string
		content     string
		wantChanged bool
		wantErr     string
		wantRules   int
	}{
		{name: "unchanged file: nothing happens", content: good, wantRules: 1},
		{name: "bad file is rejected with its problems", content: good + "  bogus: 1\n", wantErr: "bogus", wantRules: 1},
		{name: "the same bad file is not reported twice", content: good + "  bogus: 1\n", wantRules: 1},
		{name: "a fixed file loads", content: good + good[len("\nexternalRules:\n"):], wantChanged: true, wantRules: 2},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			before := len(failures)
			write(st.content)
			changed, err := r.Check()
			if changed != st.wantChanged {
				t.Errorf("changed = %v, want %v", changed, st.wantChanged)
			}
			if st.wantErr != "" {
				var probs config.Problems
				if err == nil || !strings.Contains(err.Error(), st.wantErr) || !errors.As(err, &probs) {
					t.Errorf("err = %v, want problems mentioning %q", err, st.wantErr)
				}
				if len(failures) != before+1 {
					t.Errorf("OnFailure ran %d times, want once", len(failures)-before)
				}
			} else if err != nil {
				t.Errorf("err = %v", err)
			}
			if got := len(r.Current().External); got != st.wantRules {
				t.Errorf("%d external rules in force, want %d", got, st.wantRules)
			}
		})
	}
	ok, _ := testutil.GetCounterMetricValue(m.Reloads.WithLabelValues("success"))
	bad, _ := testutil.GetCounterMetricValue(m.Reloads.WithLabelValues("failure"))
	if ok != 2 || bad != 1 {
		t.Errorf("reloads: %v successes, %v failures; want 2 and 1", ok, bad)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
