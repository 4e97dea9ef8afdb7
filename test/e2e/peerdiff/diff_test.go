package peerdiff

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tidal-autoscaler/tidal/test/harness"
)

// TestSameAnswersAsPrometheusAdapter asks both servers every request the
// HPA controller and kubectl make of the three APIs, for every metric
// either one discovers, and fails on each difference docs/compatibility.md does not
// list. It logs how many of each listed difference it saw.
func TestSameAnswersAsPrometheusAdapter(t *testing.T) {
	h := need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := asHPA(h)
	if err != nil {
		t.Fatal(err)
	}

	// Both must have discovered the series before their lists mean
	// anything: wait for a metric of each kind of resource on both.
	const custom = "/apis/custom.metrics.k8s.io/v1beta1"
	wantListed := []string{"pods/http_requests", "pods/cpu_usage", "nodes/node_temperature_celsius", "namespaces/namespace_quota_ratio", "deployments.apps/queue_length", "jobs.batch/app_ratio"}
	for _, a := range []*harness.Adapter{env.peer, env.tidal} {
		if err := harness.WaitReady(ctx, a.Process, a.ServiceAccount+" discovery", 90*time.Second, func(ctx context.Context) error {
			names, err := listed(ctx, c, a, custom)
			if err != nil {
				return err
			}
			for _, w := range wantListed {
				if !names[w] {
					return fmt.Errorf("%s not listed", w)
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}

	reqs, err := requests(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	var unlisted []string
	same := 0
	for _, r := range reqs {
		diffs, err := askBoth(ctx, c, r)
		if err != nil {
			t.Fatalf("GET %s: %v", r.path, err)
		}
		if len(diffs) == 0 {
			same++
		}
		for _, d := range diffs {
			counts[d.rule]++
			if d.rule == "" {
				unlisted = append(unlisted, fmt.Sprintf("GET %s: %s", r.path, d.detail))
			}
		}
	}
	t.Logf("%d requests, %d answered alike", len(reqs), same)
	rules := make([]string, 0, len(counts))
	for r := range counts {
		rules = append(rules, r)
	}
	sort.Strings(rules)
	for _, r := range rules {
		if r != "" {
			t.Logf("listed difference %q: %d", r, counts[r])
		}
	}
	for _, u := range unlisted {
		t.Errorf("a difference docs/compatibility.md does not list: %s", u)
	}
	// The check must have compared something of each kind.
	for _, r := range []string{ruleEmptyList, rulePrecision, ruleNaN, rulePause, ruleUnanswerable} {
		if counts[r] == 0 {
			t.Errorf("no %q difference seen: the series or requests meant to show it did not", r)
		}
	}
}

// askBoth asks the peer, then Tidal, and classifies the differences. A
// rate() can move between two evaluations when a scrape lands between
// them, so a pair whose differences are not all listed is asked again (up
// to three times) and the best pair counts.
func askBoth(ctx context.Context, c *http.Client, r request) ([]difference, error) {
	var best []difference
	for attempt := 0; attempt < 3; attempt++ {
		p, err := fetch(ctx, c, env.peer, r.path)
		if err != nil {
			return nil, err
		}
		t, err := fetch(ctx, c, env.tidal, r.path)
		if err != nil {
			return nil, err
		}
		diffs := compare(r, p, t)
		if attempt == 0 || unlistedCount(diffs) < unlistedCount(best) {
			best = diffs
		}
		if unlistedCount(best) == 0 {
			break
		}
	}
	return best, nil
}

func unlistedCount(ds []difference) int {
	n := 0
	for _, d := range ds {
		if d.rule == "" {
			n++
		}
	}
	return n
}

// listed returns the resource names a group version's discovery lists.
func listed(ctx context.Context, c *http.Client, a *harness.Adapter, gv string) (map[string]bool, error) {
	ans, err := fetch(ctx, c, a, gv)
	if err != nil {
		return nil, err
	}
	if ans.code != 200 {
		return nil, fmt.Errorf("GET %s = %d %s", gv, ans.code, short(ans.body))
	}
	var l struct {
		Resources []apiResource `json:"resources"`
	}
	if err := json.Unmarshal(ans.body, &l); err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, r := range l.Resources {
		names[r.Name] = true
	}
	return names, nil
}

// objectsOf are the objects of each namespaced resource in ns (with one
// that does not exist), the names a request may name.
func objectsOf(resource string) []string {
	switch resource {
	case "pods":
		return append(append([]string{}, env.pods...), gonePod, "nope")
	case "services", "deployments.apps":
		return []string{"web", "nope"}
	case "jobs.batch":
		return []string{scrapeJob, "nope"}
	}
	return []string{"nope"}
}

// requests lists every request to ask: discovery of each group version,
// then for each metric either server lists, named objects, wildcards with
// and without selectors, another namespace, no namespace, and metric
// selectors; external metrics per namespace and selector; metrics.k8s.io
// as kubectl top and the HPA ask it.
func requests(ctx context.Context, c *http.Client) ([]request, error) {
	var out []request
	add := func(metric, object, format string, args ...any) {
		out = append(out, request{path: fmt.Sprintf(format, args...), metric: metric, object: object})
	}
	customNames, externalNames := map[string]bool{}, map[string]bool{}
	for _, a := range []*harness.Adapter{env.peer, env.tidal} {
		for gv, into := range map[string]map[string]bool{
			"/apis/custom.metrics.k8s.io/v1beta1":   customNames,
			"/apis/external.metrics.k8s.io/v1beta1": externalNames,
		} {
			names, err := listed(ctx, c, a, gv)
			if err != nil {
				return nil, err
			}
			for n := range names {
				into[n] = true
			}
		}
	}
	for _, gv := range []string{"/apis/custom.metrics.k8s.io/v1beta1", "/apis/custom.metrics.k8s.io/v1beta2", "/apis/external.metrics.k8s.io/v1beta1", "/apis/metrics.k8s.io/v1beta1"} {
		add("", "", "%s", gv)
	}
	sel := func(s string) string { return url.QueryEscape(s) }
	for _, v := range []string{"v1beta1", "v1beta2"} {
		base := "/apis/custom.metrics.k8s.io/" + v
		for _, name := range sortedKeys(customNames) {
			res, metric, _ := strings.Cut(name, "/")
			switch res {
			case "namespaces":
				add(metric, ns, "%s/namespaces/%s/metrics/%s", base, ns, metric)
				add(metric, other, "%s/namespaces/%s/metrics/%s", base, other, metric)
				add(metric, "", "%s/namespaces/*/%s", base, metric)
			case "nodes":
				add(metric, env.h.NodeName, "%s/nodes/%s/%s", base, env.h.NodeName, metric)
				add(metric, "nope", "%s/nodes/nope/%s", base, metric)
				add(metric, "", "%s/nodes/*/%s", base, metric)
				add(metric, env.h.NodeName, "%s/namespaces/%s/nodes/%s/%s", base, ns, env.h.NodeName, metric)
			default:
				for _, o := range objectsOf(res) {
					add(metric, o, "%s/namespaces/%s/%s/%s/%s", base, ns, res, o, metric)
				}
				add(metric, "", "%s/namespaces/%s/%s/*/%s", base, ns, res, metric)
				add(metric, "", "%s/namespaces/%s/%s/*/%s?labelSelector=%s", base, ns, res, metric, sel("app=web"))
				add(metric, "", "%s/namespaces/%s/%s/*/%s?labelSelector=%s", base, ns, res, metric, sel("app=none"))
				add(metric, "", "%s/namespaces/%s/%s/*/%s", base, other, res, metric)
				add(metric, "", "%s/%s/*/%s", base, res, metric)
				add(metric, "", "%s/namespaces/%s/%s/*/%s?metricLabelSelector=%s", base, ns, res, metric, sel("job="+scrapeJob))
				add(metric, "", "%s/namespaces/%s/%s/*/%s?metricLabelSelector=%s", base, ns, res, metric, sel("job!=other"))
			}
		}
	}
	for _, metric := range sortedKeys(externalNames) {
		base := "/apis/external.metrics.k8s.io/v1beta1"
		add(metric, "", "%s/namespaces/%s/%s", base, ns, metric)
		add(metric, "", "%s/namespaces/%s/%s", base, other, metric)
		add(metric, "", "%s/namespaces/%s/%s?labelSelector=%s", base, ns, metric, sel("name=orders"))
		add(metric, "", "%s/namespaces/%s/%s?labelSelector=%s", base, ns, metric, sel("name=none"))
	}
	base := "/apis/metrics.k8s.io/v1beta1"
	add("", "", "%s/namespaces/%s/pods", base, ns)
	add("", env.pods[0], "%s/namespaces/%s/pods/%s", base, ns, env.pods[0])
	add("", "nope", "%s/namespaces/%s/pods/nope", base, ns)
	add("", "", "%s/namespaces/%s/pods?labelSelector=%s", base, ns, sel("app=web"))
	add("", "", "%s/namespaces/%s/pods", base, other)
	add("", "", "%s/nodes", base)
	add("", env.h.NodeName, "%s/nodes/%s", base, env.h.NodeName)
	add("", "nope", "%s/nodes/nope", base)
	return out, nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func need(t *testing.T) *harness.Harness {
	t.Helper()
	if env.setupErr != nil {
		t.Fatalf("setup failed: %v", env.setupErr)
	}
	return env.h
}
