package autoscaler

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/tidal-autoscaler/tidal/test/harness"
)

// requestCount is the number of requests some users made in a window, in
// all and by verb and resource.
type requestCount struct {
	Total  int
	ByKind map[string]int
}

// podMetricsLists is the PodMetrics lists among them: one per reconcile
// for kcm, one per namespace and beat for tidal.
func (c requestCount) podMetricsLists() int { return c.ByKind["list pods.metrics.k8s.io"] }

func (c requestCount) String() string {
	keys := mostFirst(c.ByKind)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, c.ByKind[k]))
	}
	return fmt.Sprintf("%d (%s)", c.Total, strings.Join(parts, " "))
}

// mostFirst is the keys of counts, the largest count first, ties by key.
func mostFirst(counts map[string]int) []string {
	keys := slices.Sorted(maps.Keys(counts))
	slices.SortStableFunc(keys, func(a, b string) int { return counts[b] - counts[a] })
	return keys
}

// countRequests counts the completed requests of users received in
// [from, to) in the audit log at path.
func countRequests(path string, users []string, from, to time.Time) (requestCount, error) {
	c, err := countWindow(path, users, from, to)
	return c.mine, err
}

// windowCount is the completed requests received in a window: those of
// the users measured, and every other client's by user name, which say
// what kept kube-apiserver busy when the side measured did not.
type windowCount struct {
	mine   requestCount
	others map[string]int
}

// countWindow is countRequests with the other clients' requests too, in
// the same pass over the audit log.
func countWindow(path string, users []string, from, to time.Time) (windowCount, error) {
	out := windowCount{mine: requestCount{ByKind: map[string]int{}}, others: map[string]int{}}
	err := harness.ReadAudit(path, func(e *harness.AuditEvent) {
		if e.Received.Before(from) || !e.Received.Before(to) {
			return
		}
		if !slices.Contains(users, e.User.Username) {
			out.others[e.User.Username]++
			return
		}
		out.mine.Total++
		out.mine.ByKind[e.Kind()]++
	})
	return out, err
}

// busiestClients lists the n clients of counts with the most requests,
// most first (ties by name), and the rest as one "others" entry.
func busiestClients(counts map[string]int, n int) string {
	users := mostFirst(counts)
	var parts []string
	rest := 0
	for i, u := range users {
		if i >= n {
			rest += counts[u]
			continue
		}
		parts = append(parts, fmt.Sprintf("%s=%d", u, counts[u]))
	}
	if rest > 0 {
		parts = append(parts, fmt.Sprintf("others=%d", rest))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// visitGaps reads the requests of user of one kind ("get
// deployments.apps/scale") received in [from, to) and returns the longest
// time one of objects went without one (see longestGap), and how many
// objects had one.
func visitGaps(path, user, verb, resource string, from, to time.Time, objects int) (time.Duration, int, error) {
	visits := map[string][]time.Time{}
	err := harness.ReadAudit(path, func(e *harness.AuditEvent) {
		if e.Received.Before(from) || !e.Received.Before(to) || e.User.Username != user ||
			e.ObjectRef == nil || e.Kind() != verb+" "+resource {
			return
		}
		key := e.ObjectRef.Namespace + "/" + e.ObjectRef.Name
		visits[key] = append(visits[key], e.Received)
	})
	return longestGap(visits, from, to, objects), len(visits), err
}

// longestGap is the longest time one of objects went without a visit in
// the window [from, to): between two visits, and the open stretches from
// the window's start to the first visit and from the last to its end (the
// true gaps there are longer still). An object with no visit at all went
// the whole window without one.
func longestGap(visits map[string][]time.Time, from, to time.Time, objects int) time.Duration {
	if len(visits) < objects {
		return to.Sub(from)
	}
	var longest time.Duration
	for _, ts := range visits {
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
		longest = max(longest, ts[0].Sub(from), to.Sub(ts[len(ts)-1]))
		for i := 1; i < len(ts); i++ {
			longest = max(longest, ts[i].Sub(ts[i-1]))
		}
	}
	return longest
}
