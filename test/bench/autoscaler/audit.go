package autoscaler

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// auditPolicy logs one line per request when its response completes, with
// who made it; nothing of the bodies.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Metadata
`

// auditArgs writes the policy into dir and returns the kube-apiserver
// flags that log every request to dir/audit.log.
func auditArgs(dir string) ([]string, string, error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return nil, "", err
	}
	log := filepath.Join(dir, "audit.log")
	return []string{
		"--audit-policy-file=" + policy,
		"--audit-log-path=" + log,
		"--audit-log-format=json",
		"--audit-log-maxsize=0",
		"--audit-log-mode=batch",
		"--audit-log-batch-max-wait=1s",
	}, log, nil
}

// auditEvent is the part of an audit.k8s.io/v1 Event the benchmark reads.
type auditEvent struct {
	Stage    string    `json:"stage"`
	Verb     string    `json:"verb"`
	Received time.Time `json:"requestReceivedTimestamp"`
	User     struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		APIGroup    string `json:"apiGroup"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
}

// kind is "VERB RESOURCE[.GROUP][/SUBRESOURCE]", as requestCount counts.
func (e *auditEvent) kind() string {
	kind := e.Verb
	if r := e.ObjectRef; r != nil {
		res := r.Resource
		if r.APIGroup != "" {
			res += "." + r.APIGroup
		}
		if r.Subresource != "" {
			res += "/" + r.Subresource
		}
		kind += " " + res
	}
	return kind
}

// requestCount is the number of requests some users made in a window, in
// all and by verb and resource.
type requestCount struct {
	Total  int
	ByKind map[string]int
}

func (c requestCount) String() string {
	keys := slices.Sorted(maps.Keys(c.ByKind))
	slices.SortStableFunc(keys, func(a, b string) int { return c.ByKind[b] - c.ByKind[a] })
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, c.ByKind[k]))
	}
	return fmt.Sprintf("%d (%s)", c.Total, strings.Join(parts, " "))
}

// countRequests counts the completed requests of users received in
// [from, to) in the audit log at path.
func countRequests(path string, users []string, from, to time.Time) (requestCount, error) {
	f, err := os.Open(path)
	if err != nil {
		return requestCount{}, err
	}
	defer f.Close()
	out := requestCount{ByKind: map[string]int{}}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return out, fmt.Errorf("%s: %w", path, err)
		}
		if e.Stage != "ResponseComplete" || e.Received.Before(from) || !e.Received.Before(to) || !slices.Contains(users, e.User.Username) {
			continue
		}
		out.Total++
		out.ByKind[e.kind()]++
	}
	return out, sc.Err()
}

// visitGaps reads the requests of user of one kind ("get
// deployments.apps/scale") received in [from, to) and returns the longest
// time between two of them on one object, and how many objects had one.
func visitGaps(path, user, verb, resource string, from, to time.Time) (time.Duration, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	visits := map[string][]time.Time{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return 0, 0, fmt.Errorf("%s: %w", path, err)
		}
		if e.Stage != "ResponseComplete" || e.Received.Before(from) || !e.Received.Before(to) || e.User.Username != user ||
			e.ObjectRef == nil || e.kind() != verb+" "+resource {
			continue
		}
		key := e.ObjectRef.Namespace + "/" + e.ObjectRef.Name
		visits[key] = append(visits[key], e.Received)
	}
	return longestGap(visits), len(visits), sc.Err()
}

// longestGap is the longest time between two consecutive visits of one
// object.
func longestGap(visits map[string][]time.Time) time.Duration {
	var longest time.Duration
	for _, ts := range visits {
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
		for i := 1; i < len(ts); i++ {
			longest = max(longest, ts[i].Sub(ts[i-1]))
		}
	}
	return longest
}
