package promql

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	k8slabels "k8s.io/apimachinery/pkg/labels"

	"github.com/tidal-autoscaler/tidal/rules/config"
	"github.com/tidal-autoscaler/tidal/rules/naming"
)

// FuzzSelector takes a request's metricLabelSelector as the API server
// does (labels.Parse on any string) and renders it to matchers and into a
// rule's query, for objects and for an external metric: nothing panics,
// and either a *SelectorError is returned or the matchers, and the whole
// query, parse with the PromQL parser the rules are checked with
// (config.ParsePromQL), the matchers reading back as rendered.
func FuzzSelector(f *testing.F) {
	for _, s := range []string{
		"", "verb=GET", "verb==GET", "verb!=GET", "verb in (GET,POST)", "verb in (GET)",
		"host in (a.example.com,b.example.com)", "verb notin (GET,POST)", "verb", "!verb",
		"z=1,a in (y,x),m", "replicas>3", "replicas<3", "app.kubernetes.io/name=web",
		"pod-template-hash=abc", "metric1=value1", "verb in (GET,POST),code", "foo=bar,qux in (bar,baz)",
		"name=my-queue", "code>499", "__name__=up", "a=b\\c", "a in (x,x,y)", "a=,b!=",
	} {
		f.Add(s, "production", "frontend-0", false)
		f.Add(s, "", "", true)
	}

	pods, err := naming.NewResources(config.ResourceMapping{Overrides: map[string]config.GroupResource{
		"namespace": {Resource: "namespace"},
		"pod":       {Resource: "pod"},
	}}, naming.Builtin)
	if err != nil {
		f.Fatal(err)
	}
	objects, err := NewQuery(fuzzObjectsTemplate, pods)
	if err != nil {
		f.Fatal(err)
	}
	external, err := NewExternalQuery(fuzzExternalTemplate, pods, true)
	if err != nil {
		f.Fatal(err)
	}

	f.Fuzz(func(t *testing.T, selector, ns, name string, isExternal bool) {
		sel, err := k8slabels.Parse(selector)
		if err != nil {
			return // the API server answers 400 before the adapter sees it
		}
		var query string
		var renderErr error
		if isExternal {
			query, renderErr = external.External(ExternalRequest{Series: "http_requests_total", Namespace: ns, MetricSelector: sel})
		} else {
			query, renderErr = objects.Objects(ObjectRequest{Series: "http_requests_total", Resource: naming.PodsResource, Namespace: ns, Names: []string{name}, MetricSelector: sel})
		}

		ms, err := MatchersFromSelector(sel)
		if err != nil {
			var se *SelectorError
			if !errors.As(err, &se) {
				t.Fatalf("MatchersFromSelector(%q): %v, want a *SelectorError", selector, err)
			}
			if !errors.As(renderErr, &se) {
				t.Fatalf("MatchersFromSelector(%q) failed with %v but rendering gave %v (%q)", selector, err, renderErr, query)
			}
			return
		}

		// The matchers alone.
		parts := make([]string, len(ms))
		for i, m := range ms {
			parts[i] = m.String()
		}
		text := "up{" + strings.Join(parts, ",") + "}"
		expr, err := config.ParsePromQL(text)
		if err != nil {
			t.Fatalf("matchers of %q do not parse: %v\n%s", selector, err, text)
		}
		vs, ok := expr.(*parser.VectorSelector)
		if !ok {
			t.Fatalf("matchers of %q parse to %T, not a vector selector: %s", selector, expr, text)
		}
		types := map[MatchType]labels.MatchType{MatchEqual: labels.MatchEqual, MatchNotEqual: labels.MatchNotEqual, MatchRegexp: labels.MatchRegexp, MatchNotRegexp: labels.MatchNotRegexp}
		var got []*labels.Matcher
		for _, m := range vs.LabelMatchers {
			if m.Name != "__name__" {
				got = append(got, m)
			}
		}
		if len(got) != len(ms) {
			t.Fatalf("%q: %d matchers parsed, %d rendered: %s", selector, len(got), len(ms), text)
		}
		for i, m := range ms {
			if got[i].Name != m.Name || got[i].Type != types[m.Type] || got[i].Value != m.Value {
				t.Fatalf("%q: matcher %d reads back as %s, rendered %s", selector, i, got[i], m)
			}
		}

		// The whole query.
		if renderErr != nil {
			var se *SelectorError
			if errors.As(renderErr, &se) {
				t.Fatalf("rendering %q: selector error %v although its matchers were fine", selector, renderErr)
			}
			return // a bad namespace or object name: the request's fault, not the selector's
		}
		if _, err := config.ParsePromQL(query); err != nil {
			t.Fatalf("query for %q (ns %q, name %q) does not parse: %v\n%s", selector, ns, name, err, query)
		}
	})
}
