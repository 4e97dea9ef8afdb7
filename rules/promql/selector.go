package promql

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// MatchType is a PromQL label matching operator.
type MatchType int

const (
	MatchEqual MatchType = iota
	MatchNotEqual
	MatchRegexp
	MatchNotRegexp
)

func (t MatchType) String() string {
	switch t {
	case MatchEqual:
		return "="
	case MatchNotEqual:
		return "!="
	case MatchRegexp:
		return "=~"
	case MatchNotRegexp:
		return "!~"
	}
	return fmt.Sprintf("MatchType(%d)", int(t))
}

// Matcher is one PromQL label matcher. For the regex types, Value is the
// regular expression.
type Matcher struct {
	Name  string
	Type  MatchType
	Value string
}

// String renders the matcher, e.g. `pod=~"a|b"`, with the value quoted.
func (m Matcher) String() string {
	return m.Name + m.Type.String() + Quote(m.Value)
}

// SelectorError says why a request's label selector cannot become PromQL
// label matchers. It is the client's mistake (HTTP 400), unlike other
// rendering errors.
type SelectorError struct {
	Label  string
	Reason string
}

func (e *SelectorError) Error() string {
	return fmt.Sprintf("label selector on %q: %s", e.Label, e.Reason)
}

// MatchersFromSelector converts a Kubernetes label selector, in its
// requirements' order (sorted by key for parsed selectors):
//
//	a=x, a==x  -> a="x"         a!=x       -> a!="x"
//	a in (x,y) -> a=~"x|y"      a notin (x,y) -> a!~"x|y"
//	a          -> a!=""         !a         -> a=""
//
// Values joined into a regex are regex-escaped. gt and lt, label names that
// are not Prometheus label names (e.g. "app.kubernetes.io/name") and
// Prometheus' reserved "__" names (which would select other metrics) give a
// *SelectorError. A nil selector matches everything.
func MatchersFromSelector(sel labels.Selector) ([]Matcher, error) {
	parts, err := selectorParts(requirementsOf(sel))
	if err != nil {
		return nil, err
	}
	out := make([]Matcher, len(parts))
	for i, p := range parts {
		out[i] = p.m
	}
	return out, nil
}

// requirementMatcher converts one requirement. values are sorted, as
// labels.Requirement keeps them.
func requirementMatcher(name string, op selection.Operator, values []string) (Matcher, error) {
	if !IsLabelName(name) {
		return Matcher{}, &SelectorError{Label: name, Reason: "not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)"}
	}
	if strings.HasPrefix(name, "__") {
		return Matcher{}, &SelectorError{Label: name, Reason: "names starting with __ are reserved by Prometheus"}
	}
	for _, v := range values {
		if !utf8.ValidString(v) {
			return Matcher{}, &SelectorError{Label: name, Reason: fmt.Sprintf("value %q is not UTF-8", v)}
		}
	}
	one := func(t MatchType) (Matcher, error) {
		if len(values) != 1 {
			return Matcher{}, &SelectorError{Label: name, Reason: fmt.Sprintf("operator %s takes one value, got %d", op, len(values))}
		}
		return Matcher{Name: name, Type: t, Value: values[0]}, nil
	}
	some := func(t MatchType) (Matcher, error) {
		if len(values) == 0 {
			return Matcher{}, &SelectorError{Label: name, Reason: fmt.Sprintf("operator %s needs at least one value", op)}
		}
		return Matcher{Name: name, Type: t, Value: RegexAlternation(values)}, nil
	}
	none := func(t MatchType) (Matcher, error) {
		if len(values) != 0 {
			return Matcher{}, &SelectorError{Label: name, Reason: fmt.Sprintf("operator %s takes no value", op)}
		}
		return Matcher{Name: name, Type: t, Value: ""}, nil
	}
	switch op {
	case selection.Equals, selection.DoubleEquals:
		return one(MatchEqual)
	case selection.NotEquals:
		return one(MatchNotEqual)
	case selection.In:
		return some(MatchRegexp)
	case selection.NotIn:
		return some(MatchNotRegexp)
	case selection.Exists:
		return none(MatchNotEqual)
	case selection.DoesNotExist:
		return none(MatchEqual)
	case selection.GreaterThan, selection.LessThan:
		return Matcher{}, &SelectorError{Label: name, Reason: fmt.Sprintf("operator %s compares numbers, which Prometheus label matchers cannot do; use =, !=, in, notin or exists", op)}
	}
	return Matcher{}, &SelectorError{Label: name, Reason: fmt.Sprintf("unsupported operator %q", op)}
}
