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
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %q: %w", url, line, err)
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

// errNoSeries is scrapeSums's error for a metric with no series yet:
// a vector's series appear with their first increment.
var errNoSeries = errors.New("no series")
