package promql

import (
	"time"

	"github.com/prometheus/prometheus/promql/parser"

	"github.com/tidal-autoscaler/tidal/rules/config"
)

// Window returns the window a query aggregates over: the range of its
// range selectors and subqueries when they all agree (rate(x[2m]) -> 2m),
// and 0 when it has none or several different ones. The query is parsed
// as the rule checks parse it (config.ParsePromQL).
func Window(query string) time.Duration {
	expr, err := config.ParsePromQL(query)
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
