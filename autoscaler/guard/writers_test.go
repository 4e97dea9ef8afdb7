package guard

import (
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

func entry(manager, subresource string, at time.Time) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Subresource: subresource, Time: &metav1.Time{Time: at}}
}

func TestNewestStatusWrites(t *testing.T) {
	tests := []struct {
		name      string
		entries   []metav1.ManagedFieldsEntry
		wantOther Write
		wantOwn   time.Time
		wantOK    bool
	}{
		{name: "none"},
		{name: "only tidal's", entries: []metav1.ManagedFieldsEntry{entry("tidal-autoscaler", "status", t0)}, wantOwn: t0},
		{name: "spec writes do not count",
			entries: []metav1.ManagedFieldsEntry{entry("kubectl-client-side-apply", "", t0.Add(time.Minute)), entry("tidal-autoscaler", "status", t0)}, wantOwn: t0},
		{name: "kube-controller-manager after tidal",
			entries:   []metav1.ManagedFieldsEntry{entry("tidal-autoscaler", "status", t0), entry("kube-controller-manager", "status", t0.Add(time.Second))},
			wantOther: Write{"kube-controller-manager", t0.Add(time.Second)}, wantOwn: t0, wantOK: true},
		{name: "the newest of two others",
			entries:   []metav1.ManagedFieldsEntry{entry("a", "status", t0.Add(2*time.Second)), entry("b", "status", t0.Add(time.Second))},
			wantOther: Write{"a", t0.Add(2 * time.Second)}, wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			other, own, ok := NewestStatusWrites(tt.entries, "tidal-autoscaler")
			if ok != tt.wantOK || !other.same(tt.wantOther) || !own.Equal(tt.wantOwn) {
				t.Errorf("got %v, %v, %v; want %v, %v, %v", other, own, ok, tt.wantOther, tt.wantOwn, tt.wantOK)
			}
		})
	}
}

// TestStatusWriters walks one HPA through what the controller sees: the
// baseline is history, another manager's write while watched is active for
// the hold even in the second of tidal's own, tidal's later write does
// not end it, and an unchanged entry does not start it again.
func TestStatusWriters(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(t0)
	w := NewStatusWriters("tidal-autoscaler", time.Minute, clk)
	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	kcm := func(at time.Duration) metav1.ManagedFieldsEntry {
		return entry("kube-controller-manager", "status", t0.Add(at))
	}
	tidal := func(at time.Duration) metav1.ManagedFieldsEntry {
		return entry("tidal-autoscaler", "status", t0.Add(at))
	}
	// wantAnnounce: the step's first Announce is true (the second never).
	steps := []struct {
		name                     string
		entries                  []metav1.ManagedFieldsEntry
		advance                  time.Duration
		wantActive, wantAnnounce bool
	}{
		{name: "kcm's write from before tidal watched is history", entries: []metav1.ManagedFieldsEntry{kcm(-time.Hour)}},
		{name: "tidal writes", entries: []metav1.ManagedFieldsEntry{kcm(-time.Hour), tidal(0)}},
		{name: "kcm writes in the same second as tidal: active", entries: []metav1.ManagedFieldsEntry{kcm(0), tidal(0)}, wantActive: true, wantAnnounce: true},
		{name: "tidal's own write (its condition) does not end it",
			entries: []metav1.ManagedFieldsEntry{kcm(0), tidal(20 * time.Second)}, advance: 30 * time.Second, wantActive: true},
		{name: "quiet for the hold: over", advance: 31 * time.Second, entries: []metav1.ManagedFieldsEntry{kcm(0), tidal(20 * time.Second)}},
		{name: "tidal took all of kcm's fields: its entry is gone", entries: []metav1.ManagedFieldsEntry{tidal(70 * time.Second)}},
		{name: "kcm writes again: a new episode", entries: []metav1.ManagedFieldsEntry{kcm(80 * time.Second), tidal(70 * time.Second)}, wantActive: true, wantAnnounce: true},
		{name: "and again within it: said once", entries: []metav1.ManagedFieldsEntry{kcm(90 * time.Second), tidal(70 * time.Second)}, advance: 10 * time.Second, wantActive: true},
	}
	for _, s := range steps {
		clk.SetTime(clk.Now().Add(s.advance))
		hpa.ManagedFields = s.entries
		w.Observe(hpa)
		got, active := w.Active("shop/web")
		if active != s.wantActive {
			t.Fatalf("%s: active %v (%v), want %v", s.name, active, got, s.wantActive)
		}
		if active && got.Manager != "kube-controller-manager" {
			t.Fatalf("%s: writer %q", s.name, got.Manager)
		}
		if first, again := w.Announce("shop/web"), w.Announce("shop/web"); first != s.wantAnnounce || again {
			t.Fatalf("%s: Announce %v then %v, want %v then false", s.name, first, again, s.wantAnnounce)
		}
	}
	w.Forget("shop/web")
	if _, active := w.Active("shop/web"); active {
		t.Error("active after Forget")
	}
}

// TestStatusWritersEpisodeEndsUnseen: a writer quiet for the hold and then
// writing again starts a new episode, announced again, even when nothing
// asked about the object in between.
func TestStatusWritersEpisodeEndsUnseen(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(t0)
	w := NewStatusWriters("tidal-autoscaler", time.Minute, clk)
	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	w.Observe(hpa) // the baseline
	hpa.ManagedFields = []metav1.ManagedFieldsEntry{entry("kube-controller-manager", "status", t0)}
	w.Observe(hpa)
	if !w.Announce("shop/web") {
		t.Fatal("the first episode was not announced")
	}
	clk.SetTime(t0.Add(2 * time.Minute))
	hpa.ManagedFields = []metav1.ManagedFieldsEntry{entry("kube-controller-manager", "status", t0.Add(2*time.Minute))}
	w.Observe(hpa)
	if !w.Announce("shop/web") {
		t.Error("a write after a quiet hold was not announced as a new episode")
	}
}
