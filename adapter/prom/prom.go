// Package prom is the adapter's view of Prometheus: discovery of series
// shapes and instant queries, against one or several Prometheus-compatible
// backends (Prometheus, Thanos, Mimir, Cortex).
//
// A Client coalesces identical concurrent queries into one HTTP request,
// answers repeated queries from a short bounded cache, bounds each request
// by a timeout, and classifies failures (see Error) so that callers can
// answer "Prometheus is down" differently from "this query is wrong".
//
// FlagOptions are the --prometheus-* flags that reach the default backend,
// shared by `tidal adapter` and `tidal rules explain`.
package prom

import (
	"context"
	"time"

	"github.com/prometheus/common/model"

	"github.com/tidal-autoscaler/tidal/adapter/prom/internal/seriesjson"
)

// Client is one Prometheus-compatible backend. Implementations are safe
// for concurrent use.
type Client interface {
	// Series returns the distinct shapes (metric name and label names) of
	// the series matching any of matchers between start and end. Label
	// values are dropped while the response is decoded, so memory grows
	// with the number of names, not of series.
	Series(ctx context.Context, matchers []string, start, end time.Time) ([]Shape, error)
	// Query evaluates an instant query at ts; the zero ts means the
	// server's "now", and such results may come from a cache younger than
	// the client's cache TTL. Sample timestamps are the evaluation time
	// Prometheus reports, so a cached answer shows its age. A scalar
	// result is returned as one sample without labels.
	Query(ctx context.Context, query string, ts time.Time) (model.Vector, error)
	// Name is the backend's name ("default" for --prometheus-url).
	Name() string
}

// Shape is what discovery needs of a series: its name and its label names
// (sorted, without __name__), as the series decoder keeps them.
type Shape = seriesjson.Shape
