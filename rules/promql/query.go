package promql

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"text/template"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/tidal-autoscaler/tidal/rules/tmpl"
)

// Labeler names the label of a group-resource; *naming.Resources is one.
type Labeler interface {
	LabelFor(gr schema.GroupResource) (string, error)
}

var namespaces = schema.GroupResource{Resource: "namespaces"}

// Query is a compiled query template of one rule (metricsQuery, or a
// resource rule's containerQuery or nodeQuery) with the rule's labels.
type Query struct {
	t          *template.Template
	labels     Labeler
	namespaced bool
}

// NewQuery compiles the query template of a custom-metrics or resource rule.
func NewQuery(text string, labels Labeler) (*Query, error) {
	t, err := tmpl.Parse("query", text)
	if err != nil {
		return nil, err
	}
	return &Query{t: t, labels: labels, namespaced: true}, nil
}

// NewExternalQuery compiles the metricsQuery of an external rule;
// namespaced is the rule's resources.namespaced (default true).
func NewExternalQuery(text string, labels Labeler, namespaced bool) (*Query, error) {
	q, err := NewQuery(text, labels)
	if err != nil {
		return nil, err
	}
	q.namespaced = namespaced
	return q, nil
}

// ObjectRequest asks for a metric of some objects of one resource: a
// custom metric (custom.metrics.k8s.io), or CPU or memory of pods or nodes
// (metrics.k8s.io, with an empty Series and the container label in
// ExtraGroupBy for pods).
type ObjectRequest struct {
	// Series is the Prometheus metric name.
	Series string
	// Resource is the normalised group-resource of the objects.
	Resource schema.GroupResource
	// Namespace of the objects; "" for cluster-scoped ones.
	Namespace string
	// Names of the objects; at least one.
	Names []string
	// MetricSelector is the request's metricLabelSelector; nil for none.
	MetricSelector labels.Selector
	// ExtraGroupBy labels are grouped by after the resource label.
	ExtraGroupBy []string
}

// ExternalRequest asks for an external metric.
type ExternalRequest struct {
	Series string
	// Namespace is the HPA's; it is ignored when the rule is not namespaced.
	Namespace      string
	MetricSelector labels.Selector
}

// part is one matcher and the values it was made of, for LabelValuesByName.
type part struct {
	m      Matcher
	values []string
}

// Objects renders the query for an ObjectRequest as prometheus-adapter
// does: .LabelMatchers is the selector's matchers, then namespace="ns",
// then the resource label (`=` for one name, `=~` for several);
// .GroupBy is the resource label and ExtraGroupBy. Errors about the
// selector are *SelectorError.
func (q *Query) Objects(req ObjectRequest) (string, error) {
	return q.objects(req, requirementsOf(req.MetricSelector))
}

// External renders the query for an ExternalRequest as prometheus-adapter
// does: .LabelMatchers is the selector's matchers, then namespace="ns"
// unless the rule is not namespaced; .GroupBy is empty.
func (q *Query) External(req ExternalRequest) (string, error) {
	return q.external(req, requirementsOf(req.MetricSelector))
}

// requirement is a label selector requirement. The fuzz test builds these
// directly, since labels.Requirement only holds values Kubernetes accepts
// and rendering must be safe for any value.
type requirement struct {
	key    string
	op     selection.Operator
	values []string
}

func requirementsOf(sel labels.Selector) []requirement {
	if sel == nil {
		return nil
	}
	reqs, _ := sel.Requirements()
	out := make([]requirement, len(reqs))
	for i, r := range reqs {
		out[i] = requirement{key: r.Key(), op: r.Operator(), values: r.Values().List()}
	}
	return out
}

func (q *Query) objects(req ObjectRequest, reqs []requirement) (string, error) {
	parts, err := selectorParts(reqs)
	if err != nil {
		return "", err
	}
	if req.Namespace != "" {
		p, err := q.namespacePart(req.Namespace)
		if err != nil {
			return "", err
		}
		parts = append(parts, p)
	}
	if len(req.Names) == 0 {
		return "", errors.New("no object names to query")
	}
	for _, n := range req.Names {
		if n == "" || !utf8.ValidString(n) {
			return "", fmt.Errorf("invalid object name %q", n)
		}
	}
	resLabel, err := q.label(req.Resource)
	if err != nil {
		return "", err
	}
	names := Matcher{Name: resLabel, Type: MatchEqual, Value: req.Names[0]}
	if len(req.Names) > 1 {
		names = Matcher{Name: resLabel, Type: MatchRegexp, Value: RegexAlternation(req.Names)}
	}
	parts = append(parts, part{m: names, values: req.Names})

	groupBy := append([]string{resLabel}, req.ExtraGroupBy...)
	for _, l := range groupBy[1:] {
		if !IsLabelName(l) {
			return "", fmt.Errorf("group-by label %q is not a Prometheus label name", l)
		}
	}
	return q.execute(req.Series, parts, strings.Join(groupBy, ","), groupBy)
}

func (q *Query) external(req ExternalRequest, reqs []requirement) (string, error) {
	parts, err := selectorParts(reqs)
	if err != nil {
		return "", err
	}
	if q.namespaced && req.Namespace != "" {
		p, err := q.namespacePart(req.Namespace)
		if err != nil {
			return "", err
		}
		parts = append(parts, p)
	}
	return q.execute(req.Series, parts, "", []string{})
}

func selectorParts(reqs []requirement) ([]part, error) {
	parts := make([]part, 0, len(reqs)+2)
	for _, r := range reqs {
		m, err := requirementMatcher(r.key, r.op, r.values)
		if err != nil {
			return nil, err
		}
		parts = append(parts, part{m: m, values: r.values})
	}
	return parts, nil
}

func (q *Query) namespacePart(ns string) (part, error) {
	if !utf8.ValidString(ns) {
		return part{}, fmt.Errorf("invalid namespace %q", ns)
	}
	l, err := q.label(namespaces)
	if err != nil {
		return part{}, err
	}
	return part{m: Matcher{Name: l, Type: MatchEqual, Value: ns}, values: []string{ns}}, nil
}

func (q *Query) label(gr schema.GroupResource) (string, error) {
	if q.labels == nil {
		return "", fmt.Errorf("no label maps to %s: the rule has no resources", gr)
	}
	l, err := q.labels.LabelFor(gr)
	if err != nil {
		return "", err
	}
	if !IsLabelName(l) {
		return "", fmt.Errorf("label %q for %s is not a Prometheus label name", l, gr)
	}
	return l, nil
}

// metricNameRE is the classic metric name syntax. Series names come from
// discovery, not from requests, but Prometheus 3 accepts any UTF-8 name,
// and one spliced into the query must not change its structure.
var metricNameRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)

func (q *Query) execute(series string, parts []part, groupBy string, groupBySlice []string) (string, error) {
	if series != "" && !metricNameRE.MatchString(series) {
		return "", fmt.Errorf("series name %q is not a classic Prometheus metric name, so it cannot be written into a query", series)
	}
	matchers := make([]string, len(parts))
	byName := make(map[string]string, len(parts))
	for i, p := range parts {
		matchers[i] = p.m.String()
		// Later parts win, so the namespace and the resource label cannot
		// be overridden by the selector.
		byName[p.m.Name] = Escape(RegexAlternation(p.values))
	}
	out, err := tmpl.Execute(q.t, tmpl.QueryArgs{
		Series:            series,
		LabelMatchers:     strings.Join(matchers, ","),
		LabelValuesByName: byName,
		GroupBy:           groupBy,
		GroupBySlice:      groupBySlice,
	})
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(out) == "" {
		return "", errors.New("the query template rendered an empty query")
	}
	return out, nil
}
