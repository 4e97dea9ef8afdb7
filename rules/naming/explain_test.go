package naming

import (
	"testing"

	"github.com/tidal-autoscaler/tidal/rules/config"
)

func TestNamerRejection(t *testing.T) {
	n, err := NewNamer([]config.SeriesFilter{{Is: "^http_"}, {IsNot: "_bucket$"}}, config.NameMapping{Matches: "^(.*)_total$", As: "${2}"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, series, want string }{
		{"is filter fails", "grpc_calls_total", `seriesFilters[0] (is: "^http_") does not match the series name`},
		{"isNot filter matches", "http_latency_bucket", `seriesFilters[1] (isNot: "_bucket$") matches the series name`},
		{"name.matches fails", "http_inflight", `name.matches "^(.*)_total$" does not match the series name`},
		{"empty name", "http_requests_total", `name.as "${2}" renders an empty metric name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := n.Rejection(tc.series); got != tc.want {
				t.Errorf("Rejection(%q) = %q, want %q", tc.series, got, tc.want)
			}
		})
	}
	kept, err := NewNamer(nil, config.NameMapping{})
	if err != nil {
		t.Fatal(err)
	}
	if got := kept.Rejection("anything"); got != "" {
		t.Errorf("Rejection of a kept series = %q, want \"\"", got)
	}
}
