package prom

import (
	"errors"
	"fmt"
	"net/http"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/tidal-autoscaler/tidal/adapter/prom/internal/seriesjson"
)

// decodeSeries reads an /api/v1/series response and keeps only the
// distinct (name, label names) pairs. It streams the body through a small
// buffer and skips label values without copying them, so a response of a
// million series costs the memory of its few hundred shapes and almost no
// garbage.
//
// The distinct shapes may hold at most maxShapeBytes (estimated); more
// fails with ErrTooLarge.
func decodeSeries(resp *http.Response, maxShapeBytes int64) ([]Shape, error) {
	r, err := seriesjson.ReadLimited(resp.Body, maxShapeBytes)
	if err == nil && r.Status == "success" {
		return r.Shapes, nil
	}
	if errors.Is(err, seriesjson.ErrTooManyShapes) {
		return nil, fmt.Errorf("%w: %v; narrow the rule's seriesQuery", ErrTooLarge, err)
	}
	if r.Status == "error" {
		return nil, &promv1.Error{Type: promv1.ErrorType(r.ErrType), Msg: r.ErrMsg}
	}
	typ := promv1.ErrBadResponse
	switch {
	case resp.StatusCode/100 == 5:
		typ = promv1.ErrServer
	case resp.StatusCode/100 == 4:
		typ = promv1.ErrClient
	}
	if err == nil {
		err = fmt.Errorf("status %q, want \"success\"", r.Status)
	}
	return nil, &promv1.Error{Type: typ, Msg: fmt.Sprintf("HTTP %s: cannot decode the series response: %v", resp.Status, err)}
}
