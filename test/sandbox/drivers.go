package sandbox

import (
	"fmt"
	"strings"
	"time"
)

// Which metric drove a replica change is read from the recorded decisions
// (status.tidal.decision): the decision that moved the count from From to
// To names its winner, the metric whose proposal was the largest. A
// scale-down held by the stabilization window is the proposal of an
// earlier decision, so it is credited to that decision's winner. A change
// the fallback made has no metric behind it.

// decisionSlack is how far from the sample that saw a change the decision
// behind it may be: the status is written just after /scale, and the
// sandbox reads both once a second.
const decisionSlack = 4 * time.Second

// Fallback is the driver of a change the fallback made.
const Fallback = "fallback"

// attribute sets e.Driver and e.Note from the samples around samples[i].
// In a dry run every decision starts from the Deployment's unchanged count,
// so only its outcome is matched.
func attribute(e *ScaleEvent, samples []Sample, i int, dry bool) {
	j := -1
	for k := range samples {
		d := samples[k].Decision
		if d == nil || samples[k].T < samples[i].T-decisionSlack || samples[k].T > samples[i].T+decisionSlack {
			continue
		}
		if (dry || d.CurrentReplicas == e.From) && d.DesiredReplicas == e.To {
			j = k
			break
		}
	}
	if j < 0 {
		e.Driver = shortMetric(samples[i].Winner)
		e.Note = "no decision from " + fmt.Sprint(e.From) + " to " + fmt.Sprint(e.To) + " seen; winner at the time"
		return
	}
	d := samples[j].Decision
	var steps []string
	stabilized := false
	for _, a := range d.Adjustments {
		switch a.Reason {
		case "Fallback":
			e.Driver, e.Note = Fallback, fmt.Sprintf("every metric failed: fallback count %d", a.To)
			return
		case "ScaleDownStabilized":
			stabilized = a.To == e.To
		}
		steps = append(steps, fmt.Sprintf("%s %d→%d", a.Reason, a.From, a.To))
	}
	e.Driver = shortMetric(d.Winner)
	e.Note = fmt.Sprintf("proposed %d", d.ProposedReplicas)
	if len(steps) > 0 {
		e.Note += ", " + strings.Join(steps, ", ")
	}
	if !stabilized {
		return
	}
	// The window kept an earlier proposal of To: credit its winner.
	for k := j - 1; k >= 0; k-- {
		if p := samples[k].Decision; p != nil && p.ProposedReplicas == e.To && p.Winner != "" {
			e.Driver = shortMetric(p.Winner)
			e.Note = fmt.Sprintf("the window's highest proposal, %s's %d at %.0fs (now %s proposes %d)",
				e.Driver, e.To, samples[k].T.Seconds(), shortMetric(d.Winner), d.ProposedReplicas)
			return
		}
	}
}

// Leaders counts the changes each driver led ("cpu", "rps", "queue",
// "fallback").
func Leaders(events []ScaleEvent) map[string]int {
	out := map[string]int{}
	for _, e := range events {
		if e.Driver != "" {
			out[e.Driver]++
		}
	}
	return out
}

// dryRun says whether the run's autoscaler was in dry run, from its
// DryRun condition.
func dryRun(samples []Sample) bool {
	for _, s := range samples {
		if strings.HasPrefix(s.DryRun, "True/") {
			return true
		}
	}
	return false
}

// count is what a change is measured on: the Deployment's replicas, or in
// a dry run the count the autoscaler would have written.
func count(s Sample, dry bool) int32 {
	if dry {
		return s.Desired
	}
	return s.Spec
}

// fallbackSpans lists when the Fallback condition was True.
func fallbackSpans(samples []Sample) [][2]time.Duration {
	var out [][2]time.Duration
	on := false
	for _, s := range samples {
		active := strings.HasPrefix(s.Fallback, "True/")
		switch {
		case active && !on:
			out = append(out, [2]time.Duration{s.T, -1})
		case !active && on:
			out[len(out)-1][1] = s.T
		}
		on = active
	}
	return out
}
