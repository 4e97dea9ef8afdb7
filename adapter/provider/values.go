package provider

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/prometheus/prometheus/promql/parser"
	"k8s.io/apimachinery/pkg/api/resource"
)

// errBadValue marks a sample that cannot be served as a number.
var errBadValue = errors.New("not a finite number")

// maxMilli is the largest magnitude served in milli-units (below 2^63).
const maxMilli = 1 << 62

// Quantity converts a sample to a quantity in milli-units, rounded half
// away from zero (1.0005 -> 1001m, 0.3125 -> 313m), not truncated as
// prometheus-adapter does (0.3125 -> 312m). Values too large for
// milli-units are served in whole units, rounded. NaN and ±Inf are
// errors: the HPA must not read them as 0 (or as -9223372036854775808m).
func Quantity(v float64) (resource.Quantity, error) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return resource.Quantity{}, fmt.Errorf("the value is %v, %w", v, errBadValue)
	}
	if m := math.Round(v * 1000); math.Abs(m) < maxMilli {
		return *resource.NewMilliQuantity(int64(m), resource.DecimalSI), nil
	}
	if u := math.Round(v); math.Abs(u) < maxMilli {
		return *resource.NewQuantity(int64(u), resource.DecimalSI), nil
	}
	return resource.Quantity{}, fmt.Errorf("the value %g is out of range, %w", v, errBadValue)
}

// windowParser accepts every optional PromQL feature, as the rule checks do.
var windowParser = parser.NewParser(parser.Options{
	EnableExperimentalFunctions:  true,
	ExperimentalDurationExpr:     true,
	EnableExtendedRangeSelectors: true,
	EnableBinopFillModifiers:     true,
})

// Window returns the window a query aggregates over: the range of its
// range selectors and subqueries when they all agree (rate(x[2m]) -> 2m),
// and 0 when it has none or several different ones.
func Window(query string) time.Duration {
	expr, err := windowParser.ParseExpr(query)
	if err != nil {
		return 0
	}
	var window time.Duration
	ambiguous := false
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		var r time.Duration
		switch e := n.(type) {
		case *parser.MatrixSelector:
			r = e.Range
		case *parser.SubqueryExpr:
			r = e.Range
		default:
			return nil
		}
		if r <= 0 || (window != 0 && r != window) {
			ambiguous = true
		}
		window = r
		return nil
	})
	if ambiguous {
		return 0
	}
	return window
}

// windows caches Window per rule and series: the range is written in the
// rule's template, not in the request. It is emptied when it grows past
// maxWindows entries (rules replaced by reloads stay in it until then).
type windows struct {
	mu sync.Mutex
	m  map[any]*int64
}

const maxWindows = 10000

func (w *windows) get(key any, query string) *int64 {
	w.mu.Lock()
	v, ok := w.m[key]
	w.mu.Unlock()
	if ok {
		return v
	}
	if d := Window(query); d > 0 {
		s := int64(d / time.Second)
		v = &s
	}
	w.mu.Lock()
	if w.m == nil || len(w.m) >= maxWindows {
		w.m = map[any]*int64{}
	}
	w.m[key] = v
	w.mu.Unlock()
	return v
}
