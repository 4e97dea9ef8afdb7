// Package promtest is a fake Prometheus HTTP API for unit tests: it serves
// /api/v1/series and /api/v1/query from what the test sets, and records
// every request, so the real client and translation code run against it.
package promtest

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"testing"
)

// Sample is one result of an instant query.
type Sample struct {
	Labels map[string]string
	Value  float64
	// Time is the sample's Unix time in seconds.
	Time float64
}

// Response is the answer to a query: a vector, or an error when Status is
// not 200 (ErrorType "bad_data", "execution", ...; Raw sends Raw as the
// body instead of a Prometheus error document).
type Response struct {
	Vector    []Sample
	Status    int
	ErrorType string
	Error     string
	Raw       string
}

// Request is what the server received.
type Request struct {
	Path, Method string
	Form         url.Values
	Header       http.Header
}

// Server is a fake Prometheus.
type Server struct {
	*httptest.Server

	mu sync.Mutex
	// Series maps a match[] selector to the label sets (with __name__)
	// it selects; FailSeries makes a selector answer 503.
	series     map[string][]map[string]string
	failSeries map[string]bool
	onQuery    func(query string) Response
	requests   []Request
	// gate, when set, holds every query until it is closed.
	gate chan struct{}
}

// New starts a fake Prometheus, closed when the test ends.
func New(t testing.TB) *Server {
	s := &Server{series: map[string][]map[string]string{}, failSeries: map[string]bool{}}
	s.onQuery = func(string) Response { return Response{} }
	s.Server = httptest.NewServer(http.HandlerFunc(s.handle))
	t.Cleanup(s.Close)
	return s
}

// SetSeries sets the series a selector returns.
func (s *Server) SetSeries(selector string, sets ...map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.series[selector] = sets
}

// FailSeries makes a selector's discovery fail (true) or work (false).
func (s *Server) FailSeries(selector string, fail bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failSeries[selector] = fail
}

// OnQuery sets how queries are answered.
func (s *Server) OnQuery(f func(query string) Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onQuery = f
}

// Hold makes queries wait until the returned function is called.
func (s *Server) Hold() (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := make(chan struct{})
	s.gate = g
	var once sync.Once
	return func() { once.Do(func() { close(g) }) }
}

// Requests returns the requests received so far on path ("" for all).
func (s *Server) Requests(path string) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Request
	for _, r := range s.requests {
		if path == "" || r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.requests = append(s.requests, Request{Path: r.URL.Path, Method: r.Method, Form: r.Form, Header: r.Header.Clone()})
	gate, onQuery := s.gate, s.onQuery
	s.mu.Unlock()

	switch r.URL.Path {
	case "/api/v1/series":
		s.handleSeries(w, r)
	case "/api/v1/query":
		if gate != nil {
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		writeQuery(w, onQuery(r.Form.Get("query")))
	default:
		http.NotFound(w, r)
	}
}

func (s *Server) handleSeries(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	var data []map[string]string
	fail := false
	for _, m := range r.Form["match[]"] {
		fail = fail || s.failSeries[m]
		data = append(data, s.series[m]...)
	}
	s.mu.Unlock()
	if fail {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "error", "errorType": "unavailable", "error": "fake outage"})
		return
	}
	if data == nil {
		data = []map[string]string{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "success", "data": data})
}

func writeQuery(w http.ResponseWriter, resp Response) {
	if resp.Raw != "" {
		w.WriteHeader(resp.Status)
		_, _ = w.Write([]byte(resp.Raw))
		return
	}
	if resp.Status != 0 && resp.Status != http.StatusOK {
		writeJSON(w, resp.Status, map[string]any{"status": "error", "errorType": resp.ErrorType, "error": resp.Error})
		return
	}
	result := make([]map[string]any, 0, len(resp.Vector))
	for _, smp := range resp.Vector {
		labels := smp.Labels
		if labels == nil {
			labels = map[string]string{}
		}
		result = append(result, map[string]any{"metric": labels, "value": []any{smp.Time, formatValue(smp.Value)}})
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "success", "data": map[string]any{"resultType": "vector", "result": result}})
}

func formatValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		panic(fmt.Sprintf("promtest: %v", err))
	}
}
