package prom

import (
	"context"
	"errors"
	"fmt"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
)

// Sentinels classify an *Error; test with errors.Is.
var (
	// ErrUnavailable: the backend could not be reached or answered with a
	// server error (connection refused, DNS, TLS, 5xx from a proxy).
	ErrUnavailable = errors.New("backend unavailable")
	// ErrTimeout: no answer within the request timeout.
	ErrTimeout = errors.New("backend timed out")
	// ErrQuery: the backend rejected or failed the query itself (bad
	// PromQL, an execution error); retrying does not help, the rule does.
	ErrQuery = errors.New("query failed")
)

// Error is a failed request to a backend.
type Error struct {
	Backend string
	URL     string // redacted
	// Kind is one of the sentinels.
	Kind error
	Err  error
}

func (e *Error) Error() string {
	switch e.Kind {
	case ErrUnavailable:
		return fmt.Sprintf("Prometheus backend %q (%s) is unavailable: %v", e.Backend, e.URL, e.Err)
	case ErrTimeout:
		return fmt.Sprintf("Prometheus backend %q (%s) did not answer in time: %v", e.Backend, e.URL, e.Err)
	default:
		return fmt.Sprintf("Prometheus backend %q (%s) failed the query: %v", e.Backend, e.URL, e.Err)
	}
}

// Unwrap exposes both the kind and the cause to errors.Is and errors.As.
func (e *Error) Unwrap() []error { return []error{e.Kind, e.Err} }

// Public is what a failed request may tell an API client: the backend
// and the kind of failure, without the query, the backend's URL or the
// cause, which may quote the query (a GET's URL carries it, Prometheus's
// messages cite it). Log err itself, with the query, for the operator.
func Public(err error) string {
	var pe *Error
	if !errors.As(err, &pe) {
		return "the query failed"
	}
	switch pe.Kind {
	case ErrUnavailable:
		return fmt.Sprintf("Prometheus backend %q is unavailable", pe.Backend)
	case ErrTimeout:
		return fmt.Sprintf("Prometheus backend %q did not answer in time", pe.Backend)
	default:
		return fmt.Sprintf("Prometheus backend %q failed the query", pe.Backend)
	}
}

// Reason is a short metric label for the kind: unavailable, timeout or query.
func Reason(err error) string {
	switch {
	case errors.Is(err, ErrTimeout):
		return "timeout"
	case errors.Is(err, ErrQuery):
		return "query"
	case errors.Is(err, ErrUnavailable):
		return "unavailable"
	}
	return "other"
}

// classify wraps err from the HTTP or API layer.
func (c *client) classify(err error) error {
	if err == nil {
		return nil
	}
	var pe *Error
	if errors.As(err, &pe) {
		return err
	}
	kind := ErrUnavailable
	var apiErr *promv1.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		kind = ErrTimeout
	case errors.Is(err, ErrTooLarge):
		kind = ErrQuery
	case errors.As(err, &apiErr):
		switch apiErr.Type {
		case promv1.ErrBadData, promv1.ErrExec:
			kind = ErrQuery
		case promv1.ErrTimeout, promv1.ErrCanceled:
			kind = ErrTimeout
		case promv1.ErrClient:
			// A 4xx other than 400/422: a proxy refusing us (401, 403,
			// 404 for a wrong path or tenant). Not the query's fault.
			kind = ErrUnavailable
		}
	}
	return &Error{Backend: c.name, URL: c.redacted, Kind: kind, Err: err}
}
