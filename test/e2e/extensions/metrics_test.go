package extensions

import "testing"

// TestSample: the series is found by its exact label set, not by a
// subset or another metric sharing the name's prefix.
func TestSample(t *testing.T) {
	const text = `# TYPE tidal_autoscaler_dry_run_desired_replicas gauge
tidal_autoscaler_dry_run_desired_replicas{hpa_name="web",namespace="dryrun"} 5
tidal_autoscaler_dry_run_desired_replicas{hpa_name="web",namespace="other"} 7
tidal_autoscaler_dry_run_desired_replicas_total{hpa_name="web",namespace="dryrun"} 9
tidal_autoscaler_leader 1
`
	for _, c := range []struct {
		title  string
		name   string
		labels map[string]string
		want   float64
		found  bool
	}{
		{"exact labels", "tidal_autoscaler_dry_run_desired_replicas", map[string]string{"namespace": "dryrun", "hpa_name": "web"}, 5, true},
		{"other namespace", "tidal_autoscaler_dry_run_desired_replicas", map[string]string{"namespace": "other", "hpa_name": "web"}, 7, true},
		{"subset of labels", "tidal_autoscaler_dry_run_desired_replicas", map[string]string{"namespace": "dryrun"}, 0, false},
		{"no such series", "tidal_autoscaler_dry_run_desired_replicas", map[string]string{"namespace": "x", "hpa_name": "web"}, 0, false},
		{"no labels", "tidal_autoscaler_leader", nil, 1, true},
	} {
		t.Run(c.title, func(t *testing.T) {
			got, found, err := sample(text, c.name, c.labels)
			if err != nil || got != c.want || found != c.found {
				t.Errorf("sample = %v, %v, %v; want %v, %v", got, found, err, c.want, c.found)
			}
		})
	}
	if got, err := sum(text, "tidal_autoscaler_dry_run_desired_replicas"); err != nil || got != 12 {
		t.Errorf("sum = %v, %v; want 12", got, err)
	}
}
