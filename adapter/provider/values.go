package provider

import (
	"sync"
	"time"

	"github.com/prometheus/prometheus/promql/parser"
)

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
