package autoscaler

import (
	"maps"
	"testing"
)

func TestByLabel(t *testing.T) {
	const page = `# HELP tidal_autoscaler_status_writes_total Status writes made, by reason.
# TYPE tidal_autoscaler_status_writes_total counter
tidal_autoscaler_status_writes_total{reason="fields"} 12
tidal_autoscaler_status_writes_total{reason="values"} 840
tidal_autoscaler_status_writes_total{reason="history"} 3
tidal_autoscaler_status_writes_deferred_total 2500
tidal_autoscaler_reconciliations_total{action="none",error="none"} 3000
`
	tests := []struct {
		name, body, metric string
		want               map[string]float64
		wantErr            bool
	}{
		{name: "each reason", body: page, metric: "tidal_autoscaler_status_writes_total",
			want: map[string]float64{"fields": 12, "values": 840, "history": 3}},
		{name: "no series yet", body: "tidal_autoscaler_status_writes_deferred_total 0\n", metric: "tidal_autoscaler_status_writes_total",
			want: map[string]float64{}},
		{name: "summed over other labels", metric: "m", body: "m{reason=\"a\",shard=\"1\"} 1\nm{shard=\"2\",reason=\"a\"} 2\n",
			want: map[string]float64{"a": 3}},
		{name: "a value that is no number", metric: "m", body: "m{reason=\"a\"} x\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := byLabel(tt.body, "url", tt.metric, "reason")
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want an error: %v", err, tt.wantErr)
			}
			if !tt.wantErr && !maps.Equal(got, tt.want) {
				t.Errorf("byLabel = %v, want %v", got, tt.want)
			}
		})
	}
}
