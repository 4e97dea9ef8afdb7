package history

import (
	"strings"
	"testing"
	"time"

	"github.com/tidal-autoscaler/tidal/autoscaler/behavior"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestHandoverNeedsARecommendingStatus: a stored status that says the
// autoscaler was not computing recommendations (its metrics failed) is not
// continued: no recommendation was made after it was written.
func TestHandoverNeedsARecommendingStatus(t *testing.T) {
	stored := behavior.History{Recommendations: []behavior.Recommendation{{Replicas: 4, Time: now}}}.Encode()
	ret := behavior.Retention{DownWindow: 5 * time.Minute}
	alive, later := now.Add(3*time.Minute), now.Add(4*time.Minute)
	for _, tc := range []struct {
		name         string
		recommending bool
		want         time.Time
	}{
		{"recommending: continued until the predecessor was alive", true, alive},
		{"not recommending: as stored", false, now},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStore(0)
			s.Succeed(alive)
			e, err := s.Get("default/web", "uid-1", stored, false, tc.recommending, ret, later)
			must(t, err)
			if n := len(e.h.Recommendations); n != 1 || !e.h.Recommendations[0].Time.Equal(tc.want) {
				t.Errorf("recommendations %+v, want 4 at %s", e.h.Recommendations, tc.want)
			}
		})
	}
}

// TestToPersist: which history changes are written at once, which only
// with a status write, and which not at all.
func TestToPersist(t *testing.T) {
	ret := behavior.Retention{DownWindow: 5 * time.Minute}
	at := func(d time.Duration) time.Time { return now.Add(d) }
	rec := func(replicas int32, d time.Duration) behavior.Recommendation {
		return behavior.Recommendation{Replicas: replicas, Time: at(d)}
	}
	tests := []struct {
		name      string
		persisted *behavior.History
		current   behavior.History
		want      Persistence
		// leaderElected: no refresh interval (see source.HistoryAnnotation).
		leaderElected bool
	}{
		{name: "nothing recorded, nothing stored", current: behavior.History{}, want: PersistNone},
		{name: "first recommendation", current: behavior.History{Recommendations: []behavior.Recommendation{rec(3, 0)}}, want: PersistNow},
		{
			name:      "same history",
			persisted: &behavior.History{Recommendations: []behavior.Recommendation{rec(3, 0)}},
			current:   behavior.History{Recommendations: []behavior.Recommendation{rec(3, 0)}},
			want:      PersistNone,
		},
		{
			name:      "same recommendation 59s later",
			persisted: &behavior.History{Recommendations: []behavior.Recommendation{rec(5, 0), rec(3, 10*time.Second)}},
			current:   behavior.History{Recommendations: []behavior.Recommendation{rec(5, 0), rec(3, 10*time.Second), rec(3, 69*time.Second)}},
			want:      PersistWithStatus,
		},
		{
			name:      "same recommendation 60s later",
			persisted: &behavior.History{Recommendations: []behavior.Recommendation{rec(3, 0)}},
			current:   behavior.History{Recommendations: []behavior.Recommendation{rec(3, time.Minute)}},
			want:      PersistNow,
		},
		{
			name:      "a different recommendation",
			persisted: &behavior.History{Recommendations: []behavior.Recommendation{rec(3, 0)}},
			current:   behavior.History{Recommendations: []behavior.Recommendation{rec(3, 0), rec(2, 15*time.Second)}},
			want:      PersistNow,
		},
		{
			name:      "a scale event",
			persisted: &behavior.History{Recommendations: []behavior.Recommendation{rec(3, 0)}},
			current: behavior.History{
				Recommendations: []behavior.Recommendation{rec(3, 15*time.Second)},
				ScaleDownEvents: []behavior.ScaleEvent{{Change: 1, Time: at(15 * time.Second)}},
			},
			want: PersistNow,
		},
		{
			name:          "leader elected: same recommendation 60s later",
			persisted:     &behavior.History{Recommendations: []behavior.Recommendation{rec(3, 0)}},
			current:       behavior.History{Recommendations: []behavior.Recommendation{rec(3, time.Minute)}},
			want:          PersistWithStatus,
			leaderElected: true,
		},
		{
			name:          "leader elected: the stored one is older than the window",
			persisted:     &behavior.History{Recommendations: []behavior.Recommendation{rec(5, 0), rec(3, time.Minute)}},
			current:       behavior.History{Recommendations: []behavior.Recommendation{rec(3, time.Hour)}},
			want:          PersistWithStatus,
			leaderElected: true,
		},
		{
			name:          "leader elected: a different recommendation",
			persisted:     &behavior.History{Recommendations: []behavior.Recommendation{rec(3, 0)}},
			current:       behavior.History{Recommendations: []behavior.Recommendation{rec(3, 0), rec(2, time.Hour)}},
			want:          PersistNow,
			leaderElected: true,
		},
		{
			name:          "leader elected: an older entry changed",
			persisted:     &behavior.History{Recommendations: []behavior.Recommendation{rec(5, 0), rec(3, time.Minute)}},
			current:       behavior.History{Recommendations: []behavior.Recommendation{rec(6, 0), rec(3, 2*time.Minute)}},
			want:          PersistNow,
			leaderElected: true,
		},
		{
			name:      "only an expired entry dropped",
			persisted: &behavior.History{Recommendations: []behavior.Recommendation{rec(9, -10*time.Minute), rec(3, 0)}},
			current:   behavior.History{Recommendations: []behavior.Recommendation{rec(3, 0)}},
			want:      PersistNone,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &Entry{h: tt.current}
			if tt.persisted != nil {
				e.PersistedAs(*tt.persisted, tt.persisted.Encode())
			}
			var last time.Time
			for _, r := range tt.current.Recommendations {
				last = r.Time
			}
			refresh := DefaultRefresh
			if tt.leaderElected {
				refresh = 0
			}
			_, got := e.ToPersist(ret, last, refresh)
			if got != tt.want {
				t.Errorf("toPersist = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestFutureHistory: a persisted history whose times are later than now
// (written by a replica whose clock is ahead, or edited) must not hold off
// scaling down past its window: its entries count as made now. In an
// annotation, which anyone who may edit the object can write, one beyond
// MaxClockSkew is rejected with a message saying so.
func TestFutureHistory(t *testing.T) {
	ret := behavior.Retention{DownWindow: 5 * time.Minute}
	ahead := func(d time.Duration) string {
		return behavior.History{
			Recommendations: []behavior.Recommendation{{Replicas: 3, Time: now.Add(-time.Minute)}, {Replicas: 10, Time: now.Add(d)}},
			ScaleUpEvents:   []behavior.ScaleEvent{{Change: 7, Time: now.Add(d)}},
		}.Encode()
	}
	tests := []struct {
		name         string
		stored       string
		inAnnotation bool
		// wantErr is in the error; "" for none.
		wantErr string
		// wantNewest is the newest time of the seeded history; zero when
		// it starts empty.
		wantNewest time.Time
	}{
		{name: "status field 5 min ahead: capped at now", stored: ahead(5 * time.Minute), wantNewest: now},
		{name: "status field 1 h ahead: capped at now", stored: ahead(time.Hour), wantNewest: now},
		{name: "annotation within the clock skew: capped at now", stored: ahead(MaxClockSkew), inAnnotation: true, wantNewest: now},
		{name: "annotation 5 min ahead: rejected", stored: ahead(5 * time.Minute), inAnnotation: true,
			wantErr: "the history annotation has an entry at 2026-03-01T12:05:00Z, 5m0s after now (more than 10s of clock skew)"},
		{name: "annotation in the past: as stored", stored: ahead(-30 * time.Second), inAnnotation: true, wantNewest: now.Add(-30 * time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := NewStore(0).Get("default/web", "uid-1", tt.stored, tt.inAnnotation, true, ret, now)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			if got := e.History().Newest(); !got.Equal(tt.wantNewest) {
				t.Errorf("newest entry at %s, want %s (history %+v)", got, tt.wantNewest, e.History())
			}
			if tt.wantErr == "" {
				// Stored differently than it is kept: written again.
				if _, p := e.ToPersist(ret, now, 0); p != PersistNow && tt.wantNewest.Equal(now) {
					t.Errorf("ToPersist = %v, want PersistNow to rewrite the future times", p)
				}
			}
		})
	}
}
