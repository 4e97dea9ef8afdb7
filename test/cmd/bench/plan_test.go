package main

import "testing"

// The sharded rows run their own jobs at full sizes, and at the smoke
// sizes join the moving rows' job (one harness, two more phases).
func TestShardedJob(t *testing.T) {
	full := newPlan(fullSizes(), 3, "", "")
	m := full.jobs["fleet-10k-moving"]
	for _, tc := range []struct{ job, phases string }{
		{"fleet-10k-sharded", "tidal-sharded,tidal,tidal-sharded,tidal,tidal-sharded,tidal"},
		{"fleet-10k-sharded-bounded", "tidal-bounded-sharded,tidal-bounded,tidal-bounded-sharded,tidal-bounded,tidal-bounded-sharded,tidal-bounded"},
	} {
		s := full.jobs[tc.job]
		if s.key() == m.key() {
			t.Errorf("full sizes: the %s job is the moving one: %s", tc.job, s.key())
		}
		if got := s.env["TIDAL_BENCH_PHASES"]; got != tc.phases {
			t.Errorf("full sizes: %s phases %q, want %q", tc.job, got, tc.phases)
		}
		if s.env["TIDAL_BENCH_SHARDS"] != "3" || s.env["TIDAL_BENCH_AUTOSCALERS"] != "10000" {
			t.Errorf("full sizes: %s", s.key())
		}
	}
	if _, ok := m.env["TIDAL_BENCH_SHARDS"]; ok {
		t.Errorf("full sizes: the moving job has a shards knob: %s", m.key())
	}
	smoke := newPlan(smokeSizes(), 1, "", "")
	keys := map[string]bool{}
	for _, id := range []string{"fleet-10k-sharded", "fleet-10k-sharded-bounded", "fleet-1k-moving", "fleet-3k-moving", "fleet-10k-moving"} {
		keys[smoke.jobs[id].key()] = true
	}
	if len(keys) != 1 {
		t.Errorf("smoke sizes: the moving and sharded rows run %d jobs, want 1: %v", len(keys), keys)
	}
	if got, want := smoke.jobs["fleet-10k-moving"].env["TIDAL_BENCH_PHASES"], "tidal,kcm,tidal-sharded,tidal-bounded,tidal-bounded-sharded,tidal-native"; got != want {
		t.Errorf("smoke sizes: phases %q, want %q", got, want)
	}
}

// The 1k, 3k and 10k moving rows run tidal with the status bound on and in
// native mode beside tidal and kcm in every round; the steady rows do not.
func TestNativeSide(t *testing.T) {
	full := newPlan(fullSizes(), 2, "", "")
	for _, tc := range []struct {
		job, phases string
	}{
		{"fleet-3k-moving", "tidal,kcm,tidal-bounded,tidal-native,tidal,kcm,tidal-bounded,tidal-native"},
		{"fleet-10k-moving", "tidal,kcm,tidal-bounded,tidal-native,tidal,kcm,tidal-bounded,tidal-native"},
		{"fleet-1k-moving", "tidal,kcm,tidal-bounded,tidal-native,tidal,kcm,tidal-bounded,tidal-native"},
		{"fleet-10k-steady", "tidal,kcm,tidal,kcm"},
	} {
		t.Run(tc.job, func(t *testing.T) {
			if got := full.jobs[tc.job].env["TIDAL_BENCH_PHASES"]; got != tc.phases {
				t.Errorf("phases %q, want %q", got, tc.phases)
			}
		})
	}
}
