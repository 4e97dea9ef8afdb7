package ruleset_test

import (
	"bytes"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"

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

// TestReloaderUnreadableFile: a rule file that cannot be read is logged
// and counted as a failed reload once per distinct error, not at every
// poll; the last good rules keep serving, and the file's return is logged.
func TestReloaderUnreadableFile(t *testing.T) {
	logs := captureKlog(t)
	path := filepath.Join(t.TempDir(), "rules.yaml")
	write := func(s string) func(t *testing.T) {
		return func(t *testing.T) {
			if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	remove := func(t *testing.T) {
		if err := os.RemoveAll(path); err != nil {
			t.Fatal(err)
		}
	}
	write(good)(t)
	m := monitor.New()
	m.Register(metrics.NewKubeRegistry())
	r := ruleset.NewReloader(ruleset.ReloaderOptions{
		Path: path,
		Load: func(path string, data []byte) (*ruleset.Set, error) {
			return ruleset.Load(path, data, promtest.Mapper(), backends(t))
		},
		Metrics: m,
	})
	if err := r.LoadInitial(); err != nil {
		t.Fatal(err)
	}
	twoRules := good + good[len("\nexternalRules:\n"):]

	steps := []struct {
		name         string
		do           func(t *testing.T)
		wantChanged  bool
		wantErr      string
		wantFailures float64
		// wantLogs are in the log lines of the step; none are wanted when
		// empty.
		wantLogs  []string
		wantRules int
	}{
		{name: "missing file is reported", do: remove, wantErr: "no such file", wantFailures: 1, wantLogs: []string{"Cannot read the rule file", path}, wantRules: 1},
		{name: "still missing: not reported again", do: remove, wantFailures: 1, wantRules: 1},
		{name: "another error is reported", do: func(t *testing.T) {
			if err := os.Mkdir(path, 0o755); err != nil {
				t.Fatal(err)
			}
		}, wantErr: "is a directory", wantFailures: 2, wantLogs: []string{"Cannot read the rule file", "is a directory"}, wantRules: 1},
		{name: "readable and changed: loaded and said so", do: func(t *testing.T) { remove(t); write(twoRules)(t) }, wantChanged: true, wantFailures: 2, wantLogs: []string{"The rule file is readable again", "Loaded the changed rule file"}, wantRules: 2},
		{name: "missing again is reported again", do: remove, wantErr: "no such file", wantFailures: 3, wantLogs: []string{"Cannot read the rule file"}, wantRules: 2},
		{name: "back unchanged: said so, nothing reloads", do: write(twoRules), wantFailures: 3, wantLogs: []string{"The rule file is readable again"}, wantRules: 2},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			st.do(t)
			logs.Reset()
			changed, err := r.Check()
			klog.Flush()
			if changed != st.wantChanged {
				t.Errorf("changed = %v, want %v", changed, st.wantChanged)
			}
			if st.wantErr == "" && err != nil || st.wantErr != "" && (err == nil || !strings.Contains(err.Error(), st.wantErr)) {
				t.Errorf("err = %v, want %q", err, st.wantErr)
			}
			if got, _ := testutil.GetCounterMetricValue(m.Reloads.WithLabelValues("failure")); got != st.wantFailures {
				t.Errorf("%v reload failures, want %v", got, st.wantFailures)
			}
			if len(st.wantLogs) == 0 && logs.Len() > 0 {
				t.Errorf("logged %q, want nothing", logs.String())
			}
			for _, want := range st.wantLogs {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("log %q does not mention %q", logs.String(), want)
				}
			}
			if got := len(r.Current().External); got != st.wantRules {
				t.Errorf("%d external rules in force, want %d", got, st.wantRules)
			}
		})
	}
}

// captureKlog sends klog's output to the returned buffer for the test.
func captureKlog(t *testing.T) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	klog.LogToStderr(false)
	klog.SetOutput(&buf)
	t.Cleanup(func() {
		klog.SetOutput(os.Stderr)
		klog.LogToStderr(true)
	})
	return &buf
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
