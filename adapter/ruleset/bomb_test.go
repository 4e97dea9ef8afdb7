package ruleset_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidal-autoscaler/tidal/adapter/internal/promtest"
	"github.com/tidal-autoscaler/tidal/adapter/ruleset"
	"github.com/tidal-autoscaler/tidal/rules/config"
)

// aliasBomb is good's external rule under merge keys nested levels deep,
// each level merging the one below 8 times: about 600 bytes that a naive
// walk expands to 8^levels mappings.
func aliasBomb(levels int) string {
	var b strings.Builder
	b.WriteString("externalRules:\n- &a0 {seriesQuery: 'queue_messages{queue!=\"\"}', resources: {namespaced: false}, metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (queue)'}\n")
	for i := 1; i <= levels; i++ {
		refs := strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d, ", i-1), 8), ", ")
		fmt.Fprintf(&b, "- &a%d {<<: [%s]}\n", i, refs)
	}
	return b.String()
}

// TestReloaderRejectsBombs: a rule file that explodes when decoded, is
// too large, or is slow to load for any other reason is rejected with an
// error naming the file, at start (the adapter refuses to start) and on
// reload (the last good rules keep serving).
func TestReloaderRejectsBombs(t *testing.T) {
	const expansion = "aliases (*name) and merge keys (<<) expand the rule file past"
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	slow := func(path string, data []byte) (*ruleset.Set, error) {
		if strings.Contains(string(data), "# slow") {
			<-release
		}
		return ruleset.Load(path, data, promtest.Mapper(), backends(t))
	}
	tests := []struct {
		name    string
		content string
		want    string
	}{
		{"merge keys nested 8 levels", aliasBomb(8), expansion},
		{"merge keys nested 12 levels", aliasBomb(12), expansion},
		{"larger than config.MaxFileBytes", good + "#" + strings.Repeat("x", config.MaxFileBytes), "larger than the limit of"},
		{"slower to load than LoadTimeout", good + "# slow\n", "took longer than"},
	}
	for _, tt := range tests {
		for _, when := range []string{"at start", "on reload"} {
			t.Run(tt.name+" "+when, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "rules.yaml")
				first := tt.content
				if when == "on reload" {
					first = good
				}
				if err := os.WriteFile(path, []byte(first), 0o644); err != nil {
					t.Fatal(err)
				}
				var failures int
				r := ruleset.NewReloader(ruleset.ReloaderOptions{
					Path:        path,
					Load:        slow,
					OnFailure:   func(error) { failures++ },
					LoadTimeout: 100 * time.Millisecond,
				})
				start := time.Now()
				err := r.LoadInitial()
				if when == "on reload" {
					if err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
						t.Fatal(err)
					}
					start = time.Now()
					var changed bool
					changed, err = r.Check()
					if changed || failures != 1 {
						t.Errorf("changed = %v with %d failures reported, want false and 1", changed, failures)
					}
				}
				t.Logf("rejected in %v", time.Since(start))
				if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("err = %v, want one naming %s and saying %q", err, path, tt.want)
				}
				wantRules := 0
				if when == "on reload" {
					wantRules = 1 // the last good rules
				}
				if got := len(r.Current().External); got != wantRules {
					t.Errorf("%d external rules in force, want %d", got, wantRules)
				}
			})
		}
	}
}
