package promql

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/tidal-autoscaler/tidal/rules/config"
	"github.com/tidal-autoscaler/tidal/rules/naming"
)

// The fuzz template uses .LabelMatchers, .GroupBy and .LabelValuesByName
// (inside a quoted regex), the three ways request values reach a query.
const (
	fuzzObjectsTemplate  = `sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>) or on() max(<<.Series>>{pod=~"<<index .LabelValuesByName "pod">>",namespace=~"<<index .LabelValuesByName "namespace">>"})`
	fuzzExternalTemplate = `sum(<<.Series>>{<<.LabelMatchers>>}) or on() max(<<.Series>>{pod=~"<<index .LabelValuesByName "pod">>",namespace=~"<<index .LabelValuesByName "namespace">>"})`
)

var fuzzOps = []selection.Operator{selection.Equals, selection.DoubleEquals, selection.NotEquals, selection.In, selection.NotIn, selection.Exists, selection.DoesNotExist}

// FuzzRender renders queries with arbitrary object names, namespace,
// selector label name and values, and checks with the real PromQL parser
// that the query has exactly the structure of the same query rendered with
// harmless values, and that every value reads back unchanged: no input can
// add a selector, a matcher, an operator or a function.
func FuzzRender(f *testing.F) {
	f.Add("frontend-0", "frontend-1", "production", "verb", "GET", "POST", uint8(3), false)
	f.Add(`a"b`, `c\d`, "ns\n}", "pod", `"} or vector(1) or {a="`, `.*`, uint8(0), false)
	f.Add("x|y", "", "", "namespace", `\`, "\uFFFD", uint8(4), true)
	f.Add("web.1", "web.2", "a\u2028b", "app_kubernetes_io_name", "", "", uint8(5), false)
	f.Add("p", "", "ns", "app.kubernetes.io/name", "v", "", uint8(0), true)
	f.Add("p", "q", "ns", "__name__", "secret", "", uint8(0), false)
	f.Add("\xff", "q", "ns", "l", "\x00", "\t", uint8(2), false)

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
	p := parser.NewParser(parser.Options{})

	f.Fuzz(func(t *testing.T, name1, name2, ns, key, v1, v2 string, opIndex uint8, isExternal bool) {
		op := fuzzOps[int(opIndex)%len(fuzzOps)]
		var values []string
		switch op {
		case selection.Equals, selection.DoubleEquals, selection.NotEquals:
			values = []string{v1}
		case selection.In, selection.NotIn:
			values = []string{v1, v2}
			slices.Sort(values)
			values = slices.Compact(values)
		}
		names := []string{name1}
		if name2 != "" {
			names = append(names, name2)
		}

		render := func(names []string, ns string, values []string) (string, error) {
			reqs := []requirement{{key: key, op: op, values: values}}
			if isExternal {
				return external.external(ExternalRequest{Series: "http_requests_total", Namespace: ns}, reqs)
			}
			return objects.objects(ObjectRequest{Series: "http_requests_total", Resource: naming.PodsResource, Namespace: ns, Names: names}, reqs)
		}
		got, err := render(names, ns, values)

		// Which inputs must be refused, and how.
		validValues := !slices.ContainsFunc(values, func(v string) bool { return !utf8.ValidString(v) })
		validKey := IsLabelName(key) && !strings.HasPrefix(key, "__")
		validNames := isExternal || (utf8.ValidString(name1) && utf8.ValidString(name2) && name1 != "")
		switch {
		case !validKey || !validValues:
			var se *SelectorError
			if !errors.As(err, &se) {
				t.Fatalf("want a *SelectorError for key %q values %q, got %v (%q)", key, values, err, got)
			}
			return
		case !utf8.ValidString(ns) || !validNames:
			if err == nil {
				t.Fatalf("rendered invalid UTF-8 or empty names: %q", got)
			}
			return
		case err != nil:
			t.Fatalf("render: %v", err)
		}

		expr, err := p.ParseExpr(got)
		if err != nil {
			t.Fatalf("rendered query does not parse: %v\n%s", err, got)
		}

		// Same structure as with harmless values.
		safeNames := []string{"n1", "n2"}[:len(names)]
		safeValues := []string{"v1", "v2"}[:len(values)]
		safeNS := ""
		if ns != "" {
			safeNS = "ns"
		}
		safe, err := render(safeNames, safeNS, safeValues)
		if err != nil {
			t.Fatalf("render with harmless values: %v", err)
		}
		safeExpr, err := p.ParseExpr(safe)
		if err != nil {
			t.Fatalf("harmless query does not parse: %v\n%s", err, safe)
		}
		// Every value reads back as given.
		sel := vectorSelectors(expr)
		if len(sel) != 2 {
			t.Fatalf("%d vector selectors, want 2: %s", len(sel), got)
		}
		want := []*labels.Matcher{matcherOf(t, mustMatcher(t, key, op, values))}
		valuesByName := map[string][]string{key: values}
		if ns != "" {
			want = append(want, &labels.Matcher{Type: labels.MatchEqual, Name: "namespace", Value: ns})
			valuesByName["namespace"] = []string{ns}
		}
		if !isExternal {
			if len(names) == 1 {
				want = append(want, &labels.Matcher{Type: labels.MatchEqual, Name: "pod", Value: names[0]})
			} else {
				want = append(want, &labels.Matcher{Type: labels.MatchRegexp, Name: "pod", Value: RegexAlternation(names)})
			}
			valuesByName["pod"] = names
		}
		want = append(want, &labels.Matcher{Type: labels.MatchEqual, Name: "__name__", Value: "http_requests_total"})
		assertMatchers(t, sel[0].LabelMatchers, want)
		assertMatchers(t, sel[1].LabelMatchers, []*labels.Matcher{
			{Type: labels.MatchRegexp, Name: "pod", Value: RegexAlternation(valuesByName["pod"])},
			{Type: labels.MatchRegexp, Name: "namespace", Value: RegexAlternation(valuesByName["namespace"])},
			{Type: labels.MatchEqual, Name: "__name__", Value: "http_requests_total"},
		})

		// Regexes match exactly the given values.
		for _, m := range sel[1].LabelMatchers[:2] {
			vs := valuesByName[m.Name]
			for _, v := range vs {
				if !m.Matches(v) {
					t.Errorf("%s does not match its value %q", m, v)
				}
			}
			if len(vs) > 0 && !slices.Contains(vs, vs[0]+"x") && m.Matches(vs[0]+"x") {
				t.Errorf("%s matches %q, which was not asked for", m, vs[0]+"x")
			}
		}

		// shape blanks the values, so it comes last.
		if a, b := shape(expr), shape(safeExpr); a != b {
			t.Fatalf("structure changed:\n got  %s\n want %s\nquery: %s", a, b, got)
		}
	})
}

func mustMatcher(t *testing.T, key string, op selection.Operator, values []string) Matcher {
	m, err := requirementMatcher(key, op, values)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func matcherOf(t *testing.T, m Matcher) *labels.Matcher {
	types := map[MatchType]labels.MatchType{MatchEqual: labels.MatchEqual, MatchNotEqual: labels.MatchNotEqual, MatchRegexp: labels.MatchRegexp, MatchNotRegexp: labels.MatchNotRegexp}
	return &labels.Matcher{Type: types[m.Type], Name: m.Name, Value: m.Value}
}

func assertMatchers(t *testing.T, got, want []*labels.Matcher) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("matchers %v, want %v", got, want)
	}
	for i := range got {
		if got[i].Type != want[i].Type || got[i].Name != want[i].Name || got[i].Value != want[i].Value {
			t.Fatalf("matcher %d is %s, want %s", i, got[i], want[i])
		}
	}
}

func vectorSelectors(e parser.Expr) []*parser.VectorSelector {
	var out []*parser.VectorSelector
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			out = append(out, vs)
		}
		return nil
	})
	return out
}

// shape prints e with every matcher value blanked out.
func shape(e parser.Expr) string {
	for _, vs := range vectorSelectors(e) {
		for _, m := range vs.LabelMatchers {
			m.Value = "_"
		}
	}
	return e.String()
}
