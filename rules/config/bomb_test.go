package config_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidal-autoscaler/tidal/rules/config"
)

// mergeBomb is a rule file of a few hundred bytes whose merge keys nest
// levels deep, each level merging the one below width times: walking it
// naively visits width^levels mappings.
func mergeBomb(levels, width int) string {
	var b strings.Builder
	b.WriteString("rules:\n- &a0 {seriesQuery: 'up{namespace!=\"\"}', metricsQuery: 'sum(<<.Series>>) by (<<.GroupBy>>)'}\n")
	for i := 1; i <= levels; i++ {
		refs := strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d, ", i-1), width), ", ")
		fmt.Fprintf(&b, "- &a%d {<<: [%s]}\n", i, refs)
	}
	return b.String()
}

// aliasedRules is one rule of keys entries written once and used as every
// item of a list of n rules.
func aliasedRules(keys, n int) string {
	var b strings.Builder
	b.WriteString("rules:\n- &r\n  seriesQuery: up\n  metricsQuery: up\n")
	for i := range keys {
		fmt.Fprintf(&b, "  k%d: v\n", i)
	}
	for range n {
		b.WriteString("- *r\n")
	}
	return b.String()
}

// TestParseBoundsExpansion: a file that aliases and merge keys blow up,
// or that is too large, is rejected with one problem naming the file and
// what to do; anchors used the ordinary way still load.
func TestParseBoundsExpansion(t *testing.T) {
	const budget = "aliases (*name) and merge keys (<<) expand the rule file past"
	oneAnchorManyRules := "rules:\n- &base {seriesQuery: 'up{namespace!=\"\"}', resources: {template: <<.Resource>>}, metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'}\n" +
		strings.Repeat("- <<: *base\n  name: {as: x}\n", 500)
	tests := []struct {
		name string
		yaml string
		// want is in the only problem; "" wants none.
		want string
	}{
		{"merge keys nested 8 levels, 8 wide", mergeBomb(8, 8), budget},
		{"merge keys nested 10 levels, 10 wide", mergeBomb(10, 10), budget},
		{"a 2,000-key rule aliased 2,000 times", aliasedRules(2000, 2000), budget},
		{"larger than MaxFileBytes", "#" + strings.Repeat("x", config.MaxFileBytes) + "\n", "larger than the limit of 4194304 bytes (4 MiB)"},
		{"one anchor merged into 500 rules loads", oneAnchorManyRules, ""},
		{"merge keys nested 3 levels loads", mergeBomb(3, 2), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			cfg, err := config.Parse("bomb.yaml", []byte(tt.yaml))
			t.Logf("%d bytes parsed in %v", len(tt.yaml), time.Since(start))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("problems:\n%v", err)
				}
				if cfg == nil {
					t.Fatal("no config")
				}
				return
			}
			probs, ok := err.(config.Problems)
			if !ok || len(probs) != 1 {
				t.Fatalf("error = %v, want exactly one problem", err)
			}
			if p := probs[0]; p.File != "bomb.yaml" || !strings.Contains(p.Message, tt.want) {
				t.Errorf("problem = %v, want one in bomb.yaml containing %q", p, tt.want)
			}
			if cfg != nil {
				t.Error("a config was returned for a file that was not decoded")
			}
		})
	}
}
