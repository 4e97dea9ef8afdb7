package autoscaler

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// sumsOf is scrapeSums's reading of a page already fetched from url.
func sumsOf(body, url string, names ...string) ([]float64, error) {
	sums := make([]float64, len(names))
	found := make([]bool, len(names))
	for _, line := range strings.Split(body, "\n") {
		for i, name := range names {
			if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
				continue
			}
			v, err := lineValue(url, line)
			if err != nil {
				return nil, err
			}
			sums[i] += v
			found[i] = true
		}
	}
	for i, ok := range found {
		if !ok {
			return sums, fmt.Errorf("%s has no %s: %w", url, names[i], errNoSeries)
		}
	}
	return sums, nil
}

// byLabel is each value of label on the series of the counter name in
// a page of the text format, with its value summed over the other labels
// (none: the counter has no series yet).
func byLabel(body, url, name, label string) (map[string]float64, error) {
	out := map[string]float64{}
	prefix, key := name+"{", label+`="`
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		i := strings.Index(line, key)
		if i < 0 {
			continue
		}
		v := line[i+len(key):]
		j := strings.IndexByte(v, '"')
		if j < 0 {
			return nil, fmt.Errorf("%s: %q: unterminated %s", url, line, label)
		}
		x, err := lineValue(url, line)
		if err != nil {
			return nil, err
		}
		out[v[:j]] += x
	}
	return out, nil
}

// lineValue is the value of a series' line of the text format, its last
// field, read from url.
func lineValue(url, line string) (float64, error) {
	f := strings.Fields(line)
	v, err := strconv.ParseFloat(f[len(f)-1], 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %q: %w", url, line, err)
	}
	return v, nil
}

// errNoSeries is scrapeSums's error for a metric with no series yet:
// a vector's series appear with their first increment.
var errNoSeries = errors.New("no series")
