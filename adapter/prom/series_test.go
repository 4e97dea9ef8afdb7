package prom

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
)

func TestDecodeSeriesErrors(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		body     string
		wantType promv1.ErrorType
		wantMsg  string
	}{
		{"error envelope", 400, `{"status":"error","errorType":"bad_data","error":"parse error"}`, promv1.ErrBadData, "parse error"},
		{"error envelope on 503", 503, `{"status":"error","errorType":"unavailable","error":"fake outage"}`, "unavailable", "fake outage"},
		{"proxy page on 502", 502, `<html>Bad Gateway</html>`, promv1.ErrServer, "HTTP 502 Bad Gateway: cannot decode the series response: invalid JSON at byte 0"},
		{"proxy page on 403", 403, `Forbidden`, promv1.ErrClient, "HTTP 403 Forbidden"},
		{"truncated", 200, `{"status":"success","data":[{"__na`, promv1.ErrBadResponse, "the response ends early, after 34 bytes"},
		{"no status", 200, `{"data":[]}`, promv1.ErrBadResponse, `status "", want "success"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: tt.status, Status: fmt.Sprintf("%d %s", tt.status, http.StatusText(tt.status)), Body: io.NopCloser(strings.NewReader(tt.body))}
			_, err := decodeSeries(resp, MaxShapeBytes)
			var pe *promv1.Error
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want a *promv1.Error", err)
			}
			if pe.Type != tt.wantType || !strings.Contains(pe.Msg, tt.wantMsg) {
				t.Errorf("err = %s %q, want %s containing %q", pe.Type, pe.Msg, tt.wantType, tt.wantMsg)
			}
		})
	}
}

// TestReadSeriesMemoryGrowsWithShapesNotSeries decodes 20,000 series of 10
// shapes: the decoder must allocate per shape and for its bounded buffer,
// never per series or for the whole body.
