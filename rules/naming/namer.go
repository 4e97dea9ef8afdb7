package naming

import (
	"fmt"
	"regexp"

	"github.com/tidal-autoscaler/tidal/rules/config"
)

// Namer decides which discovered series a rule keeps and the API metric
// name of each, as prometheus-adapter does.
type Namer struct {
	filters []seriesFilter
	matches *regexp.Regexp
	as      string
}

type seriesFilter struct {
	re   *regexp.Regexp
	keep bool // keep series that match (is) or that don't (isNot)
}

// NewNamer compiles a rule's seriesFilters and name. name.matches defaults
// to `.*` and name.as to `$0` (no capture group) or `$1` (one group).
func NewNamer(filters []config.SeriesFilter, name config.NameMapping) (*Namer, error) {
	n := &Namer{}
	for i, f := range filters {
		if (f.Is == "") == (f.IsNot == "") {
			return nil, fmt.Errorf("seriesFilters[%d]: set exactly one of is and isNot", i)
		}
		expr, keep := f.Is, true
		if f.IsNot != "" {
			expr, keep = f.IsNot, false
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			return nil, fmt.Errorf("seriesFilters[%d]: %w", i, err)
		}
		n.filters = append(n.filters, seriesFilter{re: re, keep: keep})
	}
	matches := name.Matches
	if matches == "" {
		matches = ".*"
	}
	re, err := regexp.Compile(matches)
	if err != nil {
		return nil, fmt.Errorf("name.matches: %w", err)
	}
	n.matches, n.as = re, name.As
	if n.as == "" {
		switch re.NumSubexp() {
		case 0:
			n.as = "$0"
		case 1:
			n.as = "$1"
		default:
			return nil, fmt.Errorf("name.matches %q has %d capture groups; set name.as", matches, re.NumSubexp())
		}
	}
	return n, nil
}

// Keep reports whether the rule serves the series: it passes every filter
// and matches name.matches.
func (n *Namer) Keep(series string) bool {
	for _, f := range n.filters {
		if f.re.MatchString(series) != f.keep {
			return false
		}
	}
	return n.matches.MatchString(series)
}

// MetricName returns the API name of a series; ok is false when the series
// does not match name.matches.
func (n *Namer) MetricName(series string) (name string, ok bool) {
	m := n.matches.FindStringSubmatchIndex(series)
	if m == nil {
		return "", false
	}
	return string(n.matches.ExpandString(nil, n.as, series, m)), true
}
