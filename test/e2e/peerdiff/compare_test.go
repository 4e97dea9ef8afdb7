package peerdiff

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

// The differences docs/compatibility.md's "Compatibility with prometheus-adapter"
// section lists, by the name of its bullet. Every difference between the
// two servers' answers must be one of them.
const (
	ruleEmptyList      = "empty selections are empty lists"
	ruleNaN            = "NaN is no sample"
	rulePrecision      = "values keep Prometheus' precision"
	ruleObjectsExist   = "objects must exist"
	ruleClientMistake  = "client mistakes are 4xx"
	ruleAPIVersion     = "items are well formed: apiVersion"
	ruleWindowSeconds  = "items are well formed: windowSeconds"
	ruleDiscoveryScope = "discovery scopes"
	ruleClusterInNS    = "a cluster-scoped object asked for under a namespace"
	rulePause          = "metrics.k8s.io ignores the pause container"
	ruleUnanswerable   = "a rule that cannot answer is left out"
)

// request is one request both servers get, with what the classification
// needs to know of it.
type request struct {
	path string
	// metric is the metric's name; object the named object ("" for a
	// wildcard or a list).
	metric, object string
}

// difference is one way the answers differ: rule names the listed
// difference it is, or is "" when it is none of them.
type difference struct {
	rule, detail string
}

func (d difference) String() string {
	if d.rule == "" {
		return "UNLISTED: " + d.detail
	}
	return d.rule + ": " + d.detail
}

// isNaN says whether Prometheus' value for the metric of the object is NaN:
// app_nan is NaN for the first pod, so for every sum that includes it.
func isNaN(metric, object string) bool {
	return metric == "app_nan" && object != env.pods[1]
}

// compare classifies every difference between the peer's and Tidal's
// answers to r.
func compare(r request, peer, tidal answer) []difference {
	if peer.code != http.StatusOK || tidal.code != http.StatusOK {
		return compareCodes(r, peer, tidal)
	}
	var kind struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(tidal.body, &kind); err != nil {
		return []difference{{"", fmt.Sprintf("Tidal's answer does not decode: %v", err)}}
	}
	switch kind.Kind {
	case "APIResourceList":
		return compareDiscovery(r, peer.body, tidal.body)
	case "MetricValueList":
		return compareCustom(r, peer.body, tidal.body)
	case "ExternalMetricValueList":
		return compareExternal(r, peer.body, tidal.body)
	case "PodMetrics", "PodMetricsList", "NodeMetrics", "NodeMetricsList":
		return compareResource(peer.body, tidal.body)
	}
	return []difference{{"", "unknown kind " + kind.Kind}}
}

// compareCodes classifies answers of which at least one is not 200.
func compareCodes(r request, peer, tidal answer) []difference {
	if peer.code == tidal.code {
		return nil // both refused alike; messages are each server's own
	}
	detail := fmt.Sprintf("prometheus-adapter %d %s; Tidal %d %s", peer.code, short(peer.body), tidal.code, short(tidal.body))
	switch {
	case peer.code == http.StatusNotFound && tidal.code == http.StatusOK && itemCount(tidal.body) == 0:
		return []difference{{ruleEmptyList, detail}}
	case peer.code == http.StatusNotFound && tidal.code == http.StatusOK && strings.Contains(r.path, "/namespaces/"+ns+"/nodes/"):
		return []difference{{ruleClusterInNS, detail}}
	case peer.code == http.StatusOK && tidal.code == http.StatusNotFound && r.object == gonePod:
		return []difference{{ruleObjectsExist, detail}}
	case peer.code == http.StatusOK && tidal.code == http.StatusNotFound && isNaN(r.metric, r.object) && allValues(peer.body, 0):
		return []difference{{ruleNaN, detail}}
	case peer.code == http.StatusOK && tidal.code == http.StatusOK && isNaN(r.metric, r.object):
		return []difference{{ruleNaN, detail}}
	case peer.code == http.StatusInternalServerError && strings.Contains(r.path, "metricLabelSelector") &&
		(tidal.code == http.StatusOK && strings.Contains(r.path, url.QueryEscape("!=")) || tidal.code >= 400 && tidal.code < 500):
		return []difference{{ruleClientMistake, detail}}
	case peer.code != http.StatusOK && tidal.code == http.StatusNotFound && r.metric == "queue_consumer_lag" && strings.Contains(r.path, "external.metrics"):
		return []difference{{ruleUnanswerable, detail}}
	}
	return []difference{{"", detail}}
}

func short(body []byte) string {
	s := strings.TrimSpace(string(body))
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// itemCount is the length of a list answer's items (-1 when it is none).
func itemCount(body []byte) int {
	var l struct {
		Items *[]json.RawMessage `json:"items"`
	}
	if json.Unmarshal(body, &l) != nil || l.Items == nil {
		return -1
	}
	return len(*l.Items)
}

// allValues says whether every item of a list has the value v.
func allValues(body []byte, v float64) bool {
	var l struct {
		Items []struct {
			Value string `json:"value"`
		} `json:"items"`
	}
	if json.Unmarshal(body, &l) != nil || len(l.Items) == 0 {
		return false
	}
	for _, it := range l.Items {
		if q, err := resource.ParseQuantity(it.Value); err != nil || q.AsApproximateFloat64() != v {
			return false
		}
	}
	return true
}

// compareValues classifies two values of one item: equal, or the peer's
// truncated to milli-units. Tidal's value is Prometheus' rounded to
// nano-units, so the value the peer truncated may lie up to half a
// nano-unit either side of it (and float noise between the two queries adds
// a little): 2.4689999999 is Tidal's 2469m and the peer's 2468m.
func compareValues(what, peer, tidal string) []difference {
	if peer == tidal {
		return nil
	}
	p, err1 := resource.ParseQuantity(peer)
	t, err2 := resource.ParseQuantity(tidal)
	if err1 != nil || err2 != nil {
		return []difference{{"", fmt.Sprintf("%s: values %q and %q", what, peer, tidal)}}
	}
	pf, tf := p.AsApproximateFloat64(), t.AsApproximateFloat64()
	detail := fmt.Sprintf("%s: prometheus-adapter %s, Tidal %s", what, peer, tidal)
	scale := math.Max(1, math.Abs(tf))
	switch {
	case math.Abs(pf-tf) <= 1e-12*scale:
		return nil // the same number written differently
	case truncatesNear(pf, tf, 1e-9*scale):
		return []difference{{rulePrecision, detail}}
	}
	return []difference{{"", detail}}
}

// truncatesNear says whether peer is some value within tolerance of tidal
// truncated to milli-units (toward zero, as prometheus-adapter does).
func truncatesNear(peer, tidal, tolerance float64) bool {
	lo := math.Trunc((tidal-tolerance)*1000) / 1000
	hi := math.Trunc((tidal+tolerance)*1000) / 1000
	eps := 1e-12 * math.Max(1, math.Abs(tidal))
	return peer >= lo-eps && peer <= hi+eps
}

// apiResource is one entry of an APIResourceList.
type apiResource struct {
	Name       string   `json:"name"`
	Namespaced bool     `json:"namespaced"`
	Kind       string   `json:"kind"`
	Verbs      []string `json:"verbs"`
}

// clusterScoped are the resources of the legacy rules' series that are
// not namespaced.
var clusterScoped = map[string]bool{"namespaces": true, "nodes": true}

func compareDiscovery(r request, peerBody, tidalBody []byte) []difference {
	var p, t struct {
		Resources []apiResource `json:"resources"`
	}
	if err := json.Unmarshal(peerBody, &p); err != nil {
		return []difference{{"", "prometheus-adapter's discovery does not decode: " + err.Error()}}
	}
	if err := json.Unmarshal(tidalBody, &t); err != nil {
		return []difference{{"", "Tidal's discovery does not decode: " + err.Error()}}
	}
	byName := func(rs []apiResource) map[string]apiResource {
		m := map[string]apiResource{}
		for _, x := range rs {
			m[x.Name] = x
		}
		return m
	}
	pm, tm := byName(p.Resources), byName(t.Resources)
	external := strings.Contains(r.path, "external.metrics")
	var out []difference
	for _, name := range unionKeys(pm, tm) {
		pr, inP := pm[name]
		tr, inT := tm[name]
		switch {
		case !inT && external && name == "queue_consumer_lag":
			out = append(out, difference{ruleUnanswerable, "listed by prometheus-adapter only: " + name})
		case !inT:
			out = append(out, difference{"", "listed by prometheus-adapter only: " + name})
		case !inP:
			out = append(out, difference{"", "listed by Tidal only: " + name})
		default:
			if pr.Namespaced != tr.Namespaced {
				want := !clusterScoped[strings.SplitN(name, "/", 2)[0]]
				if external {
					want = name != "queue_depth" // its rule says namespaced: false
				}
				rule := ruleDiscoveryScope
				if tr.Namespaced != want {
					rule = ""
				}
				out = append(out, difference{rule, fmt.Sprintf("%s namespaced: prometheus-adapter %v, Tidal %v", name, pr.Namespaced, tr.Namespaced)})
			}
			if pr.Kind != tr.Kind || !slices.Equal(sorted(pr.Verbs), sorted(tr.Verbs)) {
				out = append(out, difference{"", fmt.Sprintf("%s: prometheus-adapter %+v, Tidal %+v", name, pr, tr)})
			}
		}
	}
	return out
}

func sorted(s []string) []string {
	c := slices.Clone(s)
	sort.Strings(c)
	return c
}

func unionKeys[V any](a, b map[string]V) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range []map[string]V{a, b} {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}

// customItem is an item of custom.metrics.k8s.io v1beta1 or v1beta2.
type customItem struct {
	DescribedObject struct {
		Kind       string `json:"kind"`
		Namespace  string `json:"namespace"`
		Name       string `json:"name"`
		APIVersion string `json:"apiVersion"`
	} `json:"describedObject"`
	MetricName string `json:"metricName"` // v1beta1
	Metric     *struct {
		Name     string          `json:"name"`
		Selector json.RawMessage `json:"selector"`
	} `json:"metric"` // v1beta2
	Selector json.RawMessage `json:"selector"` // v1beta1
	// Window is v1beta1's name of WindowSeconds (v1beta2's).
	Window        *int64 `json:"window"`
	WindowSeconds *int64 `json:"windowSeconds"`
	Value         string `json:"value"`
}

func (it customItem) window() *int64 {
	if it.WindowSeconds != nil {
		return it.WindowSeconds
	}
	return it.Window
}

func (it customItem) name() string {
	if it.Metric != nil {
		return it.Metric.Name
	}
	return it.MetricName
}

func (it customItem) selector() string {
	if it.Metric != nil {
		return string(it.Metric.Selector)
	}
	return string(it.Selector)
}

func (it customItem) key() string {
	o := it.DescribedObject
	return fmt.Sprintf("%s %s/%s %s", o.Kind, o.Namespace, o.Name, it.name())
}

func compareCustom(r request, peerBody, tidalBody []byte) []difference {
	return compareItems(peerBody, tidalBody, customItem.key, func(k string, pi customItem) difference {
		if isNaN(pi.name(), pi.DescribedObject.Name) && allZero(pi.Value) {
			return difference{ruleNaN, "prometheus-adapter only, as 0: " + k}
		}
		return difference{"", "prometheus-adapter only: " + k}
	}, compareCustomItem)
}

// compareItems compares two lists of items by key: peerOnly classifies an
// item only prometheus-adapter answered, both the items both answered; an
// item only Tidal answered is never a listed difference.
func compareItems[T any](peerBody, tidalBody []byte, key func(T) string, peerOnly func(string, T) difference, both func(string, T, T) []difference) []difference {
	var p, t struct {
		Items []T `json:"items"`
	}
	if err := json.Unmarshal(peerBody, &p); err != nil {
		return []difference{{"", "prometheus-adapter's list does not decode: " + err.Error()}}
	}
	if err := json.Unmarshal(tidalBody, &t); err != nil {
		return []difference{{"", "Tidal's list does not decode: " + err.Error()}}
	}
	index := func(items []T) map[string]T {
		m := map[string]T{}
		for _, it := range items {
			m[key(it)] = it
		}
		return m
	}
	pm, tm := index(p.Items), index(t.Items)
	var out []difference
	for _, k := range unionKeys(pm, tm) {
		pi, inP := pm[k]
		ti, inT := tm[k]
		switch {
		case !inT:
			out = append(out, peerOnly(k, pi))
		case !inP:
			out = append(out, difference{"", "Tidal only: " + k})
		default:
			out = append(out, both(k, pi, ti)...)
		}
	}
	return out
}

func allZero(v string) bool {
	q, err := resource.ParseQuantity(v)
	return err == nil && q.IsZero()
}

func compareCustomItem(k string, p, t customItem) []difference {
	var out []difference
	po, to := p.DescribedObject, t.DescribedObject
	if po.APIVersion != to.APIVersion {
		rule := ""
		if po.APIVersion == "/"+to.APIVersion && !strings.Contains(to.APIVersion, "/") {
			rule = ruleAPIVersion
		}
		out = append(out, difference{rule, fmt.Sprintf("%s apiVersion: prometheus-adapter %q, Tidal %q", k, po.APIVersion, to.APIVersion)})
	}
	out = append(out, compareWindows(k, p.window(), t.window())...)
	if normSelector(p.selector()) != normSelector(t.selector()) {
		out = append(out, difference{"", fmt.Sprintf("%s selector: prometheus-adapter %s, Tidal %s", k, p.selector(), t.selector())})
	}
	return append(out, compareValues(k, p.Value, t.Value)...)
}

// normSelector treats an absent, null and empty selector alike.
func normSelector(s string) string {
	if s == "null" || s == "{}" {
		return ""
	}
	return s
}

// externalItem is an item of external.metrics.k8s.io v1beta1.
type externalItem struct {
	MetricName   string            `json:"metricName"`
	MetricLabels map[string]string `json:"metricLabels"`
	Window       *int64            `json:"window"`
	Value        string            `json:"value"`
}

// compareWindows classifies two windowSeconds: prometheus-adapter never
// sets it; Tidal does when the query has one range.
func compareWindows(k string, p, t *int64) []difference {
	switch {
	case p == nil && t == nil:
		return nil
	case p == nil:
		return []difference{{ruleWindowSeconds, fmt.Sprintf("%s windowSeconds: prometheus-adapter none, Tidal %d", k, *t)}}
	case t == nil || *p != *t:
		return []difference{{"", fmt.Sprintf("%s windowSeconds: prometheus-adapter %d, Tidal %v", k, *p, t)}}
	}
	return nil
}

func (it externalItem) key() string {
	keys := make([]string, 0, len(it.MetricLabels))
	for k, v := range it.MetricLabels {
		keys = append(keys, k+"="+v)
	}
	sort.Strings(keys)
	return it.MetricName + "{" + strings.Join(keys, ",") + "}"
}

func compareExternal(r request, peerBody, tidalBody []byte) []difference {
	return compareItems(peerBody, tidalBody, externalItem.key, func(k string, _ externalItem) difference {
		return difference{"", "prometheus-adapter only: " + k}
	}, func(k string, pi, ti externalItem) []difference {
		return append(compareWindows(k, pi.Window, ti.Window), compareValues(k, pi.Value, ti.Value)...)
	})
}

// usageObject is a PodMetrics or a NodeMetrics.
type usageObject struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Window     string            `json:"window"`
	Usage      map[string]string `json:"usage"`
	Containers []struct {
		Name  string            `json:"name"`
		Usage map[string]string `json:"usage"`
	} `json:"containers"`
}

// usageObjects decodes a PodMetrics or NodeMetrics object or list.
func usageObjects(body []byte) (map[string]usageObject, error) {
	var l struct {
		Kind  string        `json:"kind"`
		Items []usageObject `json:"items"`
	}
	if err := json.Unmarshal(body, &l); err != nil {
		return nil, err
	}
	objs := l.Items
	if !strings.HasSuffix(l.Kind, "List") {
		var o usageObject
		if err := json.Unmarshal(body, &o); err != nil {
			return nil, err
		}
		objs = []usageObject{o}
	}
	m := map[string]usageObject{}
	for _, o := range objs {
		m[o.Metadata.Namespace+"/"+o.Metadata.Name] = o
	}
	return m, nil
}

func compareResource(peerBody, tidalBody []byte) []difference {
	pm, err := usageObjects(peerBody)
	if err != nil {
		return []difference{{"", "prometheus-adapter's answer does not decode: " + err.Error()}}
	}
	tm, err := usageObjects(tidalBody)
	if err != nil {
		return []difference{{"", "Tidal's answer does not decode: " + err.Error()}}
	}
	var out []difference
	for _, k := range unionKeys(pm, tm) {
		p, inP := pm[k]
		t, inT := tm[k]
		switch {
		case !inT:
			out = append(out, difference{"", "prometheus-adapter only: " + k})
			continue
		case !inP:
			out = append(out, difference{"", "Tidal only: " + k})
			continue
		}
		if p.Window != t.Window {
			out = append(out, difference{"", fmt.Sprintf("%s window: prometheus-adapter %s, Tidal %s", k, p.Window, t.Window)})
		}
		if !mapsEqual(p.Metadata.Labels, t.Metadata.Labels) {
			out = append(out, difference{"", fmt.Sprintf("%s labels: prometheus-adapter %v, Tidal %v", k, p.Metadata.Labels, t.Metadata.Labels)})
		}
		out = append(out, compareUsage(k, p.Usage, t.Usage)...)
		pc, tc := map[string]map[string]string{}, map[string]map[string]string{}
		for _, c := range p.Containers {
			pc[c.Name] = c.Usage
		}
		for _, c := range t.Containers {
			tc[c.Name] = c.Usage
		}
		for _, name := range unionKeys(pc, tc) {
			pu, inP := pc[name]
			tu, inT := tc[name]
			switch {
			case !inT && (name == "POD" || name == ""):
				out = append(out, difference{rulePause, fmt.Sprintf("%s container %q: prometheus-adapter only", k, name)})
			case !inT:
				out = append(out, difference{"", fmt.Sprintf("%s container %q: prometheus-adapter only", k, name)})
			case !inP:
				out = append(out, difference{"", fmt.Sprintf("%s container %q: Tidal only", k, name)})
			default:
				out = append(out, compareUsage(k+" "+name, pu, tu)...)
			}
		}
	}
	return out
}

func compareUsage(k string, p, t map[string]string) []difference {
	var out []difference
	for _, res := range unionKeys(p, t) {
		pv, inP := p[res]
		tv, inT := t[res]
		if !inP || !inT {
			out = append(out, difference{"", fmt.Sprintf("%s %s: prometheus-adapter %q, Tidal %q", k, res, pv, tv)})
			continue
		}
		out = append(out, compareValues(k+" "+res, pv, tv)...)
	}
	return out
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestCompareValues pins how two values of one item are classified: the
// CI failure of 2026-12-06 was the boundary row, a rate just under 2.469.
func TestCompareValues(t *testing.T) {
	for _, tc := range []struct {
		name, peer, tidal, rule string
		differs                 bool
	}{
		{name: "same digits", peer: "2469m", tidal: "2469m"},
		{name: "written differently", peer: "1", tidal: "1000m"},
		{name: "truncated below a milli boundary Tidal rounds up to", peer: "2468m", tidal: "2469m", rule: rulePrecision, differs: true},
		{name: "truncated to milli-units", peer: "312m", tidal: "312500u", rule: rulePrecision, differs: true},
		{name: "negative truncated toward zero", peer: "-312m", tidal: "-312500u", rule: rulePrecision, differs: true},
		{name: "a whole milli-unit apart", peer: "2467m", tidal: "2469m", differs: true},
		{name: "peer above Tidal", peer: "2470m", tidal: "2469m", differs: true},
		{name: "peer rounded, not truncated", peer: "313m", tidal: "312500u", differs: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := compareValues("v", tc.peer, tc.tidal)
			if !tc.differs {
				if len(got) != 0 {
					t.Fatalf("compareValues(%s, %s) = %v, want no difference", tc.peer, tc.tidal, got)
				}
				return
			}
			if len(got) != 1 || got[0].rule != tc.rule {
				t.Fatalf("compareValues(%s, %s) = %v, want one difference of rule %q", tc.peer, tc.tidal, got, tc.rule)
			}
		})
	}
}
