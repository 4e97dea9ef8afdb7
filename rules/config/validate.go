package config

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"text/template"
	"unicode"
	"unicode/utf8"

	"github.com/prometheus/prometheus/promql/parser"

	"github.com/tidal-autoscaler/tidal/rules/tmpl"
)

// promParser accepts every optional PromQL feature: a query the file's
// backend understands must not be reported here. Backends with their own
// dialects (e.g. MetricsQL) may still accept more than this parser.
var promParser = parser.NewParser(parser.Options{
	EnableExperimentalFunctions:  true,
	ExperimentalDurationExpr:     true,
	EnableExtendedRangeSelectors: true,
	EnableBinopFillModifiers:     true,
})

// ParsePromQL parses a query with promParser: the adapter reads queries
// (a query's window) with the parser the rule checks accept them with.
func ParsePromQL(query string) (parser.Expr, error) { return promParser.ParseExpr(query) }

var labelNameRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// IsLabelName reports whether s is a Prometheus label name in the classic
// (quote-free) syntax, the only one rule templates can safely splice in.
func IsLabelName(s string) bool { return labelNameRE.MatchString(s) }

// Validate checks a decoded config and returns every problem, in no
// particular order. Parse calls it; call it yourself for a Config built in
// code. Resource names are not normalised here (see naming.Check).
func Validate(cfg *Config) Problems {
	v := &validator{file: cfg.File}
	names := v.backends(cfg.Backends)
	for i, r := range cfg.Rules {
		v.rule(r, fmt.Sprintf("rules[%d]", i), false, names)
	}
	for i, r := range cfg.ExternalRules {
		v.rule(r, fmt.Sprintf("externalRules[%d]", i), true, names)
	}
	if cfg.ResourceRules != nil {
		v.resourceRules(cfg.ResourceRules)
	}
	return v.problems
}

type validator struct {
	file     string
	problems Problems
}

func (v *validator) add(pos Pos, format string, args ...any) {
	v.problems.Add(v.file, pos, format, args...)
}

func (v *validator) backends(bs []Backend) []string {
	var names []string
	for i, b := range bs {
		path := fmt.Sprintf("backends[%d]", i)
		switch {
		case b.Name == "":
			v.add(b.Pos.Of("name"), "%s.name is empty; name the backend so rules can refer to it with backend: NAME", path)
		case slices.Contains(names, b.Name):
			v.add(b.Pos.Of("name"), "%s.name %q is used by another backend; give each backend its own name", path, b.Name)
		default:
			names = append(names, b.Name)
		}
		if b.URL == "" {
			v.add(b.Pos.Of("url"), "%s.url is empty; set it to the Prometheus API base URL, e.g. http://prometheus.monitoring.svc:9090", path)
		} else if u, err := url.Parse(b.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.add(b.Pos.Of("url"), "%s.url %q is not an http(s) URL; write it like http://prometheus.monitoring.svc:9090", path, b.URL)
		}
		keys := make([]string, 0, len(b.Headers))
		for k := range b.Headers {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if !isHeaderName(k) {
				v.add(b.Pos.Of("headers."+k), "%s.headers: %q is not a valid HTTP header name; use letters, digits and '-', e.g. X-Scope-OrgID", path, k)
			}
			if strings.ContainsAny(b.Headers[k], "\r\n\x00") {
				v.add(b.Pos.Of("headers."+k), "%s.headers.%s holds a line break or NUL; header values must be one line", path, k)
			}
			if strings.EqualFold(k, "Authorization") && (b.InheritAuth || b.TokenFile != "" || b.HTTPConfig != "") {
				v.add(b.Pos.Of("headers."+k), "%s.headers.%s and the backend's tokenFile, httpConfig or inheritAuth both set the credentials; set them in one place", path, k)
			}
		}
		v.backendAuth(b, path)
	}
	return names
}

// backendAuth checks how a backend is authenticated. The files are not
// read here (the adapter reads them when it builds the backend), but they
// must be absolute: a relative path would depend on the adapter's working
// directory.
func (v *validator) backendAuth(b Backend, path string) {
	files := []struct{ field, value string }{
		{"tokenFile", b.TokenFile},
		{"caFile", b.CAFile},
		{"clientCertFile", b.ClientCertFile},
		{"clientKeyFile", b.ClientKeyFile},
		{"httpConfig", b.HTTPConfig},
	}
	var own []string
	for _, f := range files {
		if f.value == "" {
			continue
		}
		own = append(own, f.field)
		if !strings.HasPrefix(f.value, "/") {
			v.add(b.Pos.Of(f.field), "%s.%s %q is not an absolute path; mount the file into the adapter and give its absolute path, e.g. /var/run/tidal/backends/%s/%s", path, f.field, f.value, backendDir(b.Name), exampleFile(f.field))
		}
	}
	if (b.ClientCertFile == "") != (b.ClientKeyFile == "") {
		field := "clientCertFile"
		if b.ClientCertFile == "" {
			field = "clientKeyFile"
		}
		v.add(b.Pos.Of(field), "%s: clientCertFile and clientKeyFile must be set together", path)
	}
	if b.InheritAuth && len(own) > 0 {
		v.add(b.Pos.Of("inheritAuth"), "%s.inheritAuth sends the default backend's credentials and TLS settings, and %s say the backend's own; use one or the other", path, strings.Join(own, ", "))
	}
}

func backendDir(name string) string {
	if name == "" || strings.ContainsAny(name, "/ ") {
		return "NAME"
	}
	return name
}

func exampleFile(field string) string {
	switch field {
	case "tokenFile":
		return "token"
	case "caFile":
		return "ca.crt"
	case "clientCertFile":
		return "tls.crt"
	case "clientKeyFile":
		return "tls.key"
	}
	return "http-config.yaml"
}

func isHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r >= utf8.RuneSelf || !(unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("!#$%&'*+-.^_`|~", r)) {
			return false
		}
	}
	return true
}

func (v *validator) rule(r Rule, path string, external bool, backends []string) {
	v.seriesQuery(r, path)
	for i, f := range r.SeriesFilters {
		v.seriesFilter(f, fmt.Sprintf("%s.seriesFilters[%d]", path, i))
	}
	v.resourceMapping(r.Resources, path+".resources")
	v.name(r.Name, path+".name")
	v.metricsQuery(r, path, external)
	if r.Backend != "" && !slices.Contains(backends, r.Backend) {
		hint := "define it under backends"
		if len(backends) > 0 {
			hint = fmt.Sprintf("use one of %s or define it under backends", strings.Join(quoteAll(backends), ", "))
		}
		v.add(r.Pos.Of("backend"), "%s.backend: unknown backend %q; %s", path, r.Backend, hint)
	}
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

func (v *validator) seriesQuery(r Rule, path string) {
	pos := r.Pos.Of("seriesQuery")
	if r.Pos.Invalid("seriesQuery") {
		return
	}
	if strings.TrimSpace(r.SeriesQuery) == "" {
		v.add(pos, "%s.seriesQuery is empty; set it to a Prometheus series selector, e.g. '{__name__=~\"^http_.*_total$\",namespace!=\"\"}'", path)
		return
	}
	if _, err := promParser.ParseMetricSelector(r.SeriesQuery); err != nil {
		v.add(pos, "%s.seriesQuery is not a series selector (%s); write a selector such as 'http_requests_total{namespace!=\"\"}'", path, oneLine(err.Error()))
	}
}

func (v *validator) seriesFilter(f SeriesFilter, path string) {
	switch {
	case f.Is != "" && f.IsNot != "":
		v.add(f.Pos.Of("isNot"), "%s has both is and isNot; a filter takes one of them, so split it into two filters", path)
	case f.Is == "" && f.IsNot == "":
		v.add(f.Pos.Of(""), "%s has neither is nor isNot; set one of them to a regular expression on the series name", path)
	}
	for _, k := range []string{"is", "isNot"} {
		re := f.Is
		if k == "isNot" {
			re = f.IsNot
		}
		if re == "" {
			continue
		}
		if _, err := regexp.Compile(re); err != nil {
			v.add(f.Pos.Of(k), "%s.%s is not a valid regular expression (%s); fix it (RE2 syntax, as in Go)", path, k, regexpError(err))
		}
	}
}

func regexpError(err error) string {
	return strings.TrimPrefix(err.Error(), "error parsing regexp: ")
}

func (v *validator) name(n NameMapping, path string) {
	matches := n.Matches
	if matches == "" {
		matches = ".*"
	}
	re, err := regexp.Compile(matches)
	if err != nil {
		v.add(n.Pos.Of("matches"), "%s.matches is not a valid regular expression (%s); fix it (RE2 syntax, as in Go)", path, regexpError(err))
		return
	}
	if n.As == "" {
		if re.NumSubexp() > 1 {
			v.add(n.Pos.Of("matches"), "%s.matches has %d capture groups and %s.as is not set, so the metric name is ambiguous; set as, e.g. as: \"${1}_${2}\"", path, re.NumSubexp(), path)
		}
		return
	}
	for _, ref := range ExpandRefs(n.As) {
		if ref.Num >= 0 {
			if ref.Num > re.NumSubexp() {
				v.add(n.Pos.Of("as"), "%s.as uses $%s but %s.matches has %d capture group(s); use $0 to $%d", path, ref.Name, path, re.NumSubexp(), re.NumSubexp())
			}
			continue
		}
		if slices.Contains(re.SubexpNames()[1:], ref.Name) {
			continue
		}
		if digits := leadingDigits(ref.Name); digits != "" && !ref.Braced {
			v.add(n.Pos.Of("as"), "%s.as: $%s is read as a group named %q, which %s.matches does not have; write ${%s}%s", path, ref.Name, ref.Name, path, digits, ref.Name[len(digits):])
			continue
		}
		v.add(n.Pos.Of("as"), "%s.as uses the group %q, which %s.matches does not define; name it with (?P<%s>...) or use a group number", path, ref.Name, path, ref.Name)
	}
}

func leadingDigits(s string) string {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}

// ExpandRef is a `$name`, `${name}` or `$1` reference in a regexp.Expand
// template such as name.as.
type ExpandRef struct {
	Name   string
	Num    int // group number, or -1 for a named group
	Braced bool
}

// ExpandRefs lists the group references in template, parsed exactly as
// regexp.Regexp.Expand parses them (so `$1_total` is the group named
// "1_total", not group 1 followed by "_total").
func ExpandRefs(template string) []ExpandRef {
	var refs []ExpandRef
	for {
		i := strings.IndexByte(template, '$')
		if i < 0 {
			return refs
		}
		template = template[i+1:]
		if strings.HasPrefix(template, "$") {
			template = template[1:]
			continue
		}
		ref, rest, ok := extractRef(template)
		if !ok {
			continue // a lone "$" is kept literally by Expand
		}
		refs = append(refs, ref)
		template = rest
	}
}

// extractRef mirrors regexp's unexported extract.
func extractRef(s string) (ExpandRef, string, bool) {
	var ref ExpandRef
	if s == "" {
		return ref, s, false
	}
	if s[0] == '{' {
		ref.Braced = true
		s = s[1:]
	}
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' {
			break
		}
		i += size
	}
	if i == 0 {
		return ref, s, false
	}
	ref.Name = s[:i]
	if ref.Braced {
		if i >= len(s) || s[i] != '}' {
			return ref, s, false
		}
		i++
	}
	ref.Num = 0
	for j := 0; j < len(ref.Name); j++ {
		if ref.Name[j] < '0' || ref.Name[j] > '9' || ref.Num >= 1e8 {
			ref.Num = -1
			break
		}
		ref.Num = ref.Num*10 + int(ref.Name[j]-'0')
	}
	if ref.Name[0] == '0' && len(ref.Name) > 1 {
		ref.Num = -1
	}
	return ref, s[i:], true
}

func (v *validator) resourceMapping(m ResourceMapping, path string) {
	if m.Template != "" {
		v.resourceTemplate(m, path)
	}
	labels := make([]string, 0, len(m.Overrides))
	for l := range m.Overrides {
		labels = append(labels, l)
	}
	sort.Strings(labels)
	for _, l := range labels {
		gr := m.Overrides[l]
		if !IsLabelName(l) {
			v.add(gr.Pos.Of(""), "%s.overrides: %q is not a Prometheus label name; label names match [a-zA-Z_][a-zA-Z0-9_]*", path, l)
		}
		if strings.TrimSpace(gr.Resource) == "" {
			v.add(gr.Pos.Of("resource"), "%s.overrides.%s has no resource; write it like {group: \"apps\", resource: \"deployment\"}", path, l)
		}
	}
}

func (v *validator) resourceTemplate(m ResourceMapping, path string) {
	pos := m.Pos.Of("template")
	t, ok := v.template(pos, path+".template", m.Template, tmpl.ResourceFields)
	if !ok {
		return
	}
	hasResource := slices.ContainsFunc(tmpl.RootFields(t), func(f tmpl.FieldRef) bool { return f.Name == "Resource" })
	if !hasResource {
		v.add(pos, "%s.template does not use <<.Resource>>, so no label can be matched back to a resource; include it, e.g. kube_<<.Group>>_<<.Resource>>", path)
		return
	}
	for _, sample := range []tmpl.ResourceArgs{{Group: "apps", Resource: "deployment"}, {Group: "", Resource: "pod"}} {
		out, err := tmpl.Execute(t, sample)
		if err != nil {
			v.add(pos, "%s.template fails for %s/%s (%s); fix the template", path, sample.Group, sample.Resource, oneLine(err.Error()))
			return
		}
		if !IsLabelName(out) {
			v.add(pos, "%s.template renders %q for group %q and resource %q, which is not a Prometheus label name; use only letters, digits and _ around the fields", path, out, sample.Group, sample.Resource)
			return
		}
	}
}

// template parses text and checks its field references; ok is false when
// there is no point in executing it.
func (v *validator) template(pos Pos, path, text string, fields []string) (*template.Template, bool) {
	t, err := tmpl.Parse(path, text)
	if err != nil {
		v.add(pos, "%s does not parse as a template (%s); fields are written <<.Name>>", path, templateError(err, path))
		return nil, false
	}
	ok := true
	for _, ref := range tmpl.RootFields(t) {
		if slices.Contains(fields, ref.Name) {
			continue
		}
		ok = false
		hint := ""
		if s := closest(ref.Name, fields); s != "" {
			hint = fmt.Sprintf(" (did you mean .%s?)", s)
		}
		v.add(pos, "%s uses the unknown field .%s%s; available fields are .%s", path, ref.Name, hint, strings.Join(fields, ", ."))
	}
	return t, ok
}

func templateError(err error, name string) string {
	return oneLine(strings.TrimPrefix(err.Error(), "template: "+name+":"))
}

// knownMistakes are field names people write because documentation used
// them: prometheus-adapter's code comments call LabelValuesByName
// "LabelMatchersByName".
var knownMistakes = map[string]string{"LabelMatchersByName": "LabelValuesByName"}

func closest(name string, options []string) string {
	if s, ok := knownMistakes[name]; ok && slices.Contains(options, s) {
		return s
	}
	best, bestDist := "", 4
	for _, o := range options {
		d := editDistance(strings.ToLower(name), strings.ToLower(o))
		if strings.HasPrefix(strings.ToLower(o), strings.ToLower(name)) || strings.HasPrefix(strings.ToLower(name), strings.ToLower(o)) {
			d = min(d, 1)
		}
		if d < bestDist {
			best, bestDist = o, d
		}
	}
	return best
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// Sample requests used to render query templates. Checking the output
// with the PromQL parser catches unbalanced brackets and quotes before a
// real request does. Values are what package promql would produce.
var (
	customSample = tmpl.QueryArgs{
		Series:            "sample_metric_total",
		LabelMatchers:     `namespace="sample-namespace",pod=~"sample-pod-1|sample-pod-2"`,
		LabelValuesByName: map[string]string{"namespace": "sample-namespace", "pod": "sample-pod-1|sample-pod-2"},
		GroupBy:           "pod",
		GroupBySlice:      []string{"pod"},
	}
	externalSamples = []tmpl.QueryArgs{
		{
			Series:            "sample_metric_total",
			LabelMatchers:     `queue="sample-queue",namespace="sample-namespace"`,
			LabelValuesByName: map[string]string{"queue": "sample-queue", "namespace": "sample-namespace"},
			GroupBySlice:      []string{},
		},
	}
	// With namespaced: false and no metric selector, there are no matchers.
	externalEmptySample = tmpl.QueryArgs{
		Series:            "sample_metric_total",
		LabelValuesByName: map[string]string{},
		GroupBySlice:      []string{},
	}
)

func (v *validator) metricsQuery(r Rule, path string, external bool) {
	pos := r.Pos.Of("metricsQuery")
	path += ".metricsQuery"
	if r.Pos.Invalid("metricsQuery") {
		return
	}
	if strings.TrimSpace(r.MetricsQuery) == "" {
		v.add(pos, "%s is empty; set it to a PromQL template, e.g. 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'", path)
		return
	}
	t, ok := v.template(pos, path, r.MetricsQuery, tmpl.QueryFields)
	if !ok {
		return
	}
	samples := []tmpl.QueryArgs{customSample}
	if external {
		samples = externalSamples
		if !r.Resources.IsNamespaced() {
			samples = append(samples, externalEmptySample)
		}
	}
	for _, s := range samples {
		if !v.renders(t, pos, path, s) {
			return
		}
	}
}

// renders executes a query template on a sample and parses the result.
func (v *validator) renders(t *template.Template, pos Pos, path string, sample tmpl.QueryArgs) bool {
	out, err := tmpl.Execute(t, sample)
	if err != nil {
		v.add(pos, "%s fails on a sample request (%s); fix the template", path, templateError(err, path))
		return false
	}
	when := "for a sample request"
	if sample.LabelMatchers == "" {
		when = "when the request has no label selector (namespaced: false)"
	}
	if strings.TrimSpace(out) == "" {
		v.add(pos, "%s renders an empty query %s; make it produce PromQL", path, when)
		return false
	}
	if _, err := promParser.ParseExpr(out); err != nil {
		v.add(pos, "%s renders PromQL that does not parse %s (%s): %s; check the brackets, quotes and commas around <<...>>", path, when, oneLine(err.Error()), oneLine(out))
		return false
	}
	if len(sample.LabelValuesByName) > 0 && !labelValuesQuoted(t, sample) {
		v.add(pos, "%s uses .LabelValuesByName outside a double-quoted string; its values are escaped for the inside of \"...\" only (in '...', `...` or bare text a request's value could change the query), so write it as label=~\"<<index .LabelValuesByName \"label\">>\"", path)
		return false
	}
	return true
}

// labelValuesQuoted reports whether t, run on sample, places every value
// of .LabelValuesByName inside a PromQL double-quoted string, the only
// place package promql escapes them for. Each value is replaced with a
// marker, the key of every string constant of t too (a label that
// <<index .LabelValuesByName "x">> names need not be in the sample), and
// the output is scanned for markers outside "...".
func labelValuesQuoted(t *template.Template, sample tmpl.QueryArgs) bool {
	values := map[string]string{}
	var markers []string
	mark := func(k string) {
		if _, ok := values[k]; !ok {
			m := fmt.Sprintf("tidalLabelValue%dMarker", len(markers))
			values[k] = m
			markers = append(markers, m)
		}
	}
	for k := range sample.LabelValuesByName {
		mark(k)
	}
	for _, k := range tmpl.StringConstants(t) {
		mark(k)
	}
	sample.LabelValuesByName = values
	out, err := tmpl.Execute(t, sample)
	if err != nil {
		return true // reported by the rendering with the sample itself
	}
	inDouble := doubleQuoted(out)
	for _, m := range markers {
		for i := 0; ; {
			j := strings.Index(out[i:], m)
			if j < 0 {
				break
			}
			if !inDouble[i+j] {
				return false
			}
			i += j + len(m)
		}
	}
	return true
}

// doubleQuoted returns, for each byte of the PromQL text q, whether it is
// inside a double-quoted string literal (between the quotes).
func doubleQuoted(q string) []bool {
	in := make([]bool, len(q))
	var open byte // the quote of the string being read; 0 outside
	comment := false
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case comment:
			comment = c != '\n'
		case open == 0:
			switch c {
			case '"', '\'', '`':
				open = c
			case '#':
				comment = true
			}
		case c == open:
			open = 0
		case c == '\\' && open != '`':
			in[i] = open == '"'
			if i+1 < len(q) {
				i++
				in[i] = open == '"'
			}
		default:
			in[i] = open == '"'
		}
	}
	return in
}

func (v *validator) resourceRules(rr *ResourceRules) {
	for _, res := range []struct {
		key  string
		rule ResourceRule
	}{{"cpu", rr.CPU}, {"memory", rr.Memory}} {
		path := "resourceRules." + res.key
		if rr.Pos.Invalid(res.key) {
			continue
		}
		if !rr.Pos.Has(res.key) {
			v.add(rr.Pos.Of(""), "%s is missing; metrics.k8s.io needs both cpu and memory rules, so add it (or remove resourceRules)", path)
			continue
		}
		r := res.rule
		v.resourceMapping(r.Resources, path+".resources")
		container := r.ContainerLabel
		switch {
		case r.Pos.Invalid("containerLabel"):
			container = "container"
		case container == "":
			v.add(r.Pos.Of("containerLabel"), "%s.containerLabel is empty; set it to the label holding the container name, usually container", path)
			container = "container"
		case !IsLabelName(container):
			v.add(r.Pos.Of("containerLabel"), "%s.containerLabel %q is not a Prometheus label name; label names match [a-zA-Z_][a-zA-Z0-9_]*", path, container)
			container = "container"
		}
		podSample := tmpl.QueryArgs{
			LabelMatchers:     `namespace="sample-namespace",pod=~"sample-pod-1|sample-pod-2"`,
			LabelValuesByName: map[string]string{"namespace": "sample-namespace", "pod": "sample-pod-1|sample-pod-2"},
			GroupBy:           "pod," + container,
			GroupBySlice:      []string{"pod", container},
		}
		nodeSample := tmpl.QueryArgs{
			LabelMatchers:     `node=~"sample-node-1|sample-node-2"`,
			LabelValuesByName: map[string]string{"node": "sample-node-1|sample-node-2"},
			GroupBy:           "node",
			GroupBySlice:      []string{"node"},
		}
		for _, q := range []struct {
			key, text string
			sample    tmpl.QueryArgs
		}{{"containerQuery", r.ContainerQuery, podSample}, {"nodeQuery", r.NodeQuery, nodeSample}} {
			qpath, pos := path+"."+q.key, r.Pos.Of(q.key)
			if r.Pos.Invalid(q.key) {
				continue
			}
			if strings.TrimSpace(q.text) == "" {
				v.add(pos, "%s is empty; set it to a PromQL template, e.g. 'sum(rate(container_cpu_usage_seconds_total{<<.LabelMatchers>>}[5m])) by (<<.GroupBy>>)'", qpath)
				continue
			}
			if t, ok := v.template(pos, qpath, q.text, tmpl.QueryFields); ok {
				v.renders(t, pos, qpath, q.sample)
			}
		}
	}
}
