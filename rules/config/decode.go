package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/prometheus/common/model"
	yaml "go.yaml.in/yaml/v3"
)

// The file is decoded by walking a yaml.Node tree (go.yaml.in/yaml/v3, the
// maintained yaml.v3) rather than by yaml.Unmarshal with KnownFields or
// sigs.k8s.io/yaml's strict mode: both stop at the first problem and lose
// positions (sigs.k8s.io/yaml goes through JSON), while the walk reports
// every unknown field, wrong type and duplicate key at once and records the
// line and column of every value for the checks that run after it.

// decoder walks one document, collecting problems instead of stopping.
type decoder struct {
	file     string
	problems Problems
	// merging holds the mappings being merged, to stop at an anchor
	// merged into itself (`&a {<<: *a}`), which YAML allows.
	merging map[*yaml.Node]bool
	// budget is how many more mapping entries and list items the walk may
	// visit; aliases and merge keys visit what they refer to again, so
	// nested ones multiply (a YAML "billion laughs"). exhausted is the
	// problem saying it ran out; the walk then stops.
	budget    int
	exhausted *Problem
}

// Expansion limits: the walk may visit ExpansionFactor times the entries
// and items written in the file, plus ExpansionBase. Merging one anchor
// into every rule stays far below it; only anchors nested in anchors
// reach it, and a bomb of a few hundred bytes stops within milliseconds.
const (
	ExpansionFactor = 10
	ExpansionBase   = 10000
)

// expansionBudget counts the mapping entries and list items written in
// the document, not following aliases, and returns how many the walk may
// visit.
func expansionBudget(root *yaml.Node) int {
	written := 0
	var count func(n *yaml.Node)
	count = func(n *yaml.Node) {
		switch n.Kind {
		case yaml.MappingNode:
			written += len(n.Content) / 2
		case yaml.SequenceNode:
			written += len(n.Content)
		}
		for _, c := range n.Content {
			count(c)
		}
	}
	count(root)
	return ExpansionFactor*written + ExpansionBase
}

// spend takes one visit of n (a mapping entry or list item) from the
// budget, and reports whether the walk may go on.
func (d *decoder) spend(n *yaml.Node) bool {
	if d.exhausted != nil {
		return false
	}
	d.budget--
	if d.budget >= 0 {
		return true
	}
	p := posOf(n)
	d.exhausted = &Problem{File: d.file, Line: p.Line, Column: p.Column}
	d.exhausted.Message = fmt.Sprintf("aliases (*name) and merge keys (<<) expand the rule file past %d times the entries written in it (plus %d), as anchors nested in anchors do; the file was not loaded: write the repeated parts out, or merge each anchor directly rather than through other anchors", ExpansionFactor, ExpansionBase)
	return false
}

func posOf(n *yaml.Node) Pos {
	if n == nil {
		return Pos{}
	}
	return Pos{Line: n.Line, Column: n.Column}
}

func (d *decoder) add(n *yaml.Node, format string, args ...any) {
	d.problems.Add(d.file, posOf(n), format, args...)
}

// resolve follows aliases (`*name`) to the anchored node.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("the value %q", n.Value)
	}
	return "nothing"
}

// field is one known key of a mapping and how to decode its value.
type field struct {
	name   string
	decode func(v *yaml.Node)
}

type entry struct {
	key     string
	keyNode *yaml.Node
	valNode *yaml.Node
}

// entries lists the key/value pairs of mapping n in file order, with merge
// keys (`<<: *anchor`, supported by prometheus-adapter's YAML library)
// applied: explicit keys win over merged ones.
func (d *decoder) entries(n *yaml.Node, path string) []entry {
	var own, merged []entry
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !d.spend(k) {
			return nil
		}
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merged = append(merged, d.mergeEntries(v, path)...)
			continue
		}
		k = resolve(k)
		if k.Kind != yaml.ScalarNode {
			d.add(k, "%s: a key is %s; keys must be plain names", path, kindName(k))
			continue
		}
		own = append(own, entry{key: k.Value, keyNode: k, valNode: v})
	}
	seen := map[string]*yaml.Node{}
	out := make([]entry, 0, len(own)+len(merged))
	for _, e := range own {
		if first, dup := seen[e.key]; dup {
			d.add(e.keyNode, "%s: key %q is repeated (first at line %d); remove one of them", path, e.key, first.Line)
			continue
		}
		seen[e.key] = e.keyNode
		out = append(out, e)
	}
	for _, e := range merged {
		if _, dup := seen[e.key]; !dup {
			seen[e.key] = e.keyNode
			out = append(out, e)
		}
	}
	return out
}

func (d *decoder) mergeEntries(v *yaml.Node, path string) []entry {
	v = resolve(v)
	if d.merging[v] {
		d.add(v, "%s: a merge key (<<) includes the mapping it is in; remove it", path)
		return nil
	}
	if d.merging == nil {
		d.merging = map[*yaml.Node]bool{}
	}
	d.merging[v] = true
	defer delete(d.merging, v)
	switch v.Kind {
	case yaml.MappingNode:
		return d.entries(v, path)
	case yaml.SequenceNode:
		// Earlier maps in a merge list win over later ones.
		var out []entry
		seen := map[string]bool{}
		for _, m := range v.Content {
			if !d.spend(m) {
				return nil
			}
			for _, e := range d.mergeEntries(m, path) {
				if !seen[e.key] {
					seen[e.key] = true
					out = append(out, e)
				}
			}
		}
		return out
	}
	d.add(v, "%s: a merge key (<<) must refer to a mapping, found %s", path, kindName(v))
	return nil
}

// mapping decodes mapping n with the given known fields, recording the
// position of n and of each value in pos. Unknown keys are problems, with a
// suggestion when one is close to a known field.
func (d *decoder) mapping(n *yaml.Node, path string, pos Positions, fields ...field) {
	if n != nil && n.Kind == yaml.AliasNode {
		pos[""] = posOf(n)
	}
	n = resolve(n)
	if _, ok := pos[""]; !ok {
		pos[""] = posOf(n)
	}
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.add(n, "%s: expected a mapping of %s, found %s", path, fieldList(fields), kindName(n))
		return
	}
	for _, e := range d.entries(n, path) {
		i := slices.IndexFunc(fields, func(f field) bool { return f.name == e.key })
		if i < 0 {
			hint := ""
			if s := suggest(e.key, fields); s != "" {
				hint = fmt.Sprintf(" (did you mean %q?)", s)
				pos["!"+s] = posOf(e.keyNode)
			}
			d.add(e.keyNode, "%s: unknown field %q%s; valid fields are %s", path, e.key, hint, fieldList(fields))
			continue
		}
		pos[e.key] = posOf(resolve(e.valNode))
		before := len(d.problems)
		fields[i].decode(e.valNode)
		if len(d.problems) > before {
			pos["!"+e.key] = posOf(resolve(e.valNode))
		}
	}
}

func fieldList(fields []field) string {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.name
	}
	return strings.Join(names, ", ")
}

// suggest returns the known field a misspelled key was probably meant to
// be (a wrong case or a typo of up to two letters), or "".
func suggest(key string, fields []field) string {
	best, bestDist := "", 3
	for _, f := range fields {
		if strings.EqualFold(f.name, key) {
			return f.name
		}
		if dist := editDistance(strings.ToLower(key), strings.ToLower(f.name)); dist < bestDist {
			best, bestDist = f.name, dist
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// str decodes a scalar as a string. Like prometheus-adapter's YAML library,
// any scalar is accepted as its text (`matches: 123` is "123").
func (d *decoder) str(n *yaml.Node, path string) string {
	n = resolve(n)
	if isNull(n) {
		return ""
	}
	if n.Kind != yaml.ScalarNode {
		d.add(n, "%s: expected a string, found %s; quote the value if it is meant as text", path, kindName(n))
		return ""
	}
	return n.Value
}

// yaml11Bools are the booleans of YAML 1.1, which prometheus-adapter's
// YAML library (yaml.v2) accepts and YAML 1.2 parsers read as strings.
var yaml11Bools = map[string]bool{
	"y": true, "Y": true, "yes": true, "Yes": true, "YES": true, "on": true, "On": true, "ON": true,
	"n": false, "N": false, "no": false, "No": false, "NO": false, "off": false, "Off": false, "OFF": false,
	"true": true, "True": true, "TRUE": true, "false": false, "False": false, "FALSE": false,
}

func (d *decoder) boolean(n *yaml.Node, path string) *bool {
	n = resolve(n)
	if isNull(n) {
		return nil
	}
	if n.Kind == yaml.ScalarNode && n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) == 0 {
		if b, ok := yaml11Bools[n.Value]; ok {
			return &b
		}
	}
	if n.Kind == yaml.ScalarNode && n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
		d.add(n, "%s: expected true or false, found the string %q; remove the quotes", path, n.Value)
		return nil
	}
	d.add(n, "%s: expected true or false, found %s", path, kindName(n))
	return nil
}

func (d *decoder) duration(n *yaml.Node, path string) model.Duration {
	s := d.str(n, path)
	if s == "" {
		return 0
	}
	dur, err := model.ParseDuration(s)
	if err != nil {
		d.add(resolve(n), "%s: %q is not a duration; write a Prometheus duration such as 1m or 5m", path, s)
		return 0
	}
	return dur
}

// list calls each for every item of sequence n.
func (d *decoder) list(n *yaml.Node, path string, each func(i int, item *yaml.Node)) {
	n = resolve(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.SequenceNode {
		d.add(n, "%s: expected a list (items starting with \"- \"), found %s", path, kindName(n))
		return
	}
	for i, item := range n.Content {
		if !d.spend(item) {
			return
		}
		each(i, item)
	}
}

// stringMap decodes a mapping of names to strings, calling each in file order.
func (d *decoder) stringMap(n *yaml.Node, path string, each func(key string, keyNode, val *yaml.Node)) {
	n = resolve(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.add(n, "%s: expected a mapping, found %s", path, kindName(n))
		return
	}
	for _, e := range d.entries(n, path) {
		each(e.key, e.keyNode, e.valNode)
	}
}

func (d *decoder) config(n *yaml.Node) *Config {
	cfg := &Config{File: d.file, Pos: Positions{}}
	d.mapping(n, "file", cfg.Pos,
		field{"rules", func(v *yaml.Node) { cfg.Rules = d.rules(v, "rules") }},
		field{"externalRules", func(v *yaml.Node) { cfg.ExternalRules = d.rules(v, "externalRules") }},
		field{"resourceRules", func(v *yaml.Node) {
			if !isNull(resolve(v)) {
				cfg.ResourceRules = d.resourceRules(v, "resourceRules")
			}
		}},
		field{"backends", func(v *yaml.Node) { cfg.Backends = d.backends(v, "backends") }},
	)
	return cfg
}

func (d *decoder) rules(n *yaml.Node, path string) []Rule {
	var rules []Rule
	d.list(n, path, func(i int, item *yaml.Node) {
		rules = append(rules, d.rule(item, fmt.Sprintf("%s[%d]", path, i)))
	})
	return rules
}

func (d *decoder) rule(n *yaml.Node, path string) Rule {
	r := Rule{Pos: Positions{}}
	d.mapping(n, path, r.Pos,
		field{"seriesQuery", func(v *yaml.Node) { r.SeriesQuery = d.str(v, path+".seriesQuery") }},
		field{"seriesFilters", func(v *yaml.Node) {
			d.list(v, path+".seriesFilters", func(i int, item *yaml.Node) {
				r.SeriesFilters = append(r.SeriesFilters, d.seriesFilter(item, fmt.Sprintf("%s.seriesFilters[%d]", path, i)))
			})
		}},
		field{"resources", func(v *yaml.Node) { r.Resources = d.resourceMapping(v, path+".resources") }},
		field{"name", func(v *yaml.Node) { r.Name = d.nameMapping(v, path+".name") }},
		field{"metricsQuery", func(v *yaml.Node) { r.MetricsQuery = d.str(v, path+".metricsQuery") }},
		field{"backend", func(v *yaml.Node) { r.Backend = d.str(v, path+".backend") }},
	)
	return r
}

func (d *decoder) seriesFilter(n *yaml.Node, path string) SeriesFilter {
	f := SeriesFilter{Pos: Positions{}}
	d.mapping(n, path, f.Pos,
		field{"is", func(v *yaml.Node) { f.Is = d.str(v, path+".is") }},
		field{"isNot", func(v *yaml.Node) { f.IsNot = d.str(v, path+".isNot") }},
	)
	return f
}

// resourceMapping decodes `resources`. prometheus-adapter uses one type for
// every rule kind, so `namespaced` is accepted everywhere (and only means
// something in externalRules).
func (d *decoder) resourceMapping(n *yaml.Node, path string) ResourceMapping {
	m := ResourceMapping{Pos: Positions{}}
	d.mapping(n, path, m.Pos,
		field{"template", func(v *yaml.Node) { m.Template = d.str(v, path+".template") }},
		field{"overrides", func(v *yaml.Node) { m.Overrides = d.overrides(v, path+".overrides") }},
		field{"namespaced", func(v *yaml.Node) { m.Namespaced = d.boolean(v, path+".namespaced") }},
	)
	return m
}

func (d *decoder) overrides(n *yaml.Node, path string) map[string]GroupResource {
	out := map[string]GroupResource{}
	d.stringMap(n, path, func(label string, keyNode, v *yaml.Node) {
		p := fmt.Sprintf("%s.%s", path, label)
		gr := GroupResource{Pos: Positions{"": posOf(keyNode)}}
		d.mapping(v, p, gr.Pos,
			field{"group", func(v *yaml.Node) { gr.Group = d.str(v, p+".group") }},
			field{"resource", func(v *yaml.Node) { gr.Resource = d.str(v, p+".resource") }},
		)
		out[label] = gr
	})
	return out
}

func (d *decoder) nameMapping(n *yaml.Node, path string) NameMapping {
	m := NameMapping{Pos: Positions{}}
	d.mapping(n, path, m.Pos,
		field{"matches", func(v *yaml.Node) { m.Matches = d.str(v, path+".matches") }},
		field{"as", func(v *yaml.Node) { m.As = d.str(v, path+".as") }},
	)
	return m
}

func (d *decoder) resourceRules(n *yaml.Node, path string) *ResourceRules {
	rr := &ResourceRules{Pos: Positions{}}
	d.mapping(n, path, rr.Pos,
		field{"cpu", func(v *yaml.Node) { rr.CPU = d.resourceRule(v, path+".cpu") }},
		field{"memory", func(v *yaml.Node) { rr.Memory = d.resourceRule(v, path+".memory") }},
		field{"window", func(v *yaml.Node) { rr.Window = d.duration(v, path+".window") }},
	)
	return rr
}

func (d *decoder) resourceRule(n *yaml.Node, path string) ResourceRule {
	r := ResourceRule{Pos: Positions{}}
	d.mapping(n, path, r.Pos,
		field{"containerQuery", func(v *yaml.Node) { r.ContainerQuery = d.str(v, path+".containerQuery") }},
		field{"nodeQuery", func(v *yaml.Node) { r.NodeQuery = d.str(v, path+".nodeQuery") }},
		field{"resources", func(v *yaml.Node) { r.Resources = d.resourceMapping(v, path+".resources") }},
		field{"containerLabel", func(v *yaml.Node) { r.ContainerLabel = d.str(v, path+".containerLabel") }},
	)
	return r
}

func (d *decoder) backends(n *yaml.Node, path string) []Backend {
	var out []Backend
	d.list(n, path, func(i int, item *yaml.Node) {
		p := fmt.Sprintf("%s[%d]", path, i)
		b := Backend{Pos: Positions{}}
		d.mapping(item, p, b.Pos,
			field{"name", func(v *yaml.Node) { b.Name = d.str(v, p+".name") }},
			field{"url", func(v *yaml.Node) { b.URL = d.str(v, p+".url") }},
			field{"headers", func(v *yaml.Node) {
				d.stringMap(v, p+".headers", func(k string, keyNode, v *yaml.Node) {
					if b.Headers == nil {
						b.Headers = map[string]string{}
					}
					b.Headers[k] = d.str(v, p+".headers."+k)
					b.Pos["headers."+k] = posOf(keyNode)
				})
			}},
			field{"tokenFile", func(v *yaml.Node) { b.TokenFile = d.str(v, p+".tokenFile") }},
			field{"caFile", func(v *yaml.Node) { b.CAFile = d.str(v, p+".caFile") }},
			field{"clientCertFile", func(v *yaml.Node) { b.ClientCertFile = d.str(v, p+".clientCertFile") }},
			field{"clientKeyFile", func(v *yaml.Node) { b.ClientKeyFile = d.str(v, p+".clientKeyFile") }},
			field{"httpConfig", func(v *yaml.Node) { b.HTTPConfig = d.str(v, p+".httpConfig") }},
			field{"inheritAuth", func(v *yaml.Node) {
				if x := d.boolean(v, p+".inheritAuth"); x != nil {
					b.InheritAuth = *x
				}
			}},
		)
		out = append(out, b)
	})
	return out
}
