package naming

import "fmt"

// Rejection says why the rule does not serve series: the first
// seriesFilter it fails, or name.matches not matching, or name.as
// rendering an empty name. It returns "" when the rule serves the series
// (Keep is true and MetricName gives a name). `tidal rules explain` prints
// it for every skipped series.
func (n *Namer) Rejection(series string) string {
	for i, f := range n.filters {
		if f.re.MatchString(series) == f.keep {
			continue
		}
		if f.keep {
			return fmt.Sprintf("seriesFilters[%d] (is: %q) does not match the series name", i, f.re.String())
		}
		return fmt.Sprintf("seriesFilters[%d] (isNot: %q) matches the series name", i, f.re.String())
	}
	if !n.matches.MatchString(series) {
		return fmt.Sprintf("name.matches %q does not match the series name", n.matches.String())
	}
	if name, _ := n.MetricName(series); name == "" {
		return fmt.Sprintf("name.as %q renders an empty metric name", n.as)
	}
	return ""
}
